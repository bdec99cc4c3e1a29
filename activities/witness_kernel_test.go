package activities

import (
	"context"
	"testing"

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

// witnessNet is the setup of the witnessed flip's kernel test
// (fliptrip_kernel_test.go): a node in namespaces whose found firewall lets
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
