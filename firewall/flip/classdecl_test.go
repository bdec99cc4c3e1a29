package flip

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// A ping the found firewall rate-limits is a restriction the mesh cannot
// carry: the preview refuses it as widening, naming how to declare it.
// Declared in flip.widen, it is carried from every source and the preview
// approves, the fate marked declared; declared in flip.drop, the derived
// table has no rule for it and the preview approves, the fate a dropped
// closing. Only the class named is declared: IPv6's ping is not.
func TestPreviewDeclaredClass(t *testing.T) {
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "found", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.CtEstablished()),
			fwtest.Accept(l4(1), icmpType(8), firewall.Cond{Kind: firewall.CondUndecidable, Reason: "limit rate 5/second"}),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
		),
	}}}}
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24")}}}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	fate := func(p Preview) Fate {
		for _, f := range p.Fates {
			if f.Opening.Class == "ip icmp type 8" && f.Opening.Family == firewall.FamilyIP {
				return f
			}
		}
		t.Fatalf("no fate for IPv4's echo-request: %+v", p.Fates)
		return Fate{}
	}
	p := PreviewFlipOn(found, node, spec)
	reasons := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, `ip icmp type 8 (input, ip, uncertain) would be widening`) || !strings.Contains(reasons, `"ip icmp type 8" in flip.drop closes it`) {
		t.Fatalf("an undecided ping must refuse, naming how to declare it; reasons:\n%s", reasons)
	}

	widen := spec
	widen.WidenClasses = []string{"echo-request/icmp"}
	p = PreviewFlipOn(found, node, widen)
	if !p.Approved {
		t.Fatalf("a declared widening must approve: %v", p.Reasons)
	}
	if f := fate(p); f.Fate != FateWidening || !f.Declared {
		t.Errorf("the declared widening's fate: %+v", f)
	}
	d, err := DeriveFor(found, widen)
	if err != nil {
		t.Fatal(err)
	}
	if text := d.Text(); !strings.Contains(text, "meta nfproto ipv4 meta l4proto 1 icmp type 8 accept") {
		t.Errorf("the widened ping is not accepted from every source:\n%s", text)
	}

	drop := spec
	drop.DropClasses = []string{"echo-request/icmp"}
	p = PreviewFlipOn(found, node, drop)
	if !p.Approved {
		t.Fatalf("a declared closing must approve: %v", p.Reasons)
	}
	if f := fate(p); f.Fate != FateClosing || !f.Dropped {
		t.Errorf("the declared closing's fate: %+v", f)
	}
	if d, err = DeriveFor(found, drop); err != nil {
		t.Fatal(err)
	}
	if text := d.Text(); strings.Contains(text, "icmp type 8") {
		t.Errorf("the dropped ping is still accepted:\n%s", text)
	}

	other := spec
	other.WidenClasses = []string{"echo-request/icmpv6"}
	if p = PreviewFlipOn(found, node, other); p.Approved {
		t.Errorf("IPv6's ping declared clears IPv4's refusal: %+v", p.Fates)
	}
	bad := spec
	bad.DropClasses = []string{"ping"}
	if _, err := DeriveFor(found, bad); err == nil || !strings.Contains(err.Error(), `drop_classes: "ping" is not a region of packets: unknown protocol "ping"; want "[ip|ip6] PROTO`) {
		t.Errorf("an unknown class in the spec: %v", err)
	}
}
