package sockets

import (
	"fmt"
	"net"
	"sort"
	"testing"
)

// TestDiagMatchesProcNet checks that sock_diag answers what /proc/net
// answers, on this namespace with a socket of each kind opened here:
// listening and connected TCP, bound and connected UDP, both families.
func TestDiagMatchesProcNet(t *testing.T) {
	var closers []interface{ Close() error }
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, a := range []string{"127.0.0.1:0", "[::1]:0", "[::]:0"} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, ln)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, c)
		pc, err := net.ListenPacket("udp", a)
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, pc)
		u, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, u)
	}
	got, err := diagAll()
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	var want []netEntry
	for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
		e, err := parseNet("/proc/self", f.file, f.proto)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e...)
	}
	key := func(es []netEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s %s %d inode %s", e.Proto, e.Addr, e.Port, e.inode))
		}
		sort.Strings(out)
		return out
	}
	g, w := key(got), key(want)
	if len(w) < 6 {
		t.Fatalf("/proc/net shows %d listeners, want at least the 6 this test opened", len(w))
	}
	if len(g) != len(w) {
		t.Fatalf("sock_diag %d entries, /proc/net %d:\n%v\n%v", len(g), len(w), g, w)
	}
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("entry %d: sock_diag %q, /proc/net %q", i, g[i], w[i])
		}
	}
	t.Logf("%d entries alike", len(g))
}
