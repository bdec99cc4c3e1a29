package sockets

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestDecodeAddr(t *testing.T) {
	for in, want := range map[string]struct {
		addr string
		port uint16
	}{
		"0100007F:1F90":                         {"127.0.0.1", 8080},
		"00000000:0016":                         {"0.0.0.0", 22},
		"00000000000000000000000000000000:0050": {"::", 80},
		"00000000000000000000000001000000:0035": {"::1", 53},
	} {
		a, p, err := decodeAddr(in)
		if err != nil || a != want.addr || p != want.port {
			t.Errorf("decodeAddr(%q) = %s %d %v, want %s %d", in, a, p, err, want.addr, want.port)
		}
	}
	if _, _, err := decodeAddr("zz:1"); err == nil {
		t.Error("bad input accepted")
	}
}

// TestListenersSeesOwnSocket checks the real /proc: a listener opened by this
// test is found with this process as its holder.
func TestListenersSeesOwnSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	ls, err := Proc{Root: "/proc"}.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Port == port && l.Proto == "tcp" && l.Addr == "127.0.0.1" {
			if l.PID != os.Getpid() {
				t.Fatalf("holder pid %d, want %d", l.PID, os.Getpid())
			}
			return
		}
	}
	t.Fatalf("own listener on %d not found among %d listeners", port, len(ls))
}

func TestFindProcesses(t *testing.T) {
	root := t.TempDir()
	for pid, comm := range map[string]string{"10": "predecessor-sync", "11": "bash", "12": "other"} {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := Proc{Root: root}.FindProcesses([]string{"predecessor-sync", "absent"})
	if len(got) != 1 || got[0].PID != 10 || got[0].Exe != "predecessor-sync" {
		t.Fatalf("got %+v", got)
	}
}
