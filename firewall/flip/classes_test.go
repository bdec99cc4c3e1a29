package flip

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

func icmpType(t int) firewall.Cond {
	return firewall.Cond{Kind: firewall.CondICMPType, Types: []int{t}}
}

func l4(n int) firewall.Cond { return firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{n}} }

// classesFoundModel lets ping in from 10.9.0.0/24 only, GRE from anyone,
// ssh from anyone; everything else is dropped.
func classesFoundModel() *firewall.Ruleset {
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "found", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.CtEstablished()),
			fwtest.Accept(l4(1), icmpType(8), fwtest.Saddr("10.9.0.0/24")),
			fwtest.Accept(l4(47)),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
		),
	}}}}
}

// A ping allowed only from a prefix stays so: the derived table carries
// the prefix, the preview keeps it from there, nothing else of ICMP or
// ICMPv6 is opened, and a table that accepts ping from anyone (the mesh's
// table before the classes were read from the found firewall) is refused,
// naming the class and the sources it would widen to.
func TestPreviewCarriesPingRestriction(t *testing.T) {
	found := classesFoundModel()
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("fd00:f0::1/64")}}}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p := PreviewFlipOn(found, node, spec)
	if !p.Approved {
		t.Fatalf("refused: %v", p.Reasons)
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	text := d.Text()
	if !strings.Contains(text, "ip saddr @input_ip_icmp_type_8_ip_from meta l4proto 1 icmp type 8 accept") || !strings.Contains(text, "elements = { 10.9.0.0/24 }") {
		t.Errorf("the derived table does not carry ping's source:\n%s", text)
	}
	// The input chain's: found forwards every packet (it has no forward
	// chain), so the forward chain carries forwarded ICMPv6.
	if input, _, _ := strings.Cut(text, "chain forward"); strings.Contains(input, "icmpv6") || strings.Contains(input, "nd-") {
		t.Errorf("the derived table opens ICMPv6, which the found firewall drops:\n%s", text)
	}
	kept := map[string]bool{}
	for _, f := range p.Fates {
		if f.Opening.Class != "" {
			kept[f.Opening.Family+" "+f.Opening.Class+" "+f.Opening.From+" "+f.Fate] = true
		}
	}
	for _, want := range []string{"ip ip icmp type 8 10.9.0.0/24 kept", "ip ip gre  kept", "ip6 ip6 gre  kept"} {
		if !kept[want] {
			t.Errorf("no fate %q in %v", want, kept)
		}
	}
	legacy := spec
	legacy.Input = d.Spec.Input
	ld, err := Derive(legacy) // ClassesFound unset: ping from anyone
	if err != nil {
		t.Fatal(err)
	}
	lp := previewFlip(found, ld.Ruleset, spec, node)
	reasons := strings.Join(lp.Reasons, "\n")
	if lp.Approved || !strings.Contains(reasons, "ip icmp type 8 (input, ip) would be widening: passes after the flip from any source") {
		t.Errorf("a table that accepts ping from anyone must refuse, naming it; reasons:\n%s", reasons)
	}
	if !strings.Contains(reasons, "ip gre (input, ip) would be closing: passes now from any source") {
		t.Errorf("GRE, open now and not in the table, must refuse as closing; reasons:\n%s", reasons)
	}
}

// A found output policy accept stays accept, kept (no output chain); a
// found output policy drop with allowed destinations is carried into an
// output chain and approved; one whose accept names an output interface
// other than lo is carried as the interface.
func TestPreviewOutputPolicy(t *testing.T) {
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")}}}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	open := classesFoundModel()
	open.Tables[0].Chains = append(open.Tables[0].Chains, fwtest.Base("output", "output", 0, "accept",
		firewall.Rule{Handle: 9, Conds: []firewall.Cond{{Kind: firewall.CondCtState, Bits: firewall.CtStateInvalid}}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}))
	p := PreviewFlipOn(open, node, spec)
	if !p.Approved {
		t.Fatalf("an output policy accept (with an invalid-state drop) is refused: %v", p.Reasons)
	}
	for _, f := range p.Fates {
		if f.Opening.Class == "output" && f.Fate != FateKept {
			t.Errorf("output fate %+v, want kept", f)
		}
	}
	closed := classesFoundModel()
	closed.Tables[0].Chains = append(closed.Tables[0].Chains, fwtest.Base("output", "output", 0, "drop",
		fwtest.Accept(fwtest.CtEstablished()),
		fwtest.Accept(fwtest.Daddr("10.0.0.0/8"))))
	p = PreviewFlipOn(closed, node, spec)
	if !p.Approved {
		t.Fatalf("an output policy drop with allowed destinations is refused: %v", p.Reasons)
	}
	d, err := DeriveFor(closed, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), "ip daddr != @output0_ip meta l4proto tcp drop") {
		t.Errorf("the mesh's output chain does not carry the allowed destinations:\n%s", d.Text())
	}
	// An output interface other than lo is carried as the interface: the
	// mesh's output chain drops what leaves by any other, and the preview
	// keeps each family's output by eth1 and by any other interface.
	iface := classesFoundModel()
	iface.Tables[0].Chains = append(iface.Tables[0].Chains, fwtest.Base("output", "output", 0, "drop",
		fwtest.Accept(fwtest.CtEstablished()),
		fwtest.Accept(firewall.Cond{Kind: firewall.CondOifname, Names: []string{"eth1"}})))
	p = PreviewFlipOn(iface, node, spec)
	if !p.Approved {
		t.Fatalf("an output policy drop but by eth1 is refused: %v", p.Reasons)
	}
	if d, err = DeriveFor(iface, spec); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), `oifname != "eth1" meta nfproto ipv4 meta l4proto tcp drop`) || strings.Contains(d.Text(), `oifname "eth1" meta nfproto`) {
		t.Errorf("the mesh's output chain does not drop by any interface but eth1 alone:\n%s", d.Text())
	}
	kept := map[string]bool{}
	for _, f := range p.Fates {
		if f.Opening.Class == "output" && f.Fate == FateKept {
			kept[f.Opening.Family+" "+f.Opening.Out] = true
		}
	}
	for _, k := range []string{"ip eth1", "ip ", "ip6 eth1", "ip6 "} {
		if !kept[k] {
			t.Errorf("no kept output fate for %q: %v", k, kept)
		}
	}
}
