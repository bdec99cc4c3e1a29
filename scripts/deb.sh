#!/usr/bin/env bash
# Builds adoption's Debian packages with nfpm from bin/ (make build), one
# deploy/nfpm/<package>.yaml each:
#   adopt               the operator's CLI
#   adopt-worker        the adopt-worker binary the two below run
#   adopt-agent         agent and watchdog units, /etc/adoption, the node example
#   adopt-orchestrator  the orchestrator's unit and its examples
# Usage: NFPM=module/cmd/nfpm@version scripts/deb.sh OUTDIR VERSION
# (the Makefile pins NFPM; it is built with `go install module@version`).
set -euo pipefail
out=$1 version=$2
: "${NFPM:?NFPM names the pinned nfpm module (make deb sets it)}"
GO=${GO:-go}
# A Debian version starts with a digit and has no '-' (the revision, -1,
# is nfpm's release).
v=${version#v}
[[ $v =~ ^[0-9]+\.[0-9]+ ]] || v="0.0.0+git${v}"
export DEB_VERSION=${v//-/+}
export DEB_ARCH=${DEB_ARCH:-$($GO env GOARCH)}
export DEB_MAINTAINER=${DEB_MAINTAINER:-adoption maintainers <adoption@example.org>}
export DEB_HOMEPAGE=${DEB_HOMEPAGE:-https://github.com/adoption/adoption}
STAGE=$(mktemp -d)
export STAGE
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$out"

# The binaries without their symbol tables, as Debian ships binaries
# (the version stamped by make build stays).
for b in adopt adopt-worker; do
	strip --strip-unneeded --remove-section=.comment -o "$STAGE/$b" "bin/$b"
done
# Manual pages (cobra/doc, through each binary's hidden `man DIR`) and
# shell completions (cobra's `completion`), from the binaries' own
# commands, in a clean environment (no ADOPT_* default leaks into a page),
# dated by the commit for a reproducible build.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
for b in adopt adopt-worker; do
	mkdir -p "$STAGE/man/$b" "$STAGE/completions/$b"
	env -i SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" "bin/$b" man "$STAGE/man/$b"
	gzip -9n "$STAGE/man/$b"/*.1
	env -i "bin/$b" completion bash > "$STAGE/completions/$b/$b"
	env -i "bin/$b" completion zsh > "$STAGE/completions/$b/_$b"
	env -i "bin/$b" completion fish > "$STAGE/completions/$b/$b.fish"
done
# The units with Debian's paths.
for u in deploy/systemd/*.service; do
	sed -e 's|@BINDIR@|/usr/bin|g' -e 's|@SYSCONFDIR@|/etc|g' -e 's|@STATEDIR@|/var/lib/adoption|g' \
		"$u" > "$STAGE/$(basename "$u")"
done
# Debian wants a copyright file and a changelog in every package.
cat > "$STAGE/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: adoption
Source: $DEB_HOMEPAGE

Files: *
Copyright: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) adoption's authors
License: unspecified
 The project has not published a license yet; until it does, these
 packages are for the operators it is built for.
COPYRIGHT
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'adoption (%s-1) unstable; urgency=medium\n\n  * Built from %s (commit %s).\n\n -- %s  %s\n' \
	"$DEB_VERSION" "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$DEB_MAINTAINER" "$date" |
	gzip -9n > "$STAGE/changelog.Debian.gz"

# nfpm itself, built once from its pinned module (the module proxy and the
# Go build cache make it quick after the first time).
GOBIN="$STAGE/bin" $GO install "$NFPM"
for p in adopt adopt-worker adopt-agent adopt-orchestrator; do
	f="$out/${p}_${DEB_VERSION}-1_${DEB_ARCH}.deb"
	"$STAGE/bin/nfpm" package --packager deb --config "deploy/nfpm/$p.yaml" --target "$f" >/dev/null
	echo "$f"
done
