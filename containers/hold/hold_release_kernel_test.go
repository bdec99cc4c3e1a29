package hold

// The queued hold on the kernel, with real SYNs from a peer namespace: a
// held SYN is let through once the port answers, without the client's
// retransmission; a hold that cannot queue says so (and its client does
// retransmit, which shows the count can tell); a worker that dies while
// SYNs are queued leaves them to be dropped, and the port is let go by the
// kernel at the hold's bound.

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/internal/fwtest"
)

// connected is a client's connect: its error, and how many times its
// kernel retransmitted (the SYN, here: nothing else was sent).
type connected struct {
	err     error
	retrans uint32
}

// connectFromPeer connects from the peer to the node's port in the
// background and reports the outcome.
func connectFromPeer(n *fwtest.TestNet, port uint16, wait time.Duration) <-chan connected {
	out := make(chan connected, 1)
	go func() {
		var r connected
		r.err = fwtest.InNetns(n.Peer, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(fwtest.NodeV4, strconv.Itoa(int(port))))
			if err != nil {
				return err
			}
			defer c.Close()
			rc, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				return err
			}
			var ierr error
			if err := rc.Control(func(fd uintptr) {
				var info *unix.TCPInfo
				info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
				if ierr == nil {
					r.retrans = info.Total_retrans
				}
			}); err != nil {
				return err
			}
			return ierr
		})
		out <- r
	}()
	return out
}

// queuedOne waits until owner's queue has been handed a packet.
func queuedOne(t *testing.T, h *Hold, owner string) {
	t.Helper()
	h.mu.Lock()
	q := h.queues[owner]
	h.mu.Unlock()
	if q == nil {
		t.Fatalf("%s's hold has no queue", owner)
	}
	for i := 0; i < 300; i++ {
		q.mu.Lock()
		seen := q.seen
		q.mu.Unlock()
		if seen {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the client's SYN never reached %s's queue", owner)
}

func TestKernelHoldReleasedOnAnswer(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("this test needs nft: %v", err)
	}
	n := fwtest.NewNamedNet(t, "fwholdq-", "fq", "0e")
	h := NewHold(n.Path(n.Node), "n1")

	// Queued: the SYN waits in the queue while nothing listens, and is
	// let through by the release once the port answers: one SYN, no
	// retransmission.
	if err := h.Hold("svc", []uint16{9100}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if why := h.Dropping("svc"); why != nil || !h.Queued("svc") {
		t.Fatalf("the hold does not queue: %v", why)
	}
	client := connectFromPeer(n, 9100, 5*time.Second)
	queuedOne(t, h, "svc")
	fwtest.ServeIn(t, n.Node, []uint16{9100}) // the new container answers
	if err := h.Release("svc"); err != nil {
		t.Fatal(err)
	}
	if r := <-client; r.err != nil || r.retrans != 0 {
		t.Fatalf("a queued client: %v, %d retransmissions; want connected on its first SYN", r.err, r.retrans)
	}

	// A hold that cannot queue (its queue taken by another socket) drops,
	// and says why; its client connects on a retransmission.
	taken, err := openQueue(n.Path(n.Node), queueNum("web"))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.close()
	fwtest.ServeIn(t, n.Node, []uint16{9102})
	if err := h.Hold("web", []uint16{9102}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if why := h.Dropping("web"); why == nil || h.Queued("web") {
		t.Fatalf("a hold whose queue is taken claims to queue (dropping: %v)", why)
	}
	client = connectFromPeer(n, 9102, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // the first SYN dropped
	if err := h.Release("web"); err != nil {
		t.Fatal(err)
	}
	if r := <-client; r.err != nil || r.retrans == 0 {
		t.Fatalf("a dropped client: %v, %d retransmissions; want connected on a retransmission", r.err, r.retrans)
	}
	if h.Dropping("web") != nil {
		t.Fatal("the drop is still reported after the release")
	}

	// The worker dies holding: the queued SYN is dropped with its socket,
	// the retransmission is dropped too while the hold lasts, and once the
	// bound passes the kernel lets the port go by itself.
	fwtest.ServeIn(t, n.Node, []uint16{9103})
	if err := h.Hold("db", []uint16{9103}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	client = connectFromPeer(n, 9103, 10*time.Second)
	queuedOne(t, h, "db")
	h.mu.Lock()
	h.queues["db"].close() // as the worker's death closes it
	delete(h.queues, "db")
	h.mu.Unlock()
	r := <-client
	if r.err != nil || r.retrans < 2 {
		t.Fatalf("a client held by a dead worker: %v, %d retransmissions; want connected after the bound (at least 2)", r.err, r.retrans)
	}
	out, err := exec.Command("ip", "netns", "exec", n.Node, "nft", "list", "set", "inet", HoldTable, holdChainName("db")).CombinedOutput()
	if err != nil || strings.Contains(string(out), "9103") {
		t.Fatalf("the dead worker's hold outlived its bound: %v\n%s", err, out)
	}
	if err := h.Release("db"); err != nil {
		t.Fatal(err)
	}
	if err := fwtest.InNetns(n.Peer, func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(fwtest.NodeV4, "9103"), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if err := h.Hold("x", []uint16{1}, 500*time.Millisecond); err == nil {
		t.Fatal("a bound under a second was taken")
	}
}
