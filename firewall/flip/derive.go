// This file holds the mesh's own ruleset for one node (table inet
// adoption): derived from the plan, as a model for the preview and as the
// rules the flip writes.

package flip

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/firewall/marks"
	"adoption/firewall/nft"
	"adoption/vocab"
)

// Owners the derived ruleset names besides modules.
const (
	OwnerManagement = flipwire.OwnerManagement
	OwnerFoundation = flipwire.OwnerFoundation
	OwnerMesh       = flipwire.OwnerMesh
	OwnerEssentials = flipwire.OwnerEssentials
	OwnerContainers = "containers" // traffic from container bridges (their egress)
)

// Allow is flipwire.Allow.
type Allow = flipwire.Allow

// Reach is flipwire.Reach.
type Reach = flipwire.Reach

// MeshSpec is flipwire.MeshSpec.
type MeshSpec = flipwire.MeshSpec

// Derived is the mesh's own ruleset for one node: the model the evaluator
// reads, and the rules Flip writes. Both come from one list of rules, so
// what is previewed is what is written.
type Derived struct {
	Spec MeshSpec `json:"spec"`
	// Ruleset holds the one table inet adoption, as List would decode it
	// once written (handles 0).
	Ruleset *firewall.Ruleset `json:"ruleset"`
	rules   []derivedRule
	sets    []derivedSet
}

// derivedSet is a named set of source addresses of table inet adoption: a
// carried restriction.
type derivedSet struct {
	name   string
	family string
	ranges []addrRange
}

type addrRange struct{ lo, hi netip.Addr }

type derivedRule struct {
	chain   string
	exprs   []expr.Any
	comment string
	text    string         // nft syntax, without the comment
	model   *firewall.Rule // set where the evaluator's model differs from decoding exprs
}

