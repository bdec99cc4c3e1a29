package flip

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// foundNarrow is a native default-deny predecessor that lets ssh in from
// 10.9.0.0/24 only, drops 203.0.113.0/24 first, and opens 80 to the rest.
func foundNarrow() *firewall.Ruleset {
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{
			acceptH(2, []firewall.Cond{{Kind: firewall.CondCtState, Bits: firewall.CtStateEstablished | firewall.CtStateRelated}}),
			{Handle: 3, Conds: []firewall.Cond{fwtest.Saddr("203.0.113.0/24")}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}},
			acceptH(4, append([]firewall.Cond{fwtest.Saddr("10.9.0.0/24")}, tcpPort(22)...)),
			acceptH(5, tcpPort(80)),
		},
	}, {
		Name: "forward", Hook: firewall.HookForward, Policy: "drop", Type: "filter",
	}}}}}
}

func TestEffectiveSpecCarriesSources(t *testing.T) {
	spec := MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "443/tcp"))}
	eff := EffectiveSpec(foundNarrow(), spec)
	want := map[uint16][]Reach{
		22:  {{Family: firewall.FamilyIP, From: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}}},
		80:  {{Family: firewall.FamilyIP, Except: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}, {Family: firewall.FamilyIP6}},
		443: nil, // closed now: a new port, open to all
	}
	for _, a := range eff.Input {
		if !reflect.DeepEqual(a.Carried, want[a.Port.Num]) {
			t.Errorf("%s carried %+v, want %+v", a.Port, a.Carried, want[a.Port.Num])
		}
	}
	if spec.Input[0].Carried != nil {
		t.Error("EffectiveSpec changed the spec it was given")
	}
	d, err := DeriveFor(foundNarrow(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"set input_22_tcp_ip_from {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 10.9.0.0/24 }",
		"meta nfproto ipv4 ip saddr @input_22_tcp_ip_from meta l4proto tcp th dport 22 counter accept",
		"meta nfproto ipv4 ip saddr != @input_80_tcp_ip_except meta l4proto tcp th dport 80 counter accept",
		"meta nfproto ipv6 meta l4proto tcp th dport 80 counter accept",
		"\t\tmeta l4proto tcp th dport 443 counter accept",
	} {
		if !strings.Contains(d.Text(), s) {
			t.Errorf("derived table lacks %q:\n%s", s, d.Text())
		}
	}
	// The model the preview reads opens exactly what was found.
	open := eval.OpenPorts(d.Ruleset)
	if o := fwtest.Find(open, firewall.HookInput, firewall.FamilyIP, "tcp", 22); len(o) != 1 || o[0].From != "10.9.0.0/24" {
		t.Errorf("22/tcp after: %+v, want from 10.9.0.0/24 only", o)
	}
	if o := fwtest.Find(open, firewall.HookInput, firewall.FamilyIP6, "tcp", 22); len(o) != 0 {
		t.Errorf("22/tcp over IPv6 after: %+v, want closed as now", o)
	}
	if r := eval.SourcesAt(d.Ruleset, firewall.Node{}, firewall.HookInput, firewall.FamilyIP, "tcp", 80); !r.Any || !reflect.DeepEqual(r.Except, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}) {
		t.Errorf("80/tcp after: %+v, want any but 203.0.113.0/24", r)
	}
}

