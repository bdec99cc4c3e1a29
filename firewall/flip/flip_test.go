package flip

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/marks"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

func allow(owner string, specs ...string) []Allow {
	var out []Allow
	for _, p := range fwtest.Ports(specs...) {
		out = append(out, Allow{Port: p, Owner: owner})
	}
	return out
}

func concat[T any](ls ...[]T) []T {
	var out []T
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

func TestDeriveOpensExactlySpecInput(t *testing.T) {
	spec := MeshSpec{
		Node:    "n1",
		Input:   concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "443/tcp"), allow(OwnerFoundation, "53/udp", "5000/tcp")),
		Forward: allow("web", "8443/tcp"),
		Egress:  []Egress{{Family: firewall.FamilyIP, Iif: "docker0"}, {Family: firewall.FamilyIP, Iif: "br-*"}, {Family: firewall.FamilyIP6, Iif: "br-*"}},
		Routed:  []Routed{{Family: firewall.FamilyIP, Proto: "tcp", Port: 5432}, {Family: firewall.FamilyIP, Proto: "tcp", Port: 6000, PortEnd: 6010, From: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}}},
	}
	d, err := Derive(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range eval.OpenPorts(d.Ruleset) {
		if o.Direction != firewall.HookInput {
			continue
		}
		if o.Uncertain || o.From != "" || o.PortEnd != 0 {
			t.Errorf("input opening %+v: want sure, from anywhere, one port", o)
		}
		got = append(got, o.Family+" "+portSpec(o))
	}
	want := []string{"ip 22/tcp", "ip 80/tcp", "ip 443/tcp", "ip 5000/tcp", "ip 53/udp", "ip6 22/tcp", "ip6 80/tcp", "ip6 443/tcp", "ip6 5000/tcp", "ip6 53/udp"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("input openings of the derived ruleset:\n got %v\nwant %v", got, want)
	}
	// Forward: the published port and the routed ones surely (6000-6010
	// from 10.9.0.0/24 only), everything else only from a bridge in
	// Egress (uncertain for a packet from outside).
	for _, o := range eval.OpenPorts(d.Ruleset) {
		if o.Direction != firewall.HookForward {
			continue
		}
		routed := o.Family == firewall.FamilyIP && o.Proto == "tcp" && (o.Port == 5432 && o.PortEnd == 0 || o.Port == 6000 && o.PortEnd == 6010 && o.From == "10.9.0.0/24")
		sure := o.Proto == "tcp" && o.Port == 8443 && o.PortEnd == 0 || routed
		if sure == o.Uncertain {
			t.Errorf("forward opening %+v: want sure only for 8443/tcp", o)
		}
	}
	for _, r := range d.Ruleset.Tables[0].Chains[0].Rules {
		if ownerOf(r.Comment) == "" || !strings.HasPrefix(r.Comment, "adoption:n1:") {
			t.Errorf("derived rule without an owner in its comment: %+v", r)
		}
		if len(r.Unknown) > 0 && !strings.Contains(r.Comment, ":icmp") {
			t.Errorf("derived rule %q not fully decoded: %v", r.Comment, r.Unknown)
		}
	}
	text := d.Text()
	for _, w := range []string{"table inet adoption {", "type filter hook input priority filter; policy drop;",
		`meta l4proto tcp th dport 22 counter accept comment "adoption:n1:management:22/tcp"`,
		`ct status dnat meta l4proto tcp ct original proto-dst 8443 counter accept comment "adoption:n1:web:8443/tcp"`,
		`icmpv6 type nd-neighbor-solicit accept`, `meta nfproto ipv4 iifname "br-*" accept`, `meta nfproto ipv6 iifname "br-*" accept`,
		`meta nfproto ipv4 ct status & dnat == 0 meta l4proto tcp th dport 5432 counter accept comment "adoption:n1:routed:5432/tcp"`,
		`meta nfproto ipv4 ip saddr @routed_6000_tcp_ip_from1 ct status & dnat == 0 meta l4proto tcp th dport 6000-6010 counter accept`} {
		if !strings.Contains(text, w) {
			t.Errorf("Text lacks %q:\n%s", w, text)
		}
	}
}

