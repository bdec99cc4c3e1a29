#!/usr/bin/env bash
# Builds adoption's Debian packages with dpkg-deb from bin/ (make build):
#   adopt               the operator's CLI
#   adopt-worker        the adopt-worker binary the two below run
#   adopt-agent         agent and watchdog units, /etc/adoption, the node example
#   adopt-orchestrator  the orchestrator's unit and its example
# Usage: scripts/deb.sh OUTDIR VERSION
set -euo pipefail
out=$1 version=$2
# A Debian version starts with a digit and has no '-' without a revision.
v=${version#v}
[[ $v =~ ^[0-9]+\.[0-9]+ ]] || v="0.0.0+git${v}"
v=${v//-/+}-1
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

unit() { # unit NAME DEST: the unit with Debian's paths
	sed -e 's|@BINDIR@|/usr/bin|g' -e 's|@SYSCONFDIR@|/etc|g' -e 's|@STATEDIR@|/var/lib/adoption|g' \
		"deploy/systemd/$1" > "$2/lib/systemd/system/$1"
	chmod 0644 "$2/lib/systemd/system/$1"
}

control() { # control PKG DIR DEPENDS DESCRIPTION
	mkdir -p "$2/DEBIAN" "$2/usr/share/doc/$1"
	cat > "$2/DEBIAN/control" <<CONTROL
Package: $1
Version: $v
Architecture: $arch
Maintainer: adoption operators <adoption@localhost>
Section: admin
Priority: optional
${3:+Depends: $3
}Homepage: https://github.com/adoption/adoption
Description: $4
CONTROL
	printf 'adoption %s\nSee docs/operations.md in the source.\n' "$version" > "$2/usr/share/doc/$1/README"
	chmod 0644 "$2/usr/share/doc/$1/README"
}

build() { # build PKG DIR
	find "$2" -type d -exec chmod 0755 {} +
	dpkg-deb --root-owner-group -Zgzip --build "$2" "$out/${1}_${v}_${arch}.deb" >/dev/null
	echo "$out/${1}_${v}_${arch}.deb"
}

d=$stage/adopt
mkdir -p "$d/usr/bin"
install -m 0755 bin/adopt "$d/usr/bin/adopt"
control adopt "$d" "" "adoption's operator CLI (adopt)
 Starts and follows each node's migration onto the mesh on Temporal."
build adopt "$d"

d=$stage/adopt-worker
mkdir -p "$d/usr/bin"
install -m 0755 bin/adopt-worker "$d/usr/bin/adopt-worker"
control adopt-worker "$d" "" "adoption's worker binary (adopt-worker)
 Run as the node agent (adopt-agent) or the orchestrator (adopt-orchestrator)."
build adopt-worker "$d"

d=$stage/adopt-agent
mkdir -p "$d/lib/systemd/system" "$d/etc/adoption"
unit adopt-agent.service "$d"
unit adopt-watchdog.service "$d"
install -m 0644 config/example.yaml "$d/etc/adoption/node.example.yaml"
control adopt-agent "$d" "adopt-worker (= $v)" "adoption's node agent and flip watchdog (systemd units)
 Write /etc/adoption/node.yaml (from node.example.yaml), then
 systemctl enable --now adopt-agent. Nothing starts before that."
echo /etc/adoption/node.example.yaml > "$d/DEBIAN/conffiles"
install -m 0755 deploy/debian/adopt-agent.postinst "$d/DEBIAN/postinst"
install -m 0755 deploy/debian/adopt-agent.prerm "$d/DEBIAN/prerm"
install -m 0755 deploy/debian/postrm "$d/DEBIAN/postrm"
build adopt-agent "$d"

d=$stage/adopt-orchestrator
mkdir -p "$d/lib/systemd/system" "$d/etc/adoption"
unit adopt-orchestrator.service "$d"
install -m 0644 config/orchestrator.example.yaml "$d/etc/adoption/orchestrator.example.yaml"
install -m 0644 config/fleet.example.yaml "$d/etc/adoption/fleet.example.yaml"
control adopt-orchestrator "$d" "adopt-worker (= $v)" "adoption's orchestrator (systemd unit)
 Write /etc/adoption/orchestrator.yaml (from orchestrator.example.yaml), then
 systemctl enable --now adopt-orchestrator. Nothing starts before that."
printf '/etc/adoption/orchestrator.example.yaml\n/etc/adoption/fleet.example.yaml\n' > "$d/DEBIAN/conffiles"
install -m 0755 deploy/debian/adopt-orchestrator.postinst "$d/DEBIAN/postinst"
install -m 0755 deploy/debian/adopt-orchestrator.prerm "$d/DEBIAN/prerm"
install -m 0755 deploy/debian/postrm "$d/DEBIAN/postrm"
build adopt-orchestrator "$d"