func TestPreviewWidening(t *testing.T) {
	found := foundNarrow()
	spec := MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp"))}
	if p := PreviewFlip(found, spec); !p.Approved {
		t.Fatalf("restrictions carried: refused %v", p.Reasons)
	}
	p := previewFlip(found, uncarried(t, found, spec).Ruleset, spec, firewall.Node{})
	why := strings.Join(p.Reasons, "\n")
	for _, s := range []string{
		"22/tcp (input, ip) would widen: passes after the flip from any source",
		"22/tcp (input, ip, from 203.0.113.0/24) would widen",
		"22/tcp (input, ip6) would widen",
		"80/tcp (input, ip, from 203.0.113.0/24) would widen",
	} {
		if !strings.Contains(why, s) {
			t.Errorf("reasons lack %q:\n%s", s, why)
		}
	}
	if strings.Contains(why, "from 10.9.0.0/24") || strings.Contains(why, "80/tcp (input, ip6)") {
		t.Errorf("reasons name what does not widen:\n%s", why)
	}
	// Declared, the same widening is approved.
	spec.Widen = fwtest.Ports("22/tcp", "80/tcp")
	p = PreviewFlip(found, spec)
	if !p.Approved {
		t.Fatalf("widening declared: refused %v", p.Reasons)
	}
	n := 0
	for _, f := range p.Fates {
		if f.Fate == FateWidening {
			n++
			if !f.Declared {
				t.Errorf("%+v not declared", f)
			}
		}
	}
	if n == 0 {
		t.Error("no widening fate for ports declared in flip.widen")
	}
}

// A rate limit cannot be carried: the port passes now only under it, and
// the preview refuses naming it.
func TestPreviewRefusesRateLimit(t *testing.T) {
	found := foundNarrow()
	ch := &found.Tables[0].Chains[0]
	ch.Rules = append(ch.Rules, acceptH(9, append([]firewall.Cond{{Kind: firewall.CondUndecidable, Reason: "limit rate 3/60s"}}, portsCond(unix.IPPROTO_TCP, 2222, 2222)...)))
	p := PreviewFlip(found, MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "2222/tcp"))})
	why := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(why, "2222/tcp (input, ip) would widen") || !strings.Contains(why, "limit rate 3/60s") {
		t.Errorf("approved=%v, want a refusal naming 2222/tcp and its limit:\n%s", p.Approved, why)
	}
}

// A carried restriction that cannot be written is refused, naming what:
// a wildcard is one only by a trailing '*' with something before it.
func TestDeriveRefusesBadCarried(t *testing.T) {
	a := allow("web", "80/tcp")
	a[0].Carried = []Reach{{Family: "ip", From: []netip.Prefix{netip.MustParsePrefix("fd00::/8")}}, {Family: "arp"}, {Family: "ip6", Iif: []string{"eth*0"}}, {Family: "ip6", Iif: []string{"br-*"}, NotIif: []string{"*"}}}
	_, err := Derive(MeshSpec{Node: "n1", Input: a})
	for _, s := range []string{"carried source fd00::/8 is not a prefix of family ip", `carried family "arp"`, `interface name "eth*0"`, `interface name "*"`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Derive: %v, want it to say %q", err, s)
		}
	}
}

// uncarried is the table Derive made before restrictions were carried:
// every kept port open to every source.
func uncarried(t *testing.T, found *firewall.Ruleset, spec MeshSpec) *Derived {
	t.Helper()
	eff := EffectiveSpec(found, spec)
	for i := range eff.Input {
		eff.Input[i].Carried = nil
	}
	d, err := Derive(eff)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// "allow in on eth1": carried as the interface; the table of old, open on
// every interface, is refused on a node with two uplinks, naming it.
func TestPreviewInterfaceCarried(t *testing.T) {
	found := foundNarrow()
	ch := &found.Tables[0].Chains[0]
	ch.Rules = append(ch.Rules, acceptH(9, append([]firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"eth1"}}}, tcpPort(8443)...)))
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "lo", Loopback: true}, {Name: "eth0"}, {Name: "eth1"}}}
	spec := MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "8443/tcp"))}
	if p := PreviewFlipOn(found, node, spec); !p.Approved {
		t.Fatalf("interface carried: refused %v", p.Reasons)
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), `iifname "eth1" meta nfproto ipv4 ip saddr != @input_8443_tcp_ip_except meta l4proto tcp th dport 8443 counter accept`) ||
		!strings.Contains(d.Text(), `iifname "eth1" meta nfproto ipv6 meta l4proto tcp th dport 8443 counter accept`) {
		t.Errorf("8443 not carried on eth1:\n%s", d.Text())
	}
	p := previewFlip(found, uncarried(t, found, spec).Ruleset, spec, node)
	if why := strings.Join(p.Reasons, "\n"); p.Approved || !strings.Contains(why, "8443/tcp (input, ip) would widen") || !strings.Contains(why, "input interface eth1") {
		t.Errorf("8443 open on every interface: approved=%v, want a refusal naming eth1:\n%s", p.Approved, why)
	}
}

