#!/usr/bin/env bash
# make deps: what `make test` needs on the machine, checked and (as root on
# Debian) installed, so that the README's `make test` sets itself up.
#
# Each tool is named with the Debian package that provides it. As root on
# Debian, the missing packages are installed with apt (one `apt-get update`,
# only when something is missing) and iptables is switched to the nf_tables
# backend the tests speak. Anywhere else (not root, not Debian), nothing is
# changed: the script stops with one message naming every missing tool and
# the command that installs it.
#
# For the tests of this script: ADOPT_DEPS_NONROOT=1 behaves as a non-root
# user would (reports, installs nothing).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# tool:package. docker-compose is checked apart (the v2 plugin also does).
tools=(
	nft:nftables
	iptables:iptables
	iptables-nft-restore:iptables
	ip6tables-nft-restore:iptables
	ipset:ipset
	ip:iproute2
	nsenter:util-linux
	ufw:ufw
	chromium:chromium
	systemd-analyze:systemd
	promtool:prometheus
	lintian:lintian
	strip:binutils
	dpkg:dpkg
	docker:docker.io
	dockerd:docker.io
)

missing_tools=()
missing_pkgs=()
add_missing() { # tool package
	missing_tools+=("$1")
	local p
	for p in "${missing_pkgs[@]}"; do [ "$p" = "$2" ] && return 0; done
	missing_pkgs+=("$2")
}

# ufw and iptables live in /usr/sbin, which a non-root PATH may lack.
has() { command -v "$1" >/dev/null 2>&1; }

check() {
	missing_tools=()
	missing_pkgs=()
	local pair
	for pair in "${tools[@]}"; do
		has "${pair%%:*}" || add_missing "${pair%%:*}" "${pair#*:}"
	done
	if ! has docker-compose && ! { has docker && docker compose version >/dev/null 2>&1; }; then
		add_missing docker-compose docker-compose
	fi
}

# backend prints the iptables alternative in force ("" when unknown).
backend() {
	has update-alternatives || return 0
	update-alternatives --query iptables 2>/dev/null | sed -n 's/^Value: //p'
}

is_root() { [ "$(id -u)" = 0 ] && [ -z "${ADOPT_DEPS_NONROOT:-}" ]; }
is_debian() { [ -f /etc/debian_version ] && has apt-get; }

# Go itself is not Debian's to give (go.mod wants a newer one than apt's):
# named, never installed here.
go_msg=""
if ! has go; then
	go_msg="go not found on PATH: install Go $(sed -n 's/^go //p' "$(dirname "$0")/../go.mod") (the version in go.mod) and put it on PATH (e.g. /usr/local/go/bin)"
fi

check
nft_backend_ok=1
case "$(backend)" in *legacy*) nft_backend_ok=0 ;; esac

if [ ${#missing_tools[@]} -eq 0 ] && [ $nft_backend_ok = 1 ] && [ -z "$go_msg" ]; then
	echo "deps: every tool make test needs is present (iptables backend: $(backend || true))"
	exit 0
fi

if ! is_root || ! is_debian; then
	why="not root"
	is_root && why="not Debian (no apt-get)"
	{
		echo "deps: make test cannot run here ($why). Missing:"
		[ -z "$go_msg" ] || echo "  $go_msg"
		for t in "${missing_tools[@]}"; do
			pkg=""
			for pair in "${tools[@]}" docker-compose:docker-compose; do
				[ "${pair%%:*}" = "$t" ] && pkg="${pair#*:}" && break
			done
			echo "  $t  (Debian package $pkg)"
		done
		[ $nft_backend_ok = 1 ] || echo "  iptables is on the legacy backend; the tests need nf_tables"
		echo "Install, as root on Debian:"
		[ ${#missing_pkgs[@]} -eq 0 ] || echo "  apt-get update && apt-get install -y ${missing_pkgs[*]}"
		[ $nft_backend_ok = 1 ] || echo "  update-alternatives --set iptables /usr/sbin/iptables-nft && update-alternatives --set ip6tables /usr/sbin/ip6tables-nft"
		echo "or run \`make deps\` (and \`make test\`) as root, which does it."
	} >&2
	exit 1
fi

# A package installed here only for its tool (prometheus for promtool)
# must not start its service: a policy-rc.d denies every start for the
# length of the install (one already there is left as it is), and the
# prometheus server it brings is disabled at once.
if [ ${#missing_pkgs[@]} -gt 0 ]; then
	echo "deps: installing ${missing_pkgs[*]} (missing: ${missing_tools[*]})"
	policy=/usr/sbin/policy-rc.d
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\n# written by adoption scripts/deps.sh for one apt-get install\nexit 101\n' > $policy
		chmod 0755 $policy
		trap 'rm -f '$policy EXIT
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}"
	for p in "${missing_pkgs[@]}"; do
		if [ "$p" = prometheus ] && has systemctl; then
			systemctl disable prometheus.service >/dev/null 2>&1 || true
		fi
	done
fi
# The tests speak iptables-nft (the nf_tables backend), as the seed's nodes do.
update-alternatives --set iptables /usr/sbin/iptables-nft >/dev/null
update-alternatives --set ip6tables /usr/sbin/ip6tables-nft >/dev/null

check
if [ ${#missing_tools[@]} -gt 0 ]; then
	echo "deps: still missing after apt-get install: ${missing_tools[*]}" >&2
	exit 1
fi
if [ -n "$go_msg" ]; then
	echo "deps: $go_msg" >&2
	exit 1
fi
echo "deps: every tool make test needs is present (iptables backend: $(backend))"
