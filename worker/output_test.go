package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One output vocabulary: -o is the format on every command that prints
// (brief's file is --out, never -o), --json is -o json, and --json beside
// another -o is refused as contradictory; nothing is written meanwhile.
func TestOutputFlags(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd) //nolint:errcheck
	none := filepath.Join(dir, "none.yaml")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"brief", "-o", "n1.md", "--config", none}, exitUsage, `--output "n1.md": want one of text, json, jsonl (write to a file with --out)`},
		{[]string{"brief", "--json", "-o", "text", "--config", none}, exitUsage, "--json and --output text contradict each other"},
		{[]string{"probe", "--json", "-o", "jsonl", "--config", none}, exitUsage, "--json and --output jsonl contradict each other"},
		// Accepted: they get as far as the missing file.
		{[]string{"probe", "-o", "json", "--config", none}, exitConfig, "none.yaml"},
		{[]string{"probe", "--json", "--config", none}, exitConfig, "none.yaml"},
		{[]string{"brief", "-o", "json", "--config", none}, exitConfig, "none.yaml"},
		{[]string{"brief", "--out", "n1.md", "--config", none}, exitConfig, "none.yaml"},
	} {
		_, msg, code := checkRun(t, tc.args...)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: exit %d, want %d with %q: %s", tc.args, code, tc.code, tc.msg, msg)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written: %v", entries)
	}
}

// Every command's help has examples and the exit codes.
func TestHelpHasExamplesAndExitCodes(t *testing.T) {
	cmds := []string{"", "run", "orchestrate", "probe", "brief", "watchdog", "codec-server", "check"}
	for _, c := range cmds {
		args := []string{"--help"}
		if c != "" {
			args = []string{c, "--help"}
		}
		out, msg, code := checkRun(t, args...)
		if code != 0 || !strings.Contains(out, "Examples:\n  adopt-worker ") || !strings.Contains(out, "Exit codes:\n  0 ") || !strings.Contains(out, "78  configuration") {
			t.Errorf("adopt-worker %s --help: exit %d %s\n%s", c, code, msg, out)
		}
	}
}