// Derive builds the mesh's ruleset for spec: table inet adoption with base
// chains input and forward (filter hook, priority filter, policy drop).
// Input accepts established/related, loopback, each traffic class of
// spec.Classes with its sources (ICMP types, other protocols, broadcast and
// multicast services: what the found firewall let through; without
// ClassesFound, the ICMP and ICMPv6 types every host needs), one rule
// per Input port, and what containers reach of the node by their bridge's
// name (FromBridges); forward accepts established/related, traffic from the
// bridges in Egress so containers and VMs keep their egress, the routed
// forwarding in Routed, and DNATed connections whose original destination
// port is a Forward port.
// Every rule's comment names its owner: "adoption:<node>:<owner>:<port>/<proto>"
// for ports, "adoption:<node>:essentials:<what>" for what every host needs.
func Derive(spec MeshSpec) (*Derived, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	node := spec.Node
	base := func(what string) string {
		return fmt.Sprintf("%s%s:%s:%s", firewall.MarkPrefix, node, OwnerEssentials, what)
	}
	var rules []derivedRule
	var sets []derivedSet
	// The regions found lets through; those conntrack finds invalid (an
	// ICMP type that starts no connection, sent unsolicited: ufw6 lets
	// echo replies in before its INVALID drop) come before the mesh's own
	// invalid drop, as they do in found.
	var early, late []derivedRule
	if spec.ClassesFound {
		nth := map[[2]string]int{}
		for _, ca := range spec.Classes {
			c, _ := eval.ClassByName(ca.Family, ca.Name) // validateSpec checked it
			k := [2]string{ca.Family, ca.Name}
			to := &late
			if c.CtState() == firewall.CtStateInvalid {
				to = &early
			}
			sets = append(sets, classRule(to, base(classSetName(c)), c, ca.Reach, nth[k])...)
			nth[k]++
		}
	} else {
		legacyICMP(&late, base)
	}
	for _, ch := range []string{firewall.HookInput, firewall.HookForward} {
		rules = append(rules, derivedRule{chain: ch, exprs: marks.CtBits(expr.CtKeySTATE, firewall.CtStateEstablished|firewall.CtStateRelated, expr.VerdictAccept),
			comment: base("established"), text: "ct state established,related accept"})
		if ch == firewall.HookInput {
			// Loopback first, as ufw has it: an invalid packet on lo
			// passes found.
			rules = append(rules, derivedRule{chain: firewall.HookInput, exprs: marks.Iifname("lo", expr.VerdictAccept), comment: base("loopback"), text: `iifname "lo" accept`})
			rules = append(rules, early...)
		}
		rules = append(rules, derivedRule{chain: ch, exprs: marks.CtBits(expr.CtKeySTATE, firewall.CtStateInvalid, expr.VerdictDrop),
			comment: base("invalid"), text: "ct state invalid drop"})
	}
	rules = append(rules, late...)
	switch {
	case spec.DHCP4 && len(spec.DHCP4From) > 0:
		for k, rc := range spec.DHCP4From {
			for _, cr := range carriedNamed("input_dhcp4", rc, k) {
				sets = append(sets, cr.sets...)
				rules = append(rules, derivedRule{chain: firewall.HookInput, comment: base("dhcp4"), text: cr.text + "meta pkttype host udp sport 67 udp dport 68 accept",
					exprs: append(cr.exprs, dhcpExprs(unix.NFPROTO_IPV4, 67, 68)[2:]...)})
			}
		}
	case spec.DHCP4:
		rules = append(rules, derivedRule{chain: firewall.HookInput, comment: base("dhcp4"), text: "meta nfproto ipv4 meta pkttype host udp sport 67 udp dport 68 accept",
			exprs: dhcpExprs(unix.NFPROTO_IPV4, 67, 68)})
	}
	if spec.DHCP6 {
		rules = append(rules, derivedRule{chain: firewall.HookInput, comment: base("dhcp6"), text: "meta nfproto ipv6 ip6 saddr fe80::/10 ip6 daddr fe80::/10 udp sport 547 udp dport 546 accept",
			exprs: dhcpExprs(unix.NFPROTO_IPV6, 547, 546)})
	}
	for _, a := range dedupe(spec.Input) {
		mk := marks.Mark{Node: node, Owner: a.Owner, Port: a.Port.Num, Proto: a.Port.Proto}
		if a.Carried == nil {
			rules = append(rules, derivedRule{chain: firewall.HookInput, exprs: marks.MarkExprs(a.Port.Num, a.Port.Proto), comment: mk.Comment(),
				text: fmt.Sprintf("meta l4proto %s th dport %d counter accept", a.Port.Proto, a.Port.Num)})
			continue
		}
		for k, r := range a.Carried {
			for _, c := range carriedRules(firewall.HookInput, a.Port, r, k) {
				sets = append(sets, c.sets...)
				rules = append(rules, derivedRule{chain: firewall.HookInput, exprs: append(c.exprs, marks.MarkExprs(a.Port.Num, a.Port.Proto)...), comment: mk.Comment(),
					text: c.text + fmt.Sprintf("meta l4proto %s th dport %d counter accept", a.Port.Proto, a.Port.Num)})
			}
		}
	}
	// After the ports: the owner of a port is the plan's rule for it.
	hosted, hostedSets := bridgeInRules(spec)
	rules, sets = append(rules, hosted...), append(sets, hostedSets...)
	fwd, fwdSets := forwardRules(spec)
	rules, sets = append(rules, fwd...), append(sets, fwdSets...)
	outRules, outSets := outputRules(spec)
	rules, sets = append(rules, outRules...), append(sets, outSets...)
	for _, a := range dedupe(spec.Forward) {
		mk := marks.Mark{Node: node, Owner: a.Owner, Port: a.Port.Num, Proto: a.Port.Proto}
		p := marks.L4num(a.Port.Proto)
		ex := marks.CtBits(expr.CtKeySTATUS, firewall.IpsDstNAT, expr.VerdictAccept)
		ex = append(ex[:len(ex)-1],
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
			&expr.Ct{Key: expr.CtKeyPROTODST, Register: 1, Direction: 0},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(a.Port.Num)},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
		text := fmt.Sprintf("ct status dnat meta l4proto %s ct original proto-dst %d counter accept", a.Port.Proto, a.Port.Num)
		if a.Carried == nil {
			rules = append(rules, derivedRule{chain: firewall.HookForward, exprs: ex, comment: mk.Comment(), text: text})
			continue
		}
		for k, r := range a.Carried {
			for _, c := range carriedRules(firewall.HookForward, a.Port, r, k) {
				sets = append(sets, c.sets...)
				rules = append(rules, derivedRule{chain: firewall.HookForward, exprs: append(c.exprs, ex...), comment: mk.Comment(), text: c.text + text})
			}
		}
	}
	for _, r := range rules {
		if len(r.comment) > marks.MaxCommentLen {
			return nil, fmt.Errorf("rule comment %q is %d bytes, longer than the %d a rule comment holds", r.comment, len(r.comment), marks.MaxCommentLen)
		}
	}
	d := &Derived{Spec: spec, rules: rules, sets: sets}
	d.Ruleset = d.model()
	return d, nil
}