func TestDeriveRefusesBadSpec(t *testing.T) {
	_, err := Derive(MeshSpec{Node: "N1", Input: []Allow{{Port: vocab.Port{Num: 0, Proto: "sctp"}, Owner: "a:b"}}})
	if err == nil {
		t.Fatal("Derive accepted a bad spec")
	}
	for _, w := range []string{`node name "N1"`, `owner name "a:b"`, "0 is not a port", `"sctp" is not tcp or udp`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// Comments the flip writes are never taken for marks: Marker lists,
// closes and releases only "adoption:<node>:<owner>:<port>/<proto>".
func TestFlipCommentsAreNotMarks(t *testing.T) {
	for _, c := range []string{neutraliseComment("n1"), "adoption:n1:mesh:established", "adoption:n1:containers:egress"} {
		if m, ok := marks.ParseMark(c); ok {
			t.Errorf("ParseMark(%q) = %+v: a flip rule would be taken for a mark", c, m)
		}
	}
	if o := ownerOf("adoption:n1:web:80/tcp"); o != "web" {
		t.Errorf("ownerOf = %q", o)
	}
}

func tcpPort(port uint16) []firewall.Cond {
	return []firewall.Cond{{Kind: firewall.CondL4Proto, Protos: []int{unix.IPPROTO_TCP}}, {Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: port, To: port}}}}
}

func portsCond(proto int, from, to uint16) []firewall.Cond {
	return []firewall.Cond{{Kind: firewall.CondL4Proto, Protos: []int{proto}}, {Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: from, To: to}}}}
}

func acceptH(h uint64, conds []firewall.Cond) firewall.Rule {
	return firewall.Rule{Handle: h, Conds: conds, Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
}

// foundNative is a native default-deny predecessor.
func foundNative() *firewall.Ruleset {
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{
			acceptH(2, []firewall.Cond{{Kind: firewall.CondCtState, Bits: firewall.CtStateEstablished | firewall.CtStateRelated}}),
			acceptH(3, tcpPort(22)),
			acceptH(4, tcpPort(80)),
			acceptH(5, tcpPort(8081)),
			acceptH(6, portsCond(unix.IPPROTO_TCP, 8000, 8010)),
			acceptH(7, portsCond(unix.IPPROTO_UDP, 9999, 9999)),
			acceptH(8, append([]firewall.Cond{{Kind: firewall.CondUndecidable, Reason: "limit"}}, tcpPort(2222)...)),
		},
	}, {
		Name: "forward", Hook: firewall.HookForward, Policy: "drop", Type: "filter",
	}}}}}
}

func fateOf(p Preview, fam, proto string, port uint16) (Fate, bool) {
	for _, f := range p.Fates {
		o := f.Opening
		if o.Family == fam && o.Proto == proto && o.Direction == firewall.HookInput && o.Port <= port && port <= firewall.PortEnd(o) {
			return f, true
		}
	}
	return Fate{}, false
}

