package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/internal/fwtest"
	"adoption/nodestate"
	"adoption/witness"
)

// witnessClient is the agent's client whose workflow answers the verdict
// query with a real witness's dial from the peer's namespace, from one of
// its addresses, made when the query comes (after the flip is applied).
type witnessClient struct {
	tripClient
	dial func() error
	// dialed is what the witness's last dial answered.
	dialed error
}

func (c *witnessClient) QueryWorkflow(_ context.Context, _, _, _ string, args ...any) (converter.EncodedValue, error) {
	v := WitnessVerdict{ID: args[0].(string), State: WitnessAnswered}
	if c.dialed = c.dial(); c.dialed != nil {
		v.State, v.Why = WitnessLockedOut, c.dialed.Error()
	} else {
		v = signVerdict(v)
	}
	c.queries++
	return verdictValue{v}, nil
}

// TestKernelFlipTripWitnessed: the flip in one round trip on a real
// firewall in a namespace. The found firewall lets ssh in only from one of
// the peer's addresses, and the flip carries that into the mesh's table.
// Witnessed from the other address, the verdict is locked out and the node
// reverts the flip by itself (ssh answers again as before); witnessed from
// the allowed address, the next flip is confirmed and committed, and the
// predecessor's table is gone from the kernel.
func TestKernelFlipTripWitnessed(t *testing.T) {
	wn := newWitnessNet(t, "wt-", "wt", "5d")
	n, a, root, plan, spec := wn.n, wn.a, wn.root, wn.plan, wn.spec
	debianBoot(t, root, true)
	for p, body := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(body), 0o644))
	}
	from := fwtest.PeerV4b
	dial := func() error { return wn.witnessFrom(from) }
	c := &witnessClient{dial: dial}
	a.Temporal = c
	in := func(id string) FlipTripInput {
		return FlipTripInput{FlipInput: FlipInput{Plan: plan.Ref(), Spec: spec, ID: id, ConfirmTimeout: time.Minute}, Witness: true}
	}

	_, err := runTrip(t, a, in("n1-1"))
	if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "locked out") || !strings.Contains(msg, "22/tcp") {
		t.Fatalf("witnessed from %s: %s; want reverted, locked out on 22/tcp", from, msg)
	}
	if rec := record(t, a); rec.State != nodestate.FlipReverted || c.queries != 1 || len(c.beats) == 0 || !c.beats[0].Applied {
		t.Fatalf("record %s, %d queries, beats %+v", rec.State, c.queries, c.beats)
	}
	var ae *temporal.ApplicationError
	if !errors.As(c.dialed, &ae) || ae.Type() != witness.ErrLockedOut {
		t.Fatalf("the witness's dial through the mesh's table answered %v; want %s", c.dialed, witness.ErrLockedOut)
	}
	from = fwtest.PeerV4a
	if err := dial(); err != nil {
		t.Fatalf("after the revert ssh from %s should answer as before the flip: %v", from, err)
	}

	res, err := runTrip(t, a, in("n1-2"))
	if err != nil || res.State != nodestate.FlipCommitted {
		t.Fatalf("witnessed from %s: %+v %v; want committed", from, res, err)
	}
	if strings.Contains(n.Listing(t), "table inet host") {
		t.Fatal("the predecessor's table is still in the kernel after the commit")
	}
	if err := dial(); err != nil {
		t.Fatalf("after the commit ssh from %s: %v", from, err)
	}
}