func dedupe(as []Allow) []Allow {
	seen := map[vocab.Port]bool{}
	var out []Allow
	for _, a := range as {
		if !seen[a.Port] {
			seen[a.Port] = true
			out = append(out, a)
		}
	}
	return out
}

func validateSpec(spec MeshSpec) error {
	var errs []error
	if !vocab.ValidName(spec.Node) {
		errs = append(errs, fmt.Errorf("node name %q is not valid (%s)", spec.Node, vocab.NameRule))
	}
	check := func(where string, p vocab.Port) {
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: port %s: %w", where, p, err))
		}
	}
	for _, l := range []struct {
		where string
		as    []Allow
	}{{"input", spec.Input}, {"forward", spec.Forward}} {
		for _, a := range l.as {
			if !vocab.ValidName(a.Owner) {
				errs = append(errs, fmt.Errorf("%s: port %s: owner name %q is not valid (%s)", l.where, a.Port, a.Owner, vocab.NameRule))
			}
			check(l.where, a.Port)
		}
	}
	for _, p := range spec.Drop {
		check("drop", p)
	}
	for _, p := range spec.Widen {
		check("widen", p)
	}
	for _, l := range []struct {
		key string
		cs  []string
	}{{"drop_classes", spec.DropClasses}, {"widen_classes", spec.WidenClasses}} {
		for _, s := range l.cs {
			if _, err := vocab.ParseClass(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", l.key, err))
			}
		}
	}
	for _, ca := range spec.Classes {
		if _, ok := eval.ClassByName(ca.Family, ca.Name); !ok {
			errs = append(errs, fmt.Errorf("classes: %q of family %q is not a region of packets of that family: %v", ca.Name, ca.Family, regionError(ca.Name)))
		}
		errs = append(errs, checkReach("class "+ca.Name, ca.Reach)...)
	}
	for _, l := range [][]Allow{spec.Input, spec.Forward} {
		for _, a := range l {
			for _, r := range a.Carried {
				errs = append(errs, checkReach("port "+a.Port.String(), r)...)
			}
		}
	}
	errs = append(errs, validateForward(spec)...)
	errs = append(errs, validateBridgeIn(spec)...)
	errs = append(errs, validateOutput(spec)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the mesh ruleset for node %q cannot be derived: %w", spec.Node, err)
	}
	return nil
}

