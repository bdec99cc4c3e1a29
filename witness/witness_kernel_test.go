package witness

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/internal/fwtest"
	"adoption/netns"
)

// TestKernelWitnessFromOutside: the node's table (as a flip leaves it) drops
// ssh from one of the peer's addresses. The witness dialing from that
// address finds the node locked out (ErrLockedOut, naming the port and
// the address); from the other address, and with nothing listening on a
// second management port (the kernel answers with a reset), it confirms.
func TestKernelWitnessFromOutside(t *testing.T) {
	n := fwtest.NewNamedNet(t, "wi-", "wi", "5e")
	n.Nft(t, `
table inet adoption {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		ip saddr `+fwtest.PeerV4b+` tcp dport 22 drop
		tcp dport { 22, 2222 } accept
	}
}`)
	n.Serve(t, []uint16{22})
	w := New()
	in := Input{Node: "n1", Addresses: []string{fwtest.NodeV4}, Ports: []config.Port{{Num: 22, Proto: "tcp"}, {Num: 2222, Proto: "tcp"}, {Num: 51820, Proto: "udp"}}}
	run := func(from string) (*Result, error) {
		in.From = from
		var res *Result
		var werr error
		if err := netns.Do(n.Path(n.Peer), func() error {
			res, werr = w.Witness(context.Background(), in)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return res, werr
	}
	_, err := run(fwtest.PeerV4b)
	var ae *temporal.ApplicationError
	if err == nil || !strings.Contains(err.Error(), "22/tcp ("+fwtest.NodeV4+":") || !asLockedOut(err, &ae) {
		t.Fatalf("from %s (dropped by the node's table): %v; want ErrLockedOut naming 22/tcp on %s", fwtest.PeerV4b, err, fwtest.NodeV4)
	}
	// The same from the orchestrator's side: flip.witness.netns names the
	// namespace to dial from.
	in.Netns, in.From = n.Path(n.Peer), fwtest.PeerV4b
	if _, err := w.Witness(context.Background(), in); err == nil || !asLockedOut(err, &ae) {
		t.Errorf("dialing from namespace %s and %s: %v; want ErrLockedOut", in.Netns, fwtest.PeerV4b, err)
	}
	in.Netns = ""
	res, err := run(fwtest.PeerV4a)
	if err != nil {
		t.Fatalf("from %s: %v; want both ports answering", fwtest.PeerV4a, err)
	}
	if len(res.Answered) != 2 || len(res.Skipped) != 1 {
		t.Errorf("answered %v, skipped %v; want 22 and 2222 answered, 51820/udp skipped", res.Answered, res.Skipped)
	}
}

func asLockedOut(err error, ae **temporal.ApplicationError) bool {
	return errors.As(err, ae) && (*ae).Type() == ErrLockedOut
}
