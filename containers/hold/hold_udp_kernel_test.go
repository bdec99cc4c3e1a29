package hold

// The datagram hold on the kernel: a UDP query sent from the peer while
// its port is held waits in the queue (the resolver is not listening yet)
// and is answered once the port is bound and the hold released: not lost,
// not met by a port unreachable.

import (
	"net"
	"os/exec"
	"testing"
	"time"

	"adoption/internal/fwtest"
)

func TestKernelHoldDatagrams(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("this test needs nft: %v", err)
	}
	n := fwtest.NewNamedNet(t, "fwholdu-", "fu", "8a")
	h := NewHold(n.Path(n.Node), "n1")
	if err := h.HoldProto("dns", []uint16{5353}, []uint16{5353}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !h.Queued("dns") {
		t.Fatal("the hold does not queue: a held datagram would be dropped")
	}
	// The query, sent while nothing listens on 5353/udp: without the hold
	// the node answers it with a port unreachable at once.
	answered := make(chan error, 1)
	go func() {
		answered <- fwtest.InNetns(n.Peer, func() error {
			c, err := net.Dial("udp", net.JoinHostPort(fwtest.NodeV4, "5353"))
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte("query")); err != nil {
				return err
			}
			buf := make([]byte, 64)
			_, err = c.Read(buf)
			return err
		})
	}()
	queuedOne(t, h, "dns")
	// Now the resolver binds, and the hold lets the query go.
	var srv net.PacketConn
	if err := fwtest.InNetns(n.Node, func() error {
		var err error
		srv, err = net.ListenPacket("udp", net.JoinHostPort(fwtest.NodeV4, "5353"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			k, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteTo(buf[:k], from)
		}
	}()
	if err := h.Release("dns"); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("the datagram held while nothing listened was not answered after the release: %v", err)
	}
}
