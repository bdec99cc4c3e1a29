package steer

// The steering on the kernel, with real connections from a peer namespace:
// a port pointed at one backend, then moved to another in one transaction:
// new connections (from the peer and from the node) reach the new one,
// the connection established before the move stays with the old one, and
// the port is let go with the table once the last steering is removed.

import (
	"bufio"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"adoption/internal/fwtest"
)

// backend listens on port in ns; each connection is greeted with name and
// then echoed, line by line.
func backend(t *testing.T, ns string, port, name string) {
	t.Helper()
	var l net.Listener
	if err := fwtest.InNetns(ns, func() (err error) {
		l, err = net.Listen("tcp4", ":"+port)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte(name + "\n"))
				r := bufio.NewReader(c)
				for {
					s, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(name + ":" + s))
				}
			}()
		}
	}()
}

// greet connects to addr from ns and returns the connection and its greeting.
func greet(t *testing.T, ns, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	var c net.Conn
	if err := fwtest.InNetns(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect to %s from %s: %v", addr, ns, err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	s, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("greeting from %s: %v", addr, err)
	}
	return c, r, strings.TrimSpace(s)
}

func TestKernelSteerMovesNewConnections(t *testing.T) {
	fwtest.RequireTools(t, "ip", "nft")
	n := fwtest.NewNamedNet(t, "fwsteer-", "fs", "0f")
	backend(t, n.Node, "9301", "old")
	backend(t, n.Node, "9302", "new")
	table := func() string {
		out, _ := exec.Command("ip", "netns", "exec", n.Node, "nft", "list", "table", "ip", Table).CombinedOutput()
		return string(out)
	}
	node := netip.MustParseAddr(fwtest.NodeV4)
	front := net.JoinHostPort(fwtest.NodeV4, "9300")
	s := New(n.Path(n.Node), "n1")
	for i := 0; i < 2; i++ { // idempotent
		if err := s.Point("svc", []Target{{HostPort: 9300, Addr: node, Port: 9301}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(table(), Comment("n1", "svc", 9300)); got != 2 { // prerouting and output
		t.Fatalf("steering rule %d times, want 2:\n%s", got, table())
	}
	held, heldR, g := greet(t, n.Peer, front)
	defer held.Close()
	if g != "old" {
		t.Fatalf("before the move the port reached %q, want old", g)
	}

	// The move: one transaction. The new backend is also on loopback
	// (9303), where the node's own connects to 127.0.0.1:9300 go.
	backend(t, n.Node, "9303", "new-lo")
	if err := s.Point("svc", []Target{{HostPort: 9300, Addr: node, Port: 9302, Loopback: 9303}}); err != nil {
		t.Fatal(err)
	}
	c, _, g := greet(t, n.Node, "127.0.0.1:9300")
	c.Close()
	if g != "new-lo" {
		t.Fatalf("a connect from the node to 127.0.0.1 after the move reached %q, want new-lo", g)
	}
	c, _, g = greet(t, n.Peer, front)
	c.Close()
	if g != "new" {
		t.Fatalf("a new connection from outside after the move reached %q, want new", g)
	}
	c, _, g = greet(t, n.Node, front)
	c.Close()
	if g != "new" {
		t.Fatalf("a new connection from the node after the move reached %q, want new", g)
	}
	if _, err := held.Write([]byte("still there\n")); err != nil {
		t.Fatal(err)
	}
	if s, err := heldR.ReadString('\n'); err != nil || s != "old:still there\n" {
		t.Fatalf("the connection established before the move: %q %v, want it answered by old", s, err)
	}

	// Another owner's steering stays when one is removed; the table goes
	// with the last.
	if err := s.Point("web", []Target{{HostPort: 9400, Addr: node, Port: 9302}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Remove("svc"); err != nil {
			t.Fatal(err)
		}
	}
	if got := table(); strings.Contains(got, "pre-svc") || !strings.Contains(got, "pre-web") {
		t.Fatalf("remove took the wrong steering:\n%s", got)
	}
	if err := fwtest.InNetns(n.Peer, func() error {
		c, err := net.DialTimeout("tcp", front, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err == nil {
		t.Fatal("the port still answers after its steering was removed (nothing listens on 9300)")
	}
	if err := s.Remove("web"); err != nil {
		t.Fatal(err)
	}
	if got := table(); strings.Contains(got, "table ip "+Table+" {") {
		t.Fatalf("the table outlived the last steering:\n%s", got)
	}
	if err := s.Point("bad:name", nil); err == nil {
		t.Fatal("an owner that is not a container name was accepted")
	}
	if err := s.Point("svc", []Target{{HostPort: 1, Addr: netip.MustParseAddr("fd00::1"), Port: 1}}); err == nil {
		t.Fatal("an IPv6 target was accepted")
	}
}
