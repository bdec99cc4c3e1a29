package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/fwtest"
	"adoption/internal/fake"
	"adoption/internal/testenv"
	"adoption/netns"
	"adoption/nodestate"
	"adoption/witness"
)

// witnessClient is the agent's client whose workflow answers the verdict
// query with a real witness's dial from the peer's namespace, from one of
// its addresses, made when the query comes (after the flip is applied).
type witnessClient struct {
	tripClient
	dial func() error
}

func (c *witnessClient) QueryWorkflow(_ context.Context, _, _, _ string, args ...any) (converter.EncodedValue, error) {
	v := WitnessVerdict{ID: args[0].(string), State: WitnessAnswered}
	if err := c.dial(); err != nil {
		v.State, v.Why = WitnessLockedOut, err.Error()
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
	testenv.NeedRoot(t, "network namespaces")
	n := fwtest.NewNamedNet(t, "wt-", "wt", "5d")
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
	a, root := newActs(t)
	a.Root = root
	a.Firewall = eval.Inspector{Netns: n.Path(n.Node)}
	a.Flipper = flip.NewFlipper(n.Path(n.Node))
	a.Files = custody.New(root, t.TempDir())
	a.Engine = fake.Engine{Containers: containers.Report{Available: true}}
	a.StartWatchdog = func() error { return nil }
	debianBoot(t, root, true)
	for p, body := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(body), 0o644))
	}
	plan := withPlan(a, config.Plan{Node: "n1", ConfirmTimeout: time.Minute, ManagementPorts: config.MustPorts([]string{"22/tcp"})})
	must(t, a.State.MarkAdopted(nodestate.Marker{Node: "n1"}))
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(n.List(t))}))
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: plan.ManagementPorts[0], Owner: flip.OwnerManagement}}}
	w := witness.New()
	from := fwtest.PeerV4b
	dial := func() error {
		var werr error
		must(t, netns.Do(n.Path(n.Peer), func() error {
			_, werr = w.Witness(context.Background(), witness.Input{Node: "n1", Addresses: []string{fwtest.NodeV4}, From: from, Ports: plan.ManagementPorts})
			return nil
		}))
		return werr
	}
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