// checkReach checks a carried restriction: its family, its sources of
// that family, its interface names.
func checkReach(what string, r Reach) []error {
	var errs []error
	if r.Family != firewall.FamilyIP && r.Family != firewall.FamilyIP6 {
		errs = append(errs, fmt.Errorf("%s: carried family %q is not ip or ip6", what, r.Family))
	}
	for _, q := range append(append([]netip.Prefix(nil), r.From...), r.Except...) {
		if !q.IsValid() || q.Addr().Is4() != (r.Family == firewall.FamilyIP) || q.Addr().Is4In6() {
			errs = append(errs, fmt.Errorf("%s: carried source %s is not a prefix of family %s", what, q, r.Family))
		}
	}
	for _, n := range append(append([]string(nil), r.Iif...), r.NotIif...) {
		if err := validIfname(n, true); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	return errs
}

func (d *Derived) model() *firewall.Ruleset {
	t := firewall.Table{Family: firewall.FamilyInet, Name: firewall.MeshTable}
	known := map[string]*firewall.Set{}
	for _, s := range d.sets {
		keyLen := 4
		if s.family == firewall.FamilyIP6 {
			keyLen = 16
		}
		t.Sets = append(t.Sets, firewall.Set{Name: s.name, Interval: true, KeyLen: keyLen, Elements: s.elements()})
	}
	for i := range t.Sets {
		known[t.Sets[i].Name] = &t.Sets[i]
	}
	for _, hook := range d.hooks() {
		policy := "drop"
		if hook == firewall.HookOutput {
			policy = "accept"
		}
		ch := firewall.Chain{Name: hook, Hook: hook, Priority: 0, Policy: policy, Type: "filter", Rules: []firewall.Rule{}}
		dec := nft.Decoder{Family: firewall.FamilyInet, Sets: known, SetsKnown: true}
		for _, r := range d.rules {
			if r.chain != hook {
				continue
			}
			if r.model != nil {
				ch.Rules = append(ch.Rules, *r.model)
				continue
			}
			ch.Rules = append(ch.Rules, dec.Rule(&nftables.Rule{Exprs: r.exprs, UserData: commentData(r.comment)}))
		}
		t.Chains = append(t.Chains, ch)
	}
	return &firewall.Ruleset{Tables: []firewall.Table{t}}
}

// Text is the derived table in nft syntax, for "nft -f": what an operator
// reads, and what a naive replacement would load.
func (d *Derived) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", firewall.MeshTable)
	for _, s := range d.sets {
		b.WriteString(s.text() + "\n")
	}
	for i, hook := range d.hooks() {
		if i > 0 {
			b.WriteString("\n")
		}
		policy := "drop"
		if hook == firewall.HookOutput {
			policy = "accept"
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority filter; policy %s;\n", hook, hook, policy)
		for _, r := range d.rules {
			if r.chain == hook {
				fmt.Fprintf(&b, "\t\t%s comment %q\n", r.text, r.comment)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// queue adds the table, its chains and rules to a batch.
func (d *Derived) queue(c *nftables.Conn) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: firewall.MeshTable})
	drop, accept := nftables.ChainPolicyDrop, nftables.ChainPolicyAccept
	chains := map[string]*nftables.Chain{}
	nums := map[string]*nftables.ChainHook{firewall.HookInput: nftables.ChainHookInput, firewall.HookForward: nftables.ChainHookForward,
		firewall.HookOutput: nftables.ChainHookOutput}
	for _, hook := range d.hooks() {
		policy := &drop
		if hook == firewall.HookOutput {
			policy = &accept
		}
		chains[hook] = c.AddChain(&nftables.Chain{Name: hook, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nums[hook], Priority: nftables.ChainPriorityFilter, Policy: policy})
	}
	ids := map[string]uint32{}
	for _, s := range d.sets {
		typ := nftables.TypeIPAddr
		if s.family == firewall.FamilyIP6 {
			typ = nftables.TypeIP6Addr
		}
		ns := &nftables.Set{Table: t, Name: s.name, KeyType: typ, Interval: true}
		var els []nftables.SetElement
		for _, e := range s.elements() {
			els = append(els, nftables.SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd})
		}
		// Every name is the derived ruleset's own and every element valid:
		// AddSet fails only on an anonymous set that is not constant.
		_ = c.AddSet(ns, els)
		ids[s.name] = ns.ID
	}
	for _, r := range d.rules {
		exprs := r.exprs
		for i, e := range exprs {
			if l, ok := e.(*expr.Lookup); ok {
				if id, ok := ids[l.SetName]; ok {
					cp := *l
					cp.SetID = id
					exprs = append([]expr.Any(nil), exprs...)
					exprs[i] = &cp
				}
			}
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: chains[r.chain], Exprs: exprs, UserData: commentData(r.comment)})
	}
}

// hooks are the base chains of the table: input and forward, and output
// where the found firewall's restriction of what the node sends is carried
// (policy accept).
func (d *Derived) hooks() []string {
	if len(d.Spec.Output) > 0 {
		return []string{firewall.HookInput, firewall.HookForward, firewall.HookOutput}
	}
	return []string{firewall.HookInput, firewall.HookForward}
}

// ownerOf reads the owner from a comment "adoption:<node>:<owner>:...".
func ownerOf(comment string) string {
	rest, ok := strings.CutPrefix(comment, firewall.MarkPrefix)
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[1]
}

// dhcpExprs is "meta nfproto F [ip6 saddr fe80::/10] udp sport S udp dport
// D accept": the DHCP client's replies.
func dhcpExprs(nfproto byte, sport, dport uint16) []expr.Any {
	ex := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}},
	}
	if nfproto == unix.NFPROTO_IPV4 {
		// Unicast only: a reply broadcast is a region of its own, carried
		// with the found firewall's restriction (carryClasses).
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyPKTTYPE, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.PACKET_HOST}})
	}
	if nfproto == unix.NFPROTO_IPV6 {
		ex = append(ex,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 2},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0xc0}, Xor: []byte{0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0xfe, 0x80}},
			// A reply goes to the client's link-local address, as ufw6's
			// rule requires: to a global one it would be a widening.
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 2},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0xc0}, Xor: []byte{0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0xfe, 0x80}})
	}
	return append(ex,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(sport)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(dport)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
}

// DeriveFor is Derive with the essentials that depend on the found
// firewall: DHCPv4 and DHCPv6 client replies are kept where the found
// firewall accepts them now (a reply from a server's port to the client's,
// at the input hook), never because a request asked.
func DeriveFor(found *firewall.Ruleset, spec MeshSpec) (*Derived, error) {
	return Derive(EffectiveSpec(found, spec))
}

