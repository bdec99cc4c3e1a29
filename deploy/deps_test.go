// Package deploy holds what installs and runs adoption on a machine: the
// systemd units, and (in ../scripts/deps.sh) what make test needs. Its
// tests check both with the real tools.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A tool removed from the machine is named, with the command that installs
// it, when deps.sh may not install (not root): here ufw is hidden by a PATH
// that lacks /usr/sbin but links every other tool.
func TestDepsNamesMissingToolWithoutRoot(t *testing.T) {
	dir := t.TempDir()
	for _, tool := range []string{"nft", "iptables", "iptables-nft-restore", "ip6tables-nft-restore", "ipset", "ip",
		"chromium", "systemd-analyze", "promtool", "lintian", "strip", "dpkg", "docker", "docker-compose", "update-alternatives", "go"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("bash", "../scripts/deps.sh")
	cmd.Env = append(os.Environ(), "PATH="+dir+":/usr/bin:/bin", "ADOPT_DEPS_NONROOT=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("deps.sh succeeded without ufw:\n%s", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("deps.sh: want exit 1, got %v:\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{"not root", "  ufw  (Debian package ufw)", "apt-get install -y", "make deps"} {
		if !strings.Contains(s, want) {
			t.Errorf("deps.sh output lacks %q:\n%s", want, s)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "apt-get install -y") && !strings.Contains(line, " ufw") {
			t.Errorf("install command does not name ufw: %q", line)
		}
	}
}

// The modules the code requires directly are releases: no release
// candidate, alpha or beta (a pseudo-version of an untagged commit is
// named as such and allowed).
func TestNoPrereleaseModules(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{if not .Indirect}}{{.Path}} {{.Version}}{{end}}", "all")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	pre := regexp.MustCompile(`-(rc|alpha|beta|pre)([.\d]|$)`)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			n++
			if pre.MatchString(f[1]) {
				t.Errorf("go.mod requires %s %s, a pre-release: require a release", f[0], f[1])
			}
		}
	}
	if n < 10 || !pre.MatchString("v4.0.0-rc.6") || pre.MatchString("v1.7.3-0.20250113171957-fbb4dce95f42") {
		t.Fatalf("the check is broken: %d direct modules", n)
	}
}
