package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/config"
)

// fakeSystemctl puts a systemctl on PATH that logs its arguments and answers
// `show` with the given condition result.
func fakeSystemctl(t *testing.T, condition string, startFails bool) (logPath string) {
	t.Helper()
	dir := t.TempDir()
	logPath = filepath.Join(dir, "calls")
	fail := "0"
	if startFails {
		fail = "1"
	}
	script := "#!/bin/sh\necho \"$*\" >> " + logPath + "\n" +
		"case \"$1\" in start) [ " + fail + " = 1 ] && { echo 'Unit adopt-watchdog.service not found.' >&2; exit 5; }; exit 0;;\n" +
		"show) echo " + condition + ";;\nesac\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return logPath
}

// Under systemd the agent starts the watchdog's own unit, not a child in
// its cgroup: this is the command line it runs.
func TestWatchdogStartsItsOwnUnit(t *testing.T) {
	calls := fakeSystemctl(t, "yes", false)
	t.Setenv(watchdogUnitEnv, "adopt-watchdog.service")
	if err := startWatchdog(&config.Config{Node: config.Node{StateDir: t.TempDir()}}, "/etc/adoption/node.yaml"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := "start adopt-watchdog.service\nshow --property=ConditionResult --value adopt-watchdog.service\n"
	if string(b) != want {
		t.Fatalf("systemctl calls:\n%s\nwant:\n%s", b, want)
	}
}

// A unit that did not start (condition false, or unit missing) is an error:
// the flip must not go ahead without its watchdog.
func TestWatchdogUnitNotStartedIsAnError(t *testing.T) {
	t.Setenv(watchdogUnitEnv, "adopt-watchdog.service")
	fakeSystemctl(t, "no", false)
	if err := startWatchdog(&config.Config{Node: config.Node{StateDir: t.TempDir()}}, ""); err == nil || !strings.Contains(err.Error(), "ConditionPathExists") {
		t.Fatalf("condition false: got %v", err)
	}
	fakeSystemctl(t, "yes", true)
	if err := startWatchdog(&config.Config{Node: config.Node{StateDir: t.TempDir()}}, ""); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unit missing: got %v", err)
	}
	t.Setenv(watchdogUnitEnv, "x; rm -rf /")
	if err := startWatchdog(&config.Config{Node: config.Node{StateDir: t.TempDir()}}, ""); err == nil || !strings.Contains(err.Error(), watchdogUnitEnv) {
		t.Fatalf("bad unit name: got %v", err)
	}
}
