package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
	"adoption/netns"
	"adoption/nodestate"
	"adoption/witness"
)

// TestKernelFlipWitnessedFromOutside: the found firewall lets ssh in only
// from one of the peer's addresses, and the real flip carries that into the
// mesh's table. A witness dialing from the peer's other address (the
// operator's, say) finds the node locked out, and the flip is reverted
// through the node, which lets ssh in again as before; witnessed from the
// allowed address, the next flip is confirmed.
func TestKernelFlipWitnessedFromOutside(t *testing.T) {
	wn := newWitnessNet(t, "wk-", "wk", "5f")
	a, spec, witnessFrom := wn.a, wn.spec, wn.witnessFrom
	// The witness here is the workflow's, not the node's: the flip in two
	// steps, on a node that does not authenticate a witness.
	plan := withPlan(a, flipPlanN1())
	ctx := context.Background()

	res, err := a.Flip(ctx, FlipInput{Plan: plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute, Preview: true})
	if err != nil || res.State != nodestate.FlipFlipped {
		t.Fatalf("flip: %+v %v", res, err)
	}
	err = witnessFrom(fwtest.PeerV4b)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != witness.ErrLockedOut || !strings.Contains(err.Error(), "22/tcp") {
		t.Fatalf("witness from %s through the mesh's table: %v; want locked out on 22/tcp", fwtest.PeerV4b, err)
	}
	if _, err := a.RevertFlip(ctx, ConfirmInput{Plan: plan.Ref(), ID: "n1-1"}); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if rec := record(t, a); rec.State != nodestate.FlipReverted {
		t.Fatalf("the flip is %s after a lockout", rec.State)
	}
	if err := witnessFrom(fwtest.PeerV4a); err != nil {
		t.Errorf("after the revert ssh from %s should answer as before the flip: %v", fwtest.PeerV4a, err)
	}

	res, err = a.Flip(ctx, FlipInput{Plan: plan.Ref(), Spec: spec, ID: "n1-2", ConfirmTimeout: time.Minute, Preview: true})
	if err != nil || res.State != nodestate.FlipFlipped {
		t.Fatalf("second flip: %+v %v", res, err)
	}
	if err := witnessFrom(fwtest.PeerV4a); err != nil {
		t.Fatalf("witness from %s, which the mesh's table keeps: %v", fwtest.PeerV4a, err)
	}
	if cr, err := a.ConfirmFlip(ctx, ConfirmInput{Plan: plan.Ref(), ID: "n1-2"}); err != nil || cr.State != nodestate.FlipConfirmed {
		t.Fatalf("confirm after the witness answered: %+v %v", cr, err)
	}
}

// witnessNet is the setup of the witness kernel tests (here and
// fliptrip_kernel_test.go): a node in namespaces whose found firewall lets
// ssh in only from fwtest.PeerV4a (22/tcp served), its activities on the
// real firewall, adopted with that firewall as baseline, and the flip of
// its management port.
type witnessNet struct {
	t    *testing.T
	n    *fwtest.TestNet
	a    *Activities
	root string
	plan config.Plan
	spec flip.MeshSpec
	w    *witness.Witness
}

func newWitnessNet(t *testing.T, prefix, name, octet string) *witnessNet {
	t.Helper()
	testenv.NeedRoot(t, "network namespaces")
	n := fwtest.NewNamedNet(t, prefix, name, octet)
	n.Nft(t, `
table inet host {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		ip saddr `+fwtest.PeerV4a+` tcp dport 22 accept
	}
}`)
	n.Serve(t, []uint16{22})
	a, root := kernelActs(t, n)
	plan := withPlan(a, tripPlanN1())
	adoptedAs(t, a, testEnvCaller)
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(n.List(t))}))
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: plan.ManagementPorts[0], Owner: flip.OwnerManagement}}}
	return &witnessNet{t: t, n: n, a: a, root: root, plan: plan, spec: spec, w: witness.New()}
}

// kernelActs are activities on the real firewall of n's node, custody
// under a root of their own (nftables.service installed and enabled), no
// container and no watchdog started: the kernel tests' agent.
func kernelActs(t *testing.T, n *fwtest.TestNet) (*Activities, string) {
	t.Helper()
	a, root := newActs(t)
	a.Root = root
	debianBoot(t, root, true) // the preview checks the boot path
	a.Firewall = eval.Inspector{Netns: n.Path(n.Node)}
	a.Flipper = flip.NewFlipper(n.Path(n.Node))
	a.Files = custody.New(root, t.TempDir())
	a.Engine = fake.Engine{Containers: containers.Report{Available: true}}
	a.StartWatchdog = func() error { return nil }
	return a, root
}

// witnessFrom is the witness's dial of the node's management ports from
// the peer's namespace, from its address from.
func (wn *witnessNet) witnessFrom(from string) error {
	var werr error
	must(wn.t, netns.Do(wn.n.Path(wn.n.Peer), func() error {
		_, werr = wn.w.Witness(context.Background(), witness.Input{Node: "n1", Addresses: []string{fwtest.NodeV4}, From: from, Ports: wn.plan.ManagementPorts})
		return nil
	}))
	return werr
}