// "deny in on eth1" before an allow to all: carried as "iifname != eth1".
func TestDeriveCarriesNotIif(t *testing.T) {
	found := foundNarrow()
	ch := &found.Tables[0].Chains[0]
	deny := firewall.Rule{Handle: 9, Conds: append([]firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"eth1"}}}, tcpPort(8443)...), Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}}
	ch.Rules = append(ch.Rules, deny, acceptH(10, tcpPort(8443)))
	d, err := DeriveFor(found, MeshSpec{Node: "n1", Input: allow("web", "8443/tcp")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), `iifname != "eth1" meta nfproto ipv6 meta l4proto tcp th dport 8443 counter accept`) {
		t.Errorf("8443 not carried as closed on eth1:\n%s", d.Text())
	}
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}, {Name: "eth1"}}}
	for _, up := range []string{"eth0", "eth1"} {
		one := firewall.Node{Interfaces: []firewall.Interface{{Name: up}}}
		before := eval.SourcesAt(found, one, firewall.HookInput, firewall.FamilyIP6, "tcp", 8443)
		after := eval.SourcesAt(d.Ruleset, one, firewall.HookInput, firewall.FamilyIP6, "tcp", 8443)
		if before.Open() != after.Open() || before.Open() != (up == "eth0") {
			t.Errorf("8443 on %s: open %v before, %v after", up, before.Open(), after.Open())
		}
	}
	if p := PreviewFlipOn(found, node, MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "8443/tcp"))}); !p.Approved {
		t.Errorf("refused: %v", p.Reasons)
	}
}

// A port open now from every source and after the flip from fewer is
// closing from the rest and kept from those: the fate of a client in
// 10.9.0.0/24 is that it still connects.
func TestPreviewKeepsAPortFromFewer(t *testing.T) {
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{acceptH(2, tcpPort(22)), acceptH(3, tcpPort(8080))},
	}}}}}
	derived := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: firewall.MeshTable, Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{acceptH(2, tcpPort(22)), acceptH(3, append([]firewall.Cond{fwtest.Saddr("10.9.0.0/24")}, tcpPort(8080)...))},
	}}}}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p := previewFlip(found, derived, spec, firewall.Node{})
	fates := map[string]string{}
	for _, f := range p.Fates {
		if f.Opening.Port == 8080 && f.Opening.Family == firewall.FamilyIP {
			fates[f.Opening.From] = f.Fate
		}
	}
	if fates[""] != FateClosing || fates["10.9.0.0/24"] != FateKept {
		t.Errorf("8080/tcp (ip) fates by source: %v; want closing from any other source, kept from 10.9.0.0/24", fates)
	}
}

