package activities

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/trip"
	"adoption/internal/fwtest"
	"adoption/nodestate"
	"adoption/witness"
)

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
	// The agent's client: its workflow answers the verdict query with a
	// real witness's dial from the peer's namespace, from one of its
	// addresses, made when the query comes (after the flip is applied);
	// dialed is what the last dial answered.
	var dialed error
	c := &trip.Fake{Verdicts: []WitnessVerdict{{}}, Answer: func(id string, _ WitnessVerdict) WitnessVerdict {
		v := WitnessVerdict{ID: id, State: WitnessAnswered}
		if dialed = dial(); dialed != nil {
			v.State, v.Why = WitnessLockedOut, dialed.Error()
		} else {
			v = signVerdict(v)
		}
		return v
	}}
	a.Temporal = c
	in := func(id string) FlipTripInput {
		return FlipTripInput{FlipInput: FlipInput{Plan: plan.Ref(), Spec: spec, ID: id, ConfirmTimeout: time.Minute}, Witness: true}
	}

	_, err := runTrip(t, a, in("n1-1"))
	if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "locked out") || !strings.Contains(msg, "22/tcp") {
		t.Fatalf("witnessed from %s: %s; want reverted, locked out on 22/tcp", from, msg)
	}
	if beats, queries, _ := c.Seen(); record(t, a).State != nodestate.FlipReverted || queries != 1 || len(beats) == 0 || !beats[0].Applied {
		t.Fatalf("record %s, %d queries, beats %+v", record(t, a).State, queries, beats)
	}
	var ae *temporal.ApplicationError
	if !errors.As(dialed, &ae) || ae.Type() != witness.ErrLockedOut {
		t.Fatalf("the witness's dial through the mesh's table answered %v; want %s", dialed, witness.ErrLockedOut)
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
