package hold

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"adoption/internal/fwtest"
)

// TestKernelHold: a held port's new connections are dropped (the client
// waits, it is not refused), other ports are untouched, the node's own
// marked probe passes, holds are per owner, idempotent, and the table goes
// with the last one.
func TestKernelHold(t *testing.T) {
	n := fwtest.NewNamedNet(t, "fwhold-", "fh", "0d")
	n.Serve(t, []uint16{9100})
	dial := func(port string) error {
		return fwtest.InNetns(n.Peer, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(fwtest.NodeV4, port), 400*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	table := func() string {
		out, _ := exec.Command("ip", "netns", "exec", n.Node, "nft", "list", "table", "inet", HoldTable).CombinedOutput()
		return string(out)
	}
	if err := dial("9100"); err != nil {
		t.Fatalf("before the hold: %v", err)
	}
	h := NewHold(n.Path(n.Node), "n1")
	for i := 0; i < 2; i++ { // idempotent
		if err := h.Hold("svc", []uint16{9100}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(table(), HoldComment("n1", "svc", 9100)); got != 1 {
		t.Fatalf("hold rule %d times:\n%s", got, table())
	}
	var ne net.Error
	if err := dial("9100"); err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a held port must be dropped (the client waits), got %v", err)
	}
	if err := dial("9101"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a port not held is untouched (refused: nothing listens), got %v", err)
	}
	if !h.Queued("svc") {
		t.Fatal("the hold does not queue SYNs (NFQUEUE): a held client would wait for its retransmission")
	}
	// A client that connects while the port is held is let through by
	// the release, without failing.
	waiting := make(chan error, 1)
	go func() {
		waiting <- fwtest.InNetns(n.Peer, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(fwtest.NodeV4, "9100"), 3*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := h.Dial(ctx, net.JoinHostPort(fwtest.NodeV4, "9100"))
	if err != nil {
		t.Fatalf("the node's own marked probe is held too: %v", err)
	}
	c.Close()
	if err := h.Hold("other", []uint16{9200}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := h.Release("svc"); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-waiting; err != nil {
		t.Fatalf("a client held during the hold failed: %v", err)
	}
	if err := dial("9100"); err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if !strings.Contains(table(), "hold-other") || strings.Contains(table(), "hold-svc") {
		t.Fatalf("release removed the wrong hold:\n%s", table())
	}
	for i := 0; i < 2; i++ {
		if err := h.Release("other"); err != nil {
			t.Fatal(err)
		}
	}
	if out := table(); !strings.Contains(out, "No such file") && !strings.Contains(out, "does not exist") && strings.Contains(out, "table inet") {
		t.Fatalf("the table outlived the last hold:\n%s", out)
	}
	if err := h.Hold("bad:name", []uint16{1}, 30*time.Second); err == nil {
		t.Fatal("an owner that is not a container name was accepted")
	}
}
