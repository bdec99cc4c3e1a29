package cutover

// The drain's count of a predecessor's connections, from fixture tables in
// the kernel's /proc/net/tcp and tcp6 format.

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

func TestCountConns(t *testing.T) {
	ports := map[uint16]bool{8080: true} // 1F90
	for _, tc := range []struct {
		what, table string
		want        int
	}{
		{"a listener alone", "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0\n", 0},
		{"an established connection and a TIME_WAIT one",
			"   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0\n" +
				"   1: 0200110A:1F90 0101110A:A2B4 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1\n" +
				"   2: 0200110A:1F90 0101110A:A2B6 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000\n", 1},
		{"half open and closed by the client with the answer due",
			"   0: 0200110A:1F90 0101110A:A2B4 03 00000000:00000000 00:00000000 00000000     0        0 0 0 0000000000000000\n" +
				"   1: 0200110A:1F90 0101110A:A2B8 08 00000000:0000004E 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1\n", 2},
		{"an accept queue longer than the table shows", "   0: 00000000:1F90 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0\n", 3},
		{"the container's own client to another port",
			"   0: 0200110A:A2B4 0101110A:1F90 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1\n" +
				"   1: 0200110A:0050 0101110A:A2B4 01 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 20 4 30 10 -1\n", 0},
		{"IPv6", "   0: 0000000000000000FFFF00000200110A:1F90 0000000000000000FFFF00000101110A:C350 01 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 20 4 30 10 -1\n", 1},
		{"empty", "", 0},
	} {
		got, err := countConns(tcpHeader+tc.table, ports)
		if err != nil || got != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.what, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"   0: 00000000 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n",
		"   0: 00000000:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n",
		"   0: 00000000:1F90 00000000:0000 QQ 00000000:00000000 00:00000000 00000000     0        0 1 1\n",
		"   0: 00000000:1F90 00000000:0000 0A 0000000000000000 00:00000000 00000000     0        0 1 1\n",
	} {
		if n, err := countConns(tcpHeader+bad, ports); err == nil {
			t.Errorf("a malformed line was counted (%d), not refused: %q", n, strings.TrimSpace(bad))
		}
	}
}

func TestDrainReportString(t *testing.T) {
	if s := (DrainReport{Container: "svc", Left: 2}).String(); !strings.Contains(s, "2 connection(s) still open") {
		t.Fatalf("a drain cut short does not say how many were left: %s", s)
	}
	if s := (DrainReport{Container: "svc", Unread: "permission denied"}).String(); !strings.Contains(s, "without draining") || !strings.Contains(s, "permission denied") {
		t.Fatalf("an unread table is not said: %s", s)
	}
}

// The count read from a real namespace's tables (this process's own): a
// connection in the accept queue, then accepted, then closed.
func TestNetnsConnsReadsTheKernel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ports := map[uint16]bool{uint16(l.Addr().(*net.TCPAddr).Port): true}
	count := func(what string, want int) {
		t.Helper()
		n, err := netnsConns(os.Getpid(), ports)
		if err != nil || n != want {
			t.Fatalf("%s: %d connections %v, want %d", what, n, err, want)
		}
	}
	count("a listener alone", 0)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	count("a connection in the accept queue", 1)
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	count("an accepted connection", 1)
	s.Close()
	count("closed by the service", 0)
	if _, err := netnsConns(0, ports); err == nil {
		t.Fatal("a container without a process was read")
	}
}

// A predecessor whose tables cannot be read is not waited for: the drain
// says why and returns at once (an hour's bound would time the test out).
func TestDrainUnreadReturnsAtOnce(t *testing.T) {
	var heard []DrainReport
	ctx := WithDrainReport(context.Background(), func(r DrainReport) { heard = append(heard, r) })
	rep := (&Engine{}).drain(ctx, "svc", 0, map[uint16]bool{8080: true}, time.Hour)
	if rep.Unread == "" || len(heard) != 1 || heard[0] != rep {
		t.Fatalf("drain of a container without a process: %+v, heard %+v", rep, heard)
	}
}
