package flip

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Containers of any Docker network's bridge ("br-*") may ask the host's
// DNS; everyone may reach 22. The mesh's table carries the bridges' DNS by
// the wildcard, the preview keeps it per bridge of the node (br-1a2b, a
// bridge without a physical port), and a table that lets the bridges reach
// 5432 too is refused as widening, naming the bridge and the port.
func TestPreviewCarriesContainerToHost(t *testing.T) {
	iif := func(n string) firewall.Cond { return firewall.Cond{Kind: firewall.CondIifname, Names: []string{n}} }
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "found", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.CtEstablished()),
			fwtest.Accept(iif("br-*"), fwtest.Udp(), fwtest.Dport(53)),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
		),
	}}}}
	node := firewall.Node{Interfaces: []firewall.Interface{
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")}},
		{Name: "br-1a2b", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.18.0.1/16")}},
	}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p := PreviewFlipOn(found, node, spec)
	if !p.Approved {
		t.Fatalf("refused: %v", p.Reasons)
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), `iifname "br-*" meta nfproto ipv4 meta l4proto udp th dport 53 counter accept`) {
		t.Errorf("the derived table does not carry the bridges' DNS:\n%s", d.Text())
	}
	kept := false
	for _, f := range p.Fates {
		if f.Opening.In == "br-1a2b" && f.Opening.Proto == "udp" && f.Opening.Port <= 53 && 53 <= firewall.PortEnd(f.Opening) {
			kept = f.Fate == FateKept
		}
	}
	if !kept {
		t.Errorf("53/udp from br-1a2b is not kept: %+v", p.Fates)
	}
	wide := *d.Ruleset
	wide.Tables = append([]firewall.Table(nil), d.Ruleset.Tables...)
	in := &wide.Tables[0].Chains[0]
	in.Rules = append(append([]firewall.Rule(nil), in.Rules...), fwtest.Accept(iif("br-*"), fwtest.Tcp(), fwtest.Dport(5432)))
	p = previewFlip(found, &wide, spec, node)
	if reasons := strings.Join(p.Reasons, "\n"); p.Approved || !strings.Contains(reasons, "5432/tcp from container bridge br-1a2b") || !strings.Contains(reasons, "widening") {
		t.Errorf("a widening from a bridge must refuse, naming it; reasons:\n%s", reasons)
	}
}

// On a node with two uplinks the evaluator cannot tell which one a client
// comes in on: ping allowed in on eth0 only is uncertain before and after
// alike (the interface carried) and kept; with a rate limit as well, the
// limit is not carried, and the preview refuses, naming it.
func TestPreviewClassInterfaceTwoUplinks(t *testing.T) {
	node := firewall.Node{Interfaces: []firewall.Interface{
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")}},
		{Name: "eth1", Addrs: []netip.Prefix{netip.MustParsePrefix("198.19.0.1/24")}},
	}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	for _, tc := range []struct {
		what    string
		limit   bool
		approve bool
	}{{"ping in on eth0", false, true}, {"ping in on eth0, rate limited", true, false}} {
		conds := []firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"eth0"}}, l4(1), icmpType(8)}
		if tc.limit {
			conds = append(conds, fwtest.Limit())
		}
		found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "found", Chains: []firewall.Chain{
			fwtest.Base("input", firewall.HookInput, 0, "drop",
				fwtest.Accept(fwtest.CtEstablished()),
				fwtest.Accept(conds...),
				fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
			),
		}}}}
		p := PreviewFlipOn(found, node, spec)
		reasons := strings.Join(p.Reasons, "\n")
		if p.Approved != tc.approve {
			t.Errorf("%s: approved %v, want %v; reasons:\n%s", tc.what, p.Approved, tc.approve, reasons)
		}
		if !tc.approve && !strings.Contains(reasons, "limit rate 3/min") {
			t.Errorf("%s: the refusal does not name the limit:\n%s", tc.what, reasons)
		}
	}
}