// A routed port open to every source beside the rest of the ports open to
// all but one source (ufw's "route allow 80/udp" before "route deny from
// X") is one opening, 0-65535 from any; the mesh keeps what each port is
// open to: 80 from X too, the other ports not from X.
func TestEffectiveSpecRoutedSourcesPerPort(t *testing.T) {
	x := "fd00:f0::3/128"
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP6, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
	}, {
		Name: "forward", Hook: firewall.HookForward, Policy: "accept", Type: "filter",
		Rules: []firewall.Rule{
			acceptH(2, portsCond(unix.IPPROTO_UDP, 80, 80)),
			{Handle: 3, Conds: []firewall.Cond{fwtest.Saddr(x)}, Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}},
		},
	}}}}}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	after, err := afterFlip(found, d.Ruleset, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{79, 80, 81} {
		for _, proto := range []string{"tcp", "udp"} {
			before := eval.SourcesAt(found, firewall.Node{}, eval.DirRouted, firewall.FamilyIP6, proto, port)
			now := eval.SourcesAt(after, firewall.Node{}, eval.DirRouted, firewall.FamilyIP6, proto, port)
			if !reflect.DeepEqual(before, now) {
				t.Errorf("routed %d/%s (ip6): %+v before the flip, %+v after", port, proto, before, now)
			}
		}
	}
	p := previewFlip(found, d.Ruleset, spec, firewall.Node{})
	for _, f := range p.Fates {
		if o := f.Opening; o.Routed() && o.Family == firewall.FamilyIP6 && f.Fate != FateKept {
			t.Errorf("%s (%s): %s; want kept", portSpec(o), describeOpening(o), f.Fate)
		}
	}
}

// A port kept from any source but closing to one it reaches now ("80/udp
// from all" now, "from all but X" after) is closing from X, into the node
// and routed through it alike: the preview names it and refuses unless
// 80/udp is in flip.drop. (Its multicast class, judged apart, says the
// same of ff00::/8.)
func TestPreviewNamesASourceLeftOut(t *testing.T) {
	x := "fd00:f0::3/128"
	for _, hook := range []string{firewall.HookInput, firewall.HookForward} {
		chain := func(rules ...firewall.Rule) []firewall.Chain {
			return []firewall.Chain{{Name: hook, Hook: hook, Policy: "drop", Type: "filter", Rules: rules}}
		}
		found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: chain(
			acceptH(2, tcpPort(22)), acceptH(3, portsCond(unix.IPPROTO_UDP, 80, 80)),
		)}}}
		derived := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: firewall.MeshTable, Chains: chain(
			acceptH(2, tcpPort(22)),
			firewall.Rule{Handle: 3, Conds: append([]firewall.Cond{fwtest.Saddr(x)}, portsCond(unix.IPPROTO_UDP, 80, 80)...), Verdict: firewall.Verdict{Kind: firewall.VerdictDrop}},
			acceptH(4, portsCond(unix.IPPROTO_UDP, 80, 80)),
		)}}}
		if hook == firewall.HookForward {
			// The management port stays open into the node.
			found.Tables[0].Chains = append(found.Tables[0].Chains, firewall.Chain{Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter", Rules: []firewall.Rule{acceptH(9, tcpPort(22))}})
			derived.Tables[0].Chains = append(derived.Tables[0].Chains, firewall.Chain{Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter", Rules: []firewall.Rule{acceptH(9, tcpPort(22))}})
		}
		spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
		p := previewFlip(found, derived, spec, firewall.Node{})
		fates := map[string]string{}
		for _, f := range p.Fates {
			if o := f.Opening; o.Proto == "udp" && o.Family == firewall.FamilyIP6 && o.Direction == hook && o.To == "" && o.Port == 80 && firewall.PortEnd(o) == 80 {
				fates[o.From] = f.Fate
			}
		}
		if want := map[string]string{"": FateKept, x: FateClosing}; !reflect.DeepEqual(fates, want) {
			t.Errorf("80/udp (%s, ip6) fates by source: %v; want %v", hook, fates, want)
		}
		named := func(p Preview) (n int) {
			for _, r := range p.Reasons {
				if strings.HasPrefix(r, "80/udp ("+hook+", ip6, from "+x+")") {
					n++
				}
			}
			return n
		}
		if p.Approved || named(p) != 1 {
			t.Errorf("%s: approved %v, reasons %q; want one refusal naming 80/udp from %s", hook, p.Approved, p.Reasons, x)
		}
		spec.Drop = []vocab.Port{{Num: 80, Proto: "udp"}}
		if p := previewFlip(found, derived, spec, firewall.Node{}); named(p) != 0 {
			t.Errorf("%s: 80/udp in flip.drop: still refused for it: %q", hook, p.Reasons)
		}
	}
}
