// Package testenv decides, in one place, what a test does when what it
// needs is not there: it fails and names the missing thing. A test tier is
// skipped only when ADOPT_UNIT_ONLY is set on purpose (make unit), which
// make test never does: a machine without ufw must not report green.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// UnitOnlyVar is the one switch that lets tests needing root or tools skip.
const UnitOnlyVar = "ADOPT_UNIT_ONLY"

// UnitOnly reports whether only unit tests were asked for.
func UnitOnly() bool { return os.Getenv(UnitOnlyVar) != "" }

// packages names the Debian package of each tool the tests use.
var packages = map[string]string{
	"nft": "nftables", "iptables": "iptables", "ip6tables": "iptables",
	"iptables-nft-restore": "iptables", "ip6tables-nft-restore": "iptables",
	"iptables-save": "iptables", "ip6tables-save": "iptables", "ipset": "ipset", "ip": "iproute2", "ufw": "ufw",
	"chromium": "chromium", "docker-compose": "docker-compose",
	"systemd-analyze": "systemd", "docker": "docker.io", "dockerd": "docker.io",
	"promtool": "prometheus", "lintian": "lintian", "strip": "binutils", "dpkg": "dpkg", "dpkg-deb": "dpkg",
}

// NeedRoot skips under ADOPT_UNIT_ONLY and otherwise fails a test that is
// not running as root, saying why it needs it.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if UnitOnly() {
		t.Skipf("needs root (%s): %s is set", why, UnitOnlyVar)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("needs root (%s): run `make test` as root, or set %s=1 to run only the unit tests", why, UnitOnlyVar)
	}
}

// NeedTools skips under ADOPT_UNIT_ONLY and otherwise fails naming every
// tool that is not on PATH, with the package that provides it.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	if UnitOnly() {
		t.Skipf("needs %s: %s is set", strings.Join(tools, ", "), UnitOnlyVar)
	}
	if msg := Missing(tools...); msg != "" {
		t.Fatal(msg)
	}
}

// Missing returns "" when every tool is on PATH, else one message naming
// each missing tool and how to install it.
func Missing(tools ...string) string {
	var miss, pkgs []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			miss = append(miss, tool)
			if p, ok := packages[tool]; ok && !contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	if len(miss) == 0 {
		return ""
	}
	msg := "missing tool(s): " + strings.Join(miss, ", ") + ": run `make deps` as root"
	if len(pkgs) > 0 {
		msg += " (apt-get install -y " + strings.Join(pkgs, " ") + ")"
	}
	return msg
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
