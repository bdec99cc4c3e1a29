package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"adoption/internal/testenv"
)

// make deb builds the four packages with nfpm; each holds what it should
// (the binaries' manual pages and shell completions, the units, the
// examples as conffiles), lintian finds no error and no warning in any but
// those its deploy/nfpm/<package>.lintian-overrides allows with a reason,
// and they install, upgrade, remove and purge with dpkg in a throwaway root
// (dpkg --root: the host's own package database and files are never
// touched). The maintainer scripts use debhelper's deb-systemd-helper and
// deb-systemd-invoke (the host's, under DPKG_ROOT). systemd is not PID 1
// here, so they meet a systemctl that records its calls (under
// DPKG_ROOT/run/systemd/system, as they check): installed without a
// configuration nothing is started and only the watchdog is enabled, an
// upgrade restarts only an agent that has its file, and neither an upgrade
// nor a removal ever stops the watchdog of a pending flip.
func TestDebianPackages(t *testing.T) {
	if msg := testenv.Missing("make", "go", "dpkg-deb", "dpkg", "lintian", "strip"); msg != "" {
		t.Fatal(msg)
	}
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run("make", "-s", "deb", "DEBDIR="+filepath.Join(dir, "v1"), "VERSION=v1.2.3")
	run("make", "-s", "deb", "DEBDIR="+filepath.Join(dir, "v2"), "VERSION=v1.2.4")
	deb := func(v, pkg, ver string) string {
		m, _ := filepath.Glob(filepath.Join(dir, v, pkg+"_"+ver+"_*.deb"))
		if len(m) != 1 {
			t.Fatalf("no single %s %s package in %s: %v", pkg, ver, v, m)
		}
		return m[0]
	}
	want := map[string][]string{
		"adopt": {"./usr/bin/adopt", "./usr/share/man/man1/adopt.1.gz", "./usr/share/man/man1/adopt-flip.1.gz",
			"./usr/share/man/man1/adopt-fleet-flip.1.gz", "./usr/share/bash-completion/completions/adopt",
			"./usr/share/zsh/vendor-completions/_adopt", "./usr/share/fish/vendor_completions.d/adopt.fish"},
		"adopt-worker": {"./usr/bin/adopt-worker", "./usr/share/man/man1/adopt-worker.1.gz", "./usr/share/man/man1/adopt-worker-run.1.gz",
			"./usr/share/man/man1/adopt-worker-orchestrate.1.gz", "./usr/share/man/man1/adopt-worker-watchdog.1.gz",
			"./usr/share/bash-completion/completions/adopt-worker", "./usr/share/zsh/vendor-completions/_adopt-worker",
			"./usr/share/fish/vendor_completions.d/adopt-worker.fish"},
		"adopt-agent":        {"./lib/systemd/system/adopt-agent.service", "./lib/systemd/system/adopt-watchdog.service", "./etc/adoption/node.example.yaml"},
		"adopt-orchestrator": {"./lib/systemd/system/adopt-orchestrator.service", "./etc/adoption/orchestrator.example.yaml", "./etc/adoption/fleet.example.yaml"},
	}
	for pkg, files := range want {
		f := deb("v1", pkg, "1.2.3-1")
		contents := run("dpkg-deb", "-c", f)
		for _, w := range files {
			if !strings.Contains(contents, " "+w+"\n") {
				t.Errorf("%s lacks %s:\n%s", pkg, w, contents)
			}
		}
		// lintian: no error, no warning but those the package's overrides
		// allow, each with its reason.
		checkOverrides(t, pkg)
		lint, _ := exec.Command("lintian", "--tag-display-limit", "0", f).CombinedOutput()
		for _, line := range strings.Split(string(lint), "\n") {
			if strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
				t.Errorf("lintian %s: %s", filepath.Base(f), line)
			}
		}
		if !strings.Contains(contents, " ./usr/share/lintian/overrides/"+pkg+"\n") {
			t.Errorf("%s does not install its lintian overrides", pkg)
		}
		if !strings.Contains(run("dpkg-deb", "-c", f), " ./usr/share/doc/"+pkg+"/copyright\n") {
			t.Errorf("%s has no copyright file", pkg)
		}
		info := run("dpkg-deb", "-I", f)
		if !strings.Contains(info, "Package: "+pkg+"\n") || !strings.Contains(info, "Version: 1.2.3-1\n") {
			t.Errorf("%s control:\n%s", pkg, info)
		}
		if strings.Contains(pkg, "agent") || strings.Contains(pkg, "orchestrator") {
			if conf := run("dpkg-deb", "-f", f, "Depends"); !strings.Contains(conf, "adopt-worker (= 1.2.3-1)") {
				t.Errorf("%s Depends: %s", pkg, conf)
			}
			x := t.TempDir()
			run("dpkg-deb", "-e", f, x)
			conffiles, _ := os.ReadFile(filepath.Join(x, "conffiles"))
			for _, w := range files {
				if strings.HasPrefix(w, "./etc/") && !strings.Contains(string(conffiles), strings.TrimPrefix(w, ".")+"\n") {
					t.Errorf("%s: %s is not a conffile: %q", pkg, w, conffiles)
				}
			}
		}
	}

	// The throwaway root, with a systemctl that records its calls.
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "run/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The root's only installed package is the host's libc6 entry (what
	// the binaries' Depends name); its files are not needed to configure.
	libc, err := exec.Command("dpkg-query", "-s", "libc6").Output()
	if err != nil {
		t.Fatalf("dpkg-query -s libc6: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), libc, 0o644); err != nil {
		t.Fatal(err)
	}
	bin, calls := t.TempDir(), filepath.Join(dir, "systemctl.log")
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dpkg := func(args ...string) []string {
		t.Helper()
		_ = os.Remove(calls)
		cmd := exec.Command("dpkg", append([]string{"--root=" + root, "--force-script-chrootless"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dpkg %v: %v\n%s", args, err, out)
		}
		b, _ := os.ReadFile(calls)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	noneOf := func(step string, got []string, bad ...string) {
		t.Helper()
		for _, c := range got {
			for _, b := range bad {
				if strings.HasPrefix(c, b) {
					t.Errorf("%s ran systemctl %s", step, c)
				}
			}
		}
	}
	got := dpkg("-i", deb("v1", "adopt-worker", "1.2.3-1"), deb("v1", "adopt-agent", "1.2.3-1"), deb("v1", "adopt-orchestrator", "1.2.3-1"))
	noneOf("a first install without node.yaml nor orchestrator.yaml", got, "start", "restart", "try-restart", "enable", "stop")
	// deb-systemd-helper enabled the watchdog (it starts at boot when a
	// flip record exists) and neither the agent nor the orchestrator.
	wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants")
	enabled := func(unit string) bool { _, err := os.Lstat(filepath.Join(wants, unit)); return err == nil }
	if !enabled("adopt-watchdog.service") || enabled("adopt-agent.service") || enabled("adopt-orchestrator.service") {
		t.Errorf("after a first install: watchdog enabled %v (want true), agent %v, orchestrator %v (want false)",
			enabled("adopt-watchdog.service"), enabled("adopt-agent.service"), enabled("adopt-orchestrator.service"))
	}
	if out, err := exec.Command(filepath.Join(root, "usr/bin/adopt-worker"), "--version").Output(); err != nil || !strings.HasPrefix(string(out), "adopt-worker v1.2.3 ") {
		t.Errorf("the installed adopt-worker --version: %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/adoption/node.yaml"), []byte("node: {name: n1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got = dpkg("-i", deb("v2", "adopt-worker", "1.2.4-1"), deb("v2", "adopt-agent", "1.2.4-1"), deb("v2", "adopt-orchestrator", "1.2.4-1"))
	noneOf("an upgrade", got, "stop", "start", "restart adopt-watchdog", "try-restart adopt-watchdog", "try-restart adopt-orchestrator")
	if out, err := exec.Command(filepath.Join(root, "usr/bin/adopt-worker"), "--version").Output(); err != nil || !strings.HasPrefix(string(out), "adopt-worker v1.2.4 ") {
		t.Errorf("the upgraded adopt-worker --version: %q, %v", out, err)
	}
	if !strings.Contains(strings.Join(got, "\n"), "try-restart adopt-agent.service") {
		t.Errorf("an upgrade with node.yaml did not restart the agent: %q", got)
	}
	got = dpkg("-r", "adopt-agent")
	noneOf("a removal", got, "stop adopt-watchdog", "disable adopt-watchdog")
	if !strings.Contains(strings.Join(got, "\n"), "stop adopt-agent.service") {
		t.Errorf("a removal did not stop the agent: %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/adoption/node.example.yaml")); err != nil {
		t.Errorf("dpkg -r removed a conffile (only --purge should): %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "lib/systemd/system/adopt-agent.service")); err == nil {
		t.Errorf("dpkg -r left the agent's unit")
	}
	got = dpkg("--purge", "adopt-agent")
	noneOf("a purge", got, "stop adopt-watchdog", "disable adopt-watchdog")
	if enabled("adopt-watchdog.service") {
		t.Errorf("dpkg --purge left the watchdog enabled")
	}
	if _, err := os.Stat(filepath.Join(root, "etc/adoption/node.example.yaml")); err == nil {
		t.Errorf("dpkg --purge left the conffile node.example.yaml")
	}
}

// checkOverrides fails on a lintian override of pkg that does not follow a
// comment saying why.
func checkOverrides(t *testing.T, pkg string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("nfpm", pkg+".lintian-overrides"))
	if err != nil {
		t.Fatal(err)
	}
	reason := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch {
		case strings.HasPrefix(line, "#") && strings.TrimSpace(strings.TrimPrefix(line, "#")) != "":
			reason = true
		case strings.HasPrefix(line, pkg+": "):
			if !reason {
				t.Errorf("nfpm/%s.lintian-overrides: %q has no reason above it", pkg, line)
			}
		case strings.TrimSpace(line) == "#":
			reason = false
		default:
			t.Errorf("nfpm/%s.lintian-overrides: %q is neither a reason nor an override of %s", pkg, line, pkg)
		}
	}
}
