package sockets

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A fixture /proc: the tables as the kernel writes them (addresses in
// host byte order, the port in network order), with a listening and a
// connected TCP socket, a listening one on ::1, a bound and a connected UDP
// socket; process 10 holds the listener's inode. Only the listening and the
// bound sockets are listed, with their addresses, ports and holder.
func TestListenersFromFixtureProc(t *testing.T) {
	root := t.TempDir()
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	files := map[string]string{
		"self/net/tcp": head +
			"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n" +
			"   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 100 0 0 10 0\n",
		"self/net/tcp6": head +
			"   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 100 0 0 10 0\n",
		"self/net/udp": head +
			"  1: 00000000:0016 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 333 2 0000000000000000 0\n" +
			"  2: 0100007F:A000 0100007F:0035 01 00000000:00000000 00:00000000 00000000     0        0 334 2 0000000000000000 0\n",
		"10/comm": "predecessor-web\n",
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "10", "fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[12345]", filepath.Join(root, "10", "fd", "3")); err != nil {
		t.Fatal(err)
	}
	ls, err := Proc{Root: root}.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Proto: "udp", Addr: "0.0.0.0", Port: 22},
		{Proto: "tcp", Addr: "::1", Port: 53},
		{Proto: "tcp", Addr: "127.0.0.1", Port: 8080, PID: 10, Exe: "predecessor-web"},
	}
	if !reflect.DeepEqual(ls, want) {
		t.Fatalf("got %+v\nwant %+v", ls, want)
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