// EffectiveSpec is spec with the essentials that depend on the found
// firewall decided from it: what Flip applies for spec on found. The flip
// record keeps it, so the boot file and the guard's Reassert, which have no
// found firewall to look at, write the very table the flip wrote.
//
// Each kept port carries the found firewall's restriction (Allow.Carried):
// the sources from which a new connection reaches it now, per family,
// unless it is in spec.Widen. The restriction is read with nothing known
// of the node (its interfaces), so the preview and the flip derive the
// same table.
func EffectiveSpec(found *firewall.Ruleset, spec MeshSpec) MeshSpec {
	if found == nil {
		spec.DHCP4, spec.DHCP6 = false, false
		return spec
	}
	return effectiveSpec(eval.Compile(found), spec)
}

// effectiveSpec is EffectiveSpec of the compiled found ruleset cf.
func effectiveSpec(cf *eval.Compiled, spec MeshSpec) MeshSpec {
	found := cf.Ruleset()
	e := cf.Evaluator()
	spec.DHCP4 = acceptsReply(e, found, firewall.FamilyIP, eval.Atom{Other: true}, netip.Addr{}, 67, 68)
	spec.DHCP6 = acceptsReply(e, found, firewall.FamilyIP6, eval.Atom{Prefix: netip.MustParsePrefix("fe80::/64")}, netip.MustParseAddr("fe80::1"), 547, 546)
	widen := map[vocab.Port]bool{}
	for _, p := range spec.Widen {
		widen[p] = true
	}
	r := newCarrier(cf)
	if spec.DHCP4 {
		spec.DHCP4From = dhcp4From(r)
	}
	// What the bridges reach, and the regions beyond the ports, are read
	// beside the rest, each by Reachers of its own (a Reacher is one
	// evaluation at a time).
	bridgeIn := make(chan []BridgeIn, 1)
	go func() { bridgeIn <- foundBridgeIn(found, cf.Reacher(firewall.Node{}), r.bridges) }()
	classes := make(chan []ClassAllow, 1)
	go func() { classes <- carryClasses(cf, spec.DropClasses, spec.WidenClasses) }()
	spec.Egress, spec.Routed = foundForward(cf, r)
	spec.ForwardICMP = foundForwardICMP(cf, spec.DropClasses)
	spec.Output = foundOutput(found)
	for _, l := range []struct {
		hook string
		as   *[]Allow
	}{{firewall.HookInput, &spec.Input}, {firewall.HookForward, &spec.Forward}} {
		as := make([]Allow, len(*l.as))
		for i, a := range *l.as {
			as[i] = carry(r, l.hook, a, widen)
		}
		if *l.as != nil {
			*l.as = as
		}
	}
	spec.FromBridges = <-bridgeIn
	spec.Classes, spec.ClassesFound = <-classes, true
	return spec
}

// dhcp4From are the sources and interfaces from which found (r's) takes a
// unicast DHCPv4 reply to the node (udp 67 -> 68), where not from every
// source surely; nil where from every one, or where the evaluator cannot
// decide which (the reply kept from any, as before).
func dhcp4From(r *carrier) []Reach {
	c := firewall.Class{Family: firewall.FamilyIP, Proto: "udp", Num: unix.IPPROTO_UDP, Own: true, Port: 68, PortEnd: 68, Sport: 67, SportEnd: 67}
	classes := r.classes
	if len(classes) == 0 {
		classes = []ifaceClass{{"", r.zero}}
	}
	unsure := false
	reach, plain, open := byIface(classes, []string{firewall.FamilyIP}, func(x *eval.Reacher, _ string) eval.SourceReach {
		s := x.Class(c)
		unsure = unsure || s.Unsure
		return s
	})
	if plain || !open || unsure {
		return nil
	}
	return reach
}

// acceptsReply reports whether found (e its evaluator) accepts, at the
// input hook, a new UDP datagram from sport to dport (from src, to dst when
// valid).
func acceptsReply(e *eval.Evaluator, found *firewall.Ruleset, fam string, src eval.Atom, dst netip.Addr, sport, dport uint16) bool {
	r := e.Hook(eval.BaseChains(found, firewall.HookInput, fam, nil), eval.Packet{Hook: firewall.HookInput, Family: fam, Proto: unix.IPPROTO_UDP,
		Port: dport, OrigPort: dport, Sport: sport, Src: src, Dst: dst})
	return r.Accept
}
