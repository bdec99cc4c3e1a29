package flip

import (
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// A ufw node with a custom-named Docker bridge (lan0, as
// com.docker.network.bridge.name names it) whose rule Docker put first in
// FORWARD: flipped on the node whose engine names lan0 (Flipper.WithNode),
// the rule is Docker's, so the neutralising accept goes to the top of
// ufw's forward chain and lan0's rule stays first and in force; the
// commit keeps it, and the flip is in force as checked on the same node.
// Flipped by names alone, the rule would count as the predecessor's and
// the accept would go before it.
func TestKernelFlipCustomDockerBridge(t *testing.T) {
	fwtest.RequireTools(t, "ufw", "iptables-nft")
	n := fwtest.NewNamedNet(t, "cb-", "cb", "6e")
	n.Ufw(t, []string{"default", "deny", "incoming"}, []string{"allow", "22/tcp"}, []string{"--force", "enable"})
	fwtest.Run(t, "", "ip", "-n", n.Node, "link", "add", "lan0", "type", "bridge")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-I", "FORWARD", "1", "-i", "lan0", "!", "-o", "lan0", "-j", "ACCEPT")
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	node.EngineBridges = map[string]string{"lan0": "docker"}
	found := n.List(t)
	lanRule := func(rs *firewall.Ruleset) (handle uint64, first bool) {
		for _, tb := range rs.Tables {
			if tb.Family != firewall.FamilyIP || tb.Name != "filter" {
				continue
			}
			for _, ch := range tb.Chains {
				if ch.Name != "FORWARD" {
					continue
				}
				for i, r := range ch.Rules {
					for _, c := range r.Conds {
						if c.Kind == firewall.CondIifname && len(c.Names) == 1 && c.Names[0] == "lan0" {
							return r.Handle, i == 0
						}
					}
				}
			}
		}
		return 0, false
	}
	h, first := lanRule(found)
	if h == 0 || !first {
		t.Fatalf("lan0's rule is not first in FORWARD (handle %d): the fixture is not what the test needs", h)
	}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p := PreviewFlipOn(found, node, spec)
	if !p.Approved {
		t.Fatalf("preview refused: %v", p.Reasons)
	}
	f := NewFlipper(n.Path(n.Node)).WithNode(func() (firewall.Node, error) { return node, nil })
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range plan.Neutralised {
		if r.Chain == "FORWARD" {
			t.Errorf("the flip neutralised FORWARD itself (%+v): lan0's Docker rule was taken for the predecessor's", r)
		}
	}
	after := n.List(t)
	if h2, first := lanRule(after); h2 != h || !first {
		t.Errorf("after the flip lan0's rule is handle %d, first %v; want handle %d, first", h2, first, h)
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.InForce(plan, firewall.Fingerprint(d.Ruleset)); err != nil {
		t.Errorf("the flip checked on the same node: %v", err)
	}
	if _, err := f.Commit(plan); err != nil {
		t.Fatal(err)
	}
	if h3, _ := lanRule(n.List(t)); h3 != h {
		t.Errorf("the commit deleted lan0's Docker rule (handle %d now)", h3)
	}
	// By names alone, the same ruleset's predecessor starts at lan0's rule.
	pred, err := analyse(found, nil)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, pt := range pred.points {
		named = named || pt.chain == "FORWARD" && pt.before == h
	}
	if !named {
		t.Errorf("by names alone the accept is not put before lan0's rule: points %+v", pred.points)
	}
}
