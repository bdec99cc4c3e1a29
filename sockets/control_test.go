package sockets

import (
	"os"
	"path/filepath"
	"testing"
)

// A process found by name says who runs it and the user unit it runs in,
// read from its status and its cgroup.
func TestFindProcessesNamesUserAndUserUnit(t *testing.T) {
	root := t.TempDir()
	put := func(pid, name, content string) {
		t.Helper()
		d := filepath.Join(root, pid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("4242", "comm", "syncd\n")
	put("4242", "status", "Name:\tsyncd\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n")
	put("4242", "cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/predecessor-sync.service\n")
	put("77", "comm", "syncd\n")
	put("77", "status", "Uid:\t0\t0\t0\t0\n")
	put("77", "cgroup", "0::/system.slice/cron.service\n")
	got := Proc{Root: root}.FindProcesses([]string{"syncd"})
	if len(got) != 2 {
		t.Fatalf("found %+v", got)
	}
	if p := got[1]; p.PID != 4242 || p.Unit != "predecessor-sync.service" || p.User != "root" || p.UID != 0 {
		t.Fatalf("under a user manager: %+v", p)
	}
	if p := got[0]; p.PID != 77 || p.Unit != "" {
		t.Fatalf("under a system unit: %+v", p)
	}
}