func TestPreviewFlipFates(t *testing.T) {
	found := foundNative()
	spec := MeshSpec{
		Node:  "n1",
		Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp"), allow("api", "8005/tcp")),
		Drop:  fwtest.Ports("8081/tcp", "8000/tcp", "8001/tcp"),
	}
	p := PreviewFlip(found, spec)
	if p.Approved {
		t.Fatalf("approved with 8002-8004, 8006-8010, 9999/udp and 2222 closing undeclared: %+v", p)
	}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, w := range []struct {
			proto      string
			port, end  uint16
			fate, by   string
			dropped    bool
			uncertain  bool
			wantReason bool
		}{
			{"tcp", 22, 0, FateKept, OwnerManagement, false, false, false},
			{"tcp", 80, 0, FateKept, "web", false, false, false},
			{"tcp", 8081, 0, FateClosing, "", true, false, false},
			{"tcp", 8000, 8001, FateClosing, "", true, false, false},
			{"tcp", 8002, 8004, FateClosing, "", false, false, true},
			{"tcp", 8005, 0, FateKept, "api", false, false, false},
			{"tcp", 8006, 8010, FateClosing, "", false, false, true},
			{"udp", 9999, 0, FateClosing, "", false, false, true},
			{"tcp", 2222, 0, FateClosing, "", false, true, true},
		} {
			f, ok := fateOf(p, fam, w.proto, w.port)
			if !ok {
				t.Errorf("%s %d/%s: no fate", fam, w.port, w.proto)
				continue
			}
			if f.Fate != w.fate || f.By != w.by || f.Dropped != w.dropped || f.Opening.Port != w.port || f.Opening.PortEnd != w.end || f.Opening.Uncertain != w.uncertain {
				t.Errorf("%s %d/%s: fate %+v; want %s by %q dropped=%v ports %d-%d uncertain=%v", fam, w.port, w.proto, f, w.fate, w.by, w.dropped, w.port, w.end, w.uncertain)
			}
			reason := portSpec(f.Opening) + " (input, " + fam
			has := strings.Contains("\n"+strings.Join(p.Reasons, "\n"), "\n"+reason)
			if has != w.wantReason {
				t.Errorf("%s: reason present=%v, want %v:\n%s", reason, has, w.wantReason, strings.Join(p.Reasons, "\n"))
			}
		}
	}
	if want := "8002-8004/tcp (input, ip) is open now and would close: declare it in a module or add it to flip.drop"; !contains(p.Reasons, want) {
		t.Errorf("reasons lack %q:\n%s", want, strings.Join(p.Reasons, "\n"))
	}
	if p.FoundFingerprint != firewall.Fingerprint(found) || p.DerivedFingerprint == "" || p.DerivedFingerprint == p.FoundFingerprint {
		t.Errorf("fingerprints: %q %q", p.FoundFingerprint, p.DerivedFingerprint)
	}

	// Every closing port declared: approved.
	spec.Drop = append(spec.Drop, fwtest.Ports("8002/tcp", "8003/tcp", "8004/tcp", "8006/tcp", "8007/tcp", "8008/tcp", "8009/tcp", "8010/tcp", "9999/udp", "2222/tcp")...)
	p = PreviewFlip(found, spec)
	if !p.Approved || len(p.Reasons) != 0 {
		t.Errorf("with every closing port in flip.drop: approved=%v reasons=%v", p.Approved, p.Reasons)
	}
	b, _ := json.Marshal(p)
	for _, k := range []string{`"approved"`, `"fates"`, `"found_fingerprint"`, `"derived_fingerprint"`, `"opening"`, `"fate"`, `"by"`, `"dropped"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("preview JSON lacks %s: %s", k, b)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestPreviewFlipManagementRefusal(t *testing.T) {
	found := foundNative()
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"),
		Drop: fwtest.Ports("22/tcp", "80/tcp", "8081/tcp", "9999/udp", "2222/tcp")}
	for p := 8000; p <= 8010; p++ {
		spec.Drop = append(spec.Drop, vocab.Port{Num: uint16(p), Proto: "tcp"})
	}
	p := PreviewFlip(found, spec)
	if p.Approved || !contains(p.Reasons, "22/tcp is a management port and is in flip.drop: the node would be cut off from its operator; remove it from flip.drop") {
		t.Errorf("a management port in flip.drop: approved=%v reasons=%v", p.Approved, p.Reasons)
	}

	// A derived ruleset that would close the management port (as a broken
	// derivation would): refused by name even though it is in flip.drop.
	spec.Drop = spec.Drop[1:]
	broken, err := Derive(MeshSpec{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	p = previewFlip(found, broken.Ruleset, spec, firewall.Node{})
	if p.Approved {
		t.Fatal("approved a flip that closes the management port")
	}
	for _, w := range []string{"management port 22/tcp (input, ip) is open now and would close", "management port 22/tcp (input, ip6) would not be open after the flip"} {
		if !strings.Contains(strings.Join(p.Reasons, "\n"), w) {
			t.Errorf("reasons lack %q:\n%s", w, strings.Join(p.Reasons, "\n"))
		}
	}
}

// A source-restricted opening is kept by an Allow open to everyone; an
// uncertain one after the flip does not keep a sure one; routed
// forwarding the found firewall lets through is kept by the mesh (routed).
func TestPreviewFlipSourcesAndUncertain(t *testing.T) {
	found := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "f", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{acceptH(1, append([]firewall.Cond{{Kind: firewall.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.3/32")}}}, tcpPort(7000)...))},
	}, {
		Name: "forward", Hook: firewall.HookForward, Policy: "drop", Type: "filter",
		Rules: []firewall.Rule{acceptH(2, tcpPort(8443)), acceptH(3, []firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"docker0"}}})},
	}}}}}
	p := PreviewFlip(found, MeshSpec{Node: "n1", Input: allow("m", "7000/tcp")})
	var sawInput, sawFwd, sawBridge bool
	for _, f := range p.Fates {
		o := f.Opening
		if o.Family != firewall.FamilyIP {
			continue // no ip6 base chain: every ip6 port is open, and closing
		}
		switch {
		case o.Direction == firewall.HookInput && o.Port == 7000:
			sawInput = true
			if f.Fate != FateKept || f.By != "m" || o.From != "198.18.0.3/32" {
				t.Errorf("7000 from 198.18.0.3: %+v; want kept by m", f)
			}
		case o.Direction == firewall.HookForward && o.Port == 8443 && !o.Uncertain:
			sawFwd = true
			if f.Fate != FateKept || f.By != OwnerRouted {
				t.Errorf("forward 8443 (routed, sure now): %+v; want kept by routed", f)
			}
		case o.Direction == firewall.HookForward && o.Uncertain && o.Proto == "udp":
			sawBridge = true
			if f.Fate != FateKept || f.By != OwnerContainers {
				t.Errorf("forward from docker0 %+v: want kept by containers", f)
			}
		}
	}
	if !sawInput || !sawFwd || !sawBridge {
		t.Errorf("fates missing (input %v, forward %v, bridge %v): %+v", sawInput, sawFwd, sawBridge, p.Fates)
	}
	if strings.Contains(strings.Join(p.Reasons, "\n"), "8443/tcp (forward") {
		t.Errorf("reasons: %v", p.Reasons)
	}
}

func TestFingerprint(t *testing.T) {
	a := foundNative()
	fa := firewall.Fingerprint(a)
	if !strings.HasPrefix(fa, "sha256:") || len(fa) != len("sha256:")+64 {
		t.Fatalf("Fingerprint = %q", fa)
	}
	// A relisting: through JSON (the form the model travels in), with
	// other handles, chains and set elements in another order.
	var b firewall.Ruleset
	raw, _ := json.Marshal(a)
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	for i := range b.Tables[0].Chains[0].Rules {
		b.Tables[0].Chains[0].Rules[i].Handle += 100
	}
	b.Tables[0].Chains[0], b.Tables[0].Chains[1] = b.Tables[0].Chains[1], b.Tables[0].Chains[0]
	if fb := firewall.Fingerprint(&b); fb != fa {
		t.Errorf("relisted: %s, want %s", fb, fa)
	}
	for name, edit := range map[string]func(rs *firewall.Ruleset){
		"rule added": func(rs *firewall.Ruleset) {
			ch := &rs.Tables[0].Chains[0]
			ch.Rules = append(ch.Rules, acceptH(99, tcpPort(1)))
		},
		"rule removed":    func(rs *firewall.Ruleset) { ch := &rs.Tables[0].Chains[0]; ch.Rules = ch.Rules[1:] },
		"port changed":    func(rs *firewall.Ruleset) { rs.Tables[0].Chains[0].Rules[2].Conds[1].Ports[0].From = 23 },
		"verdict changed": func(rs *firewall.Ruleset) { rs.Tables[0].Chains[0].Rules[2].Verdict.Kind = firewall.VerdictDrop },
		"comment changed": func(rs *firewall.Ruleset) { rs.Tables[0].Chains[0].Rules[2].Comment = "x" },
		"policy changed":  func(rs *firewall.Ruleset) { rs.Tables[0].Chains[0].Policy = "accept" },
		"rules reordered": func(rs *firewall.Ruleset) {
			r := rs.Tables[0].Chains[0].Rules
			r[1], r[2] = r[2], r[1]
		},
		"set element added": func(rs *firewall.Ruleset) {
			rs.Tables[0].Sets = append(rs.Tables[0].Sets, firewall.Set{Name: "s", Elements: []firewall.SetElement{{Key: []byte{0, 1}}}})
		},
	} {
		c := foundNative()
		edit(c)
		if firewall.Fingerprint(c) == fa {
			t.Errorf("%s: fingerprint unchanged", name)
		}
	}
	s1 := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "t", Sets: []firewall.Set{{Name: "s", Elements: []firewall.SetElement{{Key: []byte{1}}, {Key: []byte{2}}}}}}}}
	s2 := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "t", Sets: []firewall.Set{{Name: "s", Elements: []firewall.SetElement{{Key: []byte{2}}, {Key: []byte{1}}}}}}}}
	if firewall.Fingerprint(s1) != firewall.Fingerprint(s2) {
		t.Error("set element order changed the fingerprint")
	}
}

// ufwModel is the chain layout of ufw with Docker's jumps first in FORWARD.
func ufwModel(dockerAfter bool) *firewall.Ruleset {
	jumpH := func(h uint64, target string) firewall.Rule {
		return firewall.Rule{Handle: h, Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: target}}
	}
	fwd := []firewall.Rule{jumpH(10, "DOCKER-USER"), jumpH(11, "DOCKER-FORWARD"), jumpH(12, "ufw-before-logging-forward"), jumpH(13, "ufw-before-forward")}
	if dockerAfter {
		fwd = []firewall.Rule{jumpH(12, "ufw-before-logging-forward"), jumpH(13, "ufw-before-forward"), jumpH(10, "DOCKER-USER")}
	}
	return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		{Name: "INPUT", Hook: firewall.HookInput, Policy: "drop", Type: "filter", Rules: []firewall.Rule{jumpH(1, "ufw-before-logging-input"), jumpH(2, "ufw-before-input")}},
		{Name: "FORWARD", Hook: firewall.HookForward, Policy: "drop", Type: "filter", Rules: fwd},
		{Name: "OUTPUT", Hook: "output", Policy: "accept", Type: "filter", Rules: []firewall.Rule{jumpH(20, "ufw-before-logging-output")}},
		{Name: "DOCKER-USER", Rules: []firewall.Rule{{Handle: 30, Verdict: firewall.Verdict{Kind: firewall.VerdictReturn}}}},
		{Name: "DOCKER-FORWARD", Rules: []firewall.Rule{acceptH(31, []firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"docker0"}}})}},
		{Name: "ufw-before-logging-input"}, {Name: "ufw-before-input", Rules: []firewall.Rule{jumpH(40, "ufw-user-input")}},
		{Name: "ufw-user-input", Rules: []firewall.Rule{acceptH(41, tcpPort(22))}},
		{Name: "ufw-before-logging-forward"}, {Name: "ufw-before-forward"}, {Name: "ufw-before-logging-output"},
		{Name: "ufw-user-limit"},
	}}, {Family: firewall.FamilyIP, Name: "nat", Chains: []firewall.Chain{
		{Name: "PREROUTING", Hook: "prerouting", Priority: -100, Policy: "accept", Type: "nat", Rules: []firewall.Rule{jumpH(50, "DOCKER")}},
		{Name: "DOCKER"},
	}}}}
}

func TestAnalyseUfwBesideDocker(t *testing.T) {
	pred, err := analyse(ufwModel(false), nil)
	if err != nil {
		t.Fatal(err)
	}
	var pts []string
	for _, p := range pred.points {
		pts = append(pts, p.chain)
		if p.before != 0 || p.append {
			t.Errorf("point %+v: want the top of the chain", p)
		}
	}
	if want := []string{"ufw-before-logging-input", "ufw-before-logging-forward", "ufw-before-logging-output"}; !reflect.DeepEqual(pts, want) {
		t.Errorf("points %v, want %v", pts, want)
	}
	var dormant []string
	for _, c := range pred.dormant() {
		dormant = append(dormant, c.Table+"/"+c.Chain)
	}
	want := []string{"filter/ufw-before-logging-input", "filter/ufw-before-input",
		"filter/ufw-user-input", "filter/ufw-before-logging-forward", "filter/ufw-before-forward", "filter/ufw-before-logging-output", "filter/ufw-user-limit"}
	if !reflect.DeepEqual(dormant, want) {
		t.Errorf("dormant %v\nwant    %v", dormant, want)
	}
	for _, b := range pred.bases {
		if b.chain == "FORWARD" && (b.from != 2 || !reflect.DeepEqual(b.handles, []uint64{12, 13}) || !b.policyDrop) {
			t.Errorf("FORWARD: %+v; want ufw's rules from index 2 (Docker's two jumps stay)", b)
		}
	}

	// Docker's jump after ufw's: refused, naming both rules.
	_, err = analyse(ufwModel(true), nil)
	if err == nil || !strings.Contains(err.Error(), "rule handle 10 (jump DOCKER-USER") || !strings.Contains(err.Error(), "predecessor's rule handle 12") {
		t.Errorf("Docker after ufw: %v; want a refusal naming both rules", err)
	}
	p := PreviewFlip(ufwModel(true), MeshSpec{Node: "n1"})
	if p.Approved || len(p.Reasons) != 1 || !strings.Contains(p.Reasons[0], "DOCKER-USER") {
		t.Errorf("preview with Docker after ufw: %+v", p)
	}
}

func TestAfterFlipModel(t *testing.T) {
	found := ufwModel(false)
	d, err := Derive(MeshSpec{Node: "n1", Input: allow("web", "80/tcp")})
	if err != nil {
		t.Fatal(err)
	}
	after, err := afterFlip(found, d.Ruleset, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, o := range eval.OpenPorts(after) {
		if o.Direction == firewall.HookInput {
			in = append(in, o.Family+" "+portSpec(o))
		}
	}
	// 22 was ufw's; only the mesh's 80 is open after the flip.
	if want := []string{"ip 80/tcp", "ip6 80/tcp"}; !reflect.DeepEqual(in, want) {
		t.Errorf("input after the flip: %v, want %v", in, want)
	}
	if found.Tables[0].Chains[5].Rules != nil {
		t.Error("afterFlip changed the found ruleset")
	}
	if _, err := afterFlip(after, d.Ruleset, "n1", nil); err == nil {
		t.Error("afterFlip on a flipped ruleset: want an error")
	}
	base, mesh, neutral := split(after, "n1")
	if mesh == nil || len(neutral) != 3 || firewall.Fingerprint(base) != firewall.Fingerprint(found) {
		t.Errorf("split: mesh %v, %d neutral, fingerprint equal %v", mesh != nil, len(neutral), firewall.Fingerprint(base) == firewall.Fingerprint(found))
	}
}

func TestRevertPlanJSON(t *testing.T) {
	p := RevertPlan{Node: "n1", MeshTable: TableRef{firewall.FamilyInet, firewall.MeshTable},
		Neutralised: []RuleRef{{Family: "ip", Table: "filter", Chain: "ufw-before-input", Handle: 7, Comment: neutraliseComment("n1")}},
		Dormant:     []ChainRef{{Family: "ip", Table: "filter", Chain: "INPUT"}}, FoundFingerprint: "sha256:x", Saved: "table ip filter {}",
		FlippedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"node"`, `"mesh_table"`, `"neutralised"`, `"dormant"`, `"found_fingerprint"`, `"saved"`, `"flipped_at"`, `"handle":7`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
	var q RevertPlan
	if err := json.Unmarshal(b, &q); err != nil || !reflect.DeepEqual(p, q) {
		t.Errorf("round trip: %+v, %v", q, err)
	}
	s, _ := json.Marshal(MeshSpec{Node: "n1", Input: allow("web", "80/tcp"), Drop: fwtest.Ports("81/tcp")})
	if want := `{"node":"n1","input":[{"port":{"port":80,"proto":"tcp"},"owner":"web"}],"forward":null,"drop":[{"port":81,"proto":"tcp"}]}`; string(s) != want {
		t.Errorf("MeshSpec JSON %s\nwant %s", s, want)
	}
}

