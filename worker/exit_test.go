package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad flag, a bad argument and a bad configuration each exit with the
// status the units refuse to restart on; the configuration's names the key.
func TestExitStatus(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(bad, []byte("node: {name: n1, role: chief}\nauthority: {unsigned: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want int
		msg  string
	}{
		{[]string{"run", "--bogus"}, exitUsage, "unknown flag"},
		{[]string{"watchdog", "extra"}, exitUsage, "unknown command"},
		{[]string{"nosuch"}, exitUsage, "unknown command"},
		{[]string{"run", "--config", bad}, exitConfig, "node.role"},
		{[]string{"watchdog", "--config", bad}, exitConfig, "node.role"},
		{[]string{"orchestrate", "--workflow-pollers", "0"}, exitUsage, "--workflow-pollers"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errb)
		if got := exitStatus(err); got != tc.want || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: exit %d (%v), want %d mentioning %q", tc.args, got, err, tc.want, tc.msg)
		}
	}
}

// --version prints the build on every binary.
func TestVersionFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "adopt-worker ") || !strings.Contains(out.String(), "(commit ") {
		t.Fatalf("--version: %q", out.String())
	}
}