// A rule on a custom-named Docker bridge (com.docker.network.bridge.name
// lan0) in FORWARD is Docker's when the node's engine names the bridge:
// the predecessor starts after it, at ufw's jumps, and the commit would
// not delete it. Told by name alone (no engine), lan0 is nobody's bridge
// and the rule counts as the predecessor's.
func TestAnalyseCustomDockerBridge(t *testing.T) {
	rs := ufwModel(false)
	fwd := &rs.Tables[0].Chains[1]
	lan := firewall.Rule{Handle: 14, Conds: []firewall.Cond{{Kind: firewall.CondIifname, Names: []string{"lan0"}}, {Kind: firewall.CondOifname, Negate: true, Names: []string{"lan0"}}},
		Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}}
	fwd.Rules = append(fwd.Rules[:2], append([]firewall.Rule{lan}, fwd.Rules[2:]...)...)
	node := &firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}, {Name: "lan0", Kind: "bridge"}}, EngineBridges: map[string]string{"lan0": "docker"}}
	for _, c := range []struct {
		node    *firewall.Node
		from    int
		handles []uint64
		point   string
	}{
		{node, 3, []uint64{12, 13}, "ufw-before-logging-forward"},
		{nil, 2, []uint64{14, 12, 13}, "FORWARD"},
	} {
		pred, err := analyse(rs, c.node)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range pred.bases {
			if b.chain == "FORWARD" && (b.from != c.from || !reflect.DeepEqual(b.handles, c.handles)) {
				t.Errorf("engine %v: FORWARD from %d handles %v, want from %d handles %v", c.node != nil, b.from, b.handles, c.from, c.handles)
			}
		}
		found := false
		for _, p := range pred.points {
			found = found || p.chain == c.point
		}
		if !found {
			t.Errorf("engine %v: points %+v lack one in %s", c.node != nil, pred.points, c.point)
		}
	}
	// The preview models the flip on the node it is given alike.
	d, err := Derive(MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")})
	if err != nil {
		t.Fatal(err)
	}
	after, err := afterFlip(rs, d.Ruleset, "n1", node)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range after.Tables[0].Chains {
		if ch.Name == "FORWARD" && (len(ch.Rules) != 5 || ch.Rules[2].Handle != 14) {
			t.Errorf("FORWARD after the flip on the node: %d rules, the third handle %d; want lan0's rule (14) in force, untouched", len(ch.Rules), ch.Rules[2].Handle)
		}
	}
}
