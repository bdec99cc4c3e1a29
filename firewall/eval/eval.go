// This file holds the evaluator: which (port, proto) a new connection from
// outside reaches, through the nat table's DNAT into the input or forward
// hook, per port interval and per source region.

package eval

import (
	"adoption/firewall"
	"adoption/firewall/nft"
	"fmt"
	"math/big"
	"net/netip"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenPorts is OpenPortsOn for a node the evaluator knows nothing about
// besides its ruleset (the zero Node).
func OpenPorts(rs *firewall.Ruleset) []firewall.Opening { return OpenPortsOn(rs, firewall.Node{}) }

// OpenPortsOn evaluates which (port, proto) a new connection from an
// arbitrary outside address can reach on node, for TCP and UDP, over IPv4
// and IPv6, by the port the client uses.
//
// The synthetic packet: conntrack state NEW, a TCP SYN or a UDP datagram,
// source a unicast address that is not loopback and not the node's own,
// arriving on one of the node's uplinks (any interface that is not lo, not
// enslaved and not a container bridge; with the zero Node, any interface
// but lo), unicast to the node's own address, without IPv6 extension
// headers. It goes the way the kernel sends it:
//
//   - prerouting: base chains of type filter (raw, mangle) may drop it; then
//     the nat chains (type nat, in priority order, the first NAT statement
//     wins): a DNAT (Docker's DOCKER chain reached through "addrtype
//     --dst-type LOCAL", or a native "dnat to") rewrites the destination;
//   - no DNAT, or a DNAT to the node itself (REDIRECT): the input hook, to
//     the (new) port. Direction "input";
//   - a DNAT elsewhere: the forward hook, with the container's address and
//     port as destination, the bridge that holds that address as output
//     interface, ct status dnat set and the original port in conntrack's
//     original tuple. Direction "forward", Via the container's address and
//     port. A node that does not forward (ip_forward 0) drops it. A target
//     on none of the node's networks, an address the evaluator cannot read,
//     or a port range is reported uncertain with the Reason.
//
// At each hook every base chain of a table of a matching family runs, in
// priority order: accept ends that base chain only, drop and reject are
// final, jump/goto/return and policies are followed. A condition that
// cannot be decided splits the evaluation; if the branches end differently
// the opening is Uncertain. A nat decision that depends on such a condition
// makes every path it may take uncertain.
//
// With the zero Node, forwarded traffic is also evaluated as routed traffic
// to an unknown non-local destination (direction "forward", no Via), as it
// was before DNAT was modelled. With a known Node it is not: clients reach
// services through published ports, not by routing to container addresses.
//
// Ports are evaluated per interval whose bounds come from every port
// condition of the rules a packet of the family and protocol may match
// (portBounds), and sources per "atom": the region of each
// source prefix the ruleset names, minus the more specific prefixes it also
// names, plus "any other source". When any other source reaches a port, one
// opening with an empty From is reported (sources the ruleset singles out
// for a drop are then not listed). Otherwise each reaching source region is
// reported exactly, as the fewest CIDRs that cover it (10.0.0.0/8 minus
// 10.1.0.0/16 gives seven prefixes).
//
// Results are reported per family ("ip", "ip6"), never merged: a source
// prefix belongs to one family, and per-family results read plainly.
// Sorted by direction (input, forward), family, proto, port, from.
//
// Ingress (netdev) chains are not evaluated, nor filter chains at
// prerouting with a priority after the nat chains (they are run with the
// packet as the client sent it).
func OpenPortsOn(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	var out []firewall.Opening
	prog := compile(rs)
	keep := keepsPort(rs)
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		st := stages{
			pre:     BaseChains(rs, firewall.HookPrerouting, fam, func(ch *firewall.Chain) bool { return ch.Type != "nat" }),
			nat:     BaseChains(rs, firewall.HookPrerouting, fam, func(ch *firewall.Chain) bool { return ch.Type == "nat" }),
			input:   BaseChains(rs, firewall.HookInput, fam, nil),
			forward: BaseChains(rs, firewall.HookForward, fam, nil),
		}
		atoms := sourceAtoms(rs, fam)
		groups, index := groupAtoms(rs, atoms), atomIndex(atoms)
		for _, proto := range []string{"tcp", "udp"} {
			out = append(out, evalPorts(prog, &node, st, atoms, groups, index, portBounds(rs, fam, protoNum(proto), !keep), fam, proto)...)
		}
	}
	dir := func(d string) int {
		if d == firewall.HookInput {
			return 0
		}
		return 1
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if dir(a.Direction) != dir(b.Direction) {
			return dir(a.Direction) < dir(b.Direction)
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Proto < b.Proto
	})
	return out
}

// stages are one family's base chains, by where the packet meets them.
type stages struct {
	pre, nat, input, forward []chainRef
}

type chainRef struct {
	table *firewall.Table
	chain *firewall.Chain
}

func BaseChains(rs *firewall.Ruleset, hook, fam string, keep func(*firewall.Chain) bool) []chainRef {
	var out []chainRef
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != fam && t.Family != firewall.FamilyInet {
			continue
		}
		for ci := range t.Chains {
			if t.Chains[ci].Hook == hook && (keep == nil || keep(&t.Chains[ci])) {
				out = append(out, chainRef{t, &t.Chains[ci]})
			}
		}
	}
	// Order does not change a filter outcome (accept only ends one base
	// chain, drop anywhere is final) but it does the nat outcome (the first
	// NAT statement wins); kept as the kernel runs them.
	sort.SliceStable(out, func(i, j int) bool { return out[i].chain.Priority < out[j].chain.Priority })
	return out
}

// eachCond calls f for every condition in the ruleset, vmap keys included.
func eachCond(rs *firewall.Ruleset, f func(c *firewall.Cond)) {
	for ti := range rs.Tables {
		for ci := range rs.Tables[ti].Chains {
			for ri := range rs.Tables[ti].Chains[ci].Rules {
				r := &rs.Tables[ti].Chains[ci].Rules[ri]
				for k := range r.Conds {
					f(&r.Conds[k])
				}
				for k := range r.VMap {
					f(&r.VMap[k].Cond)
				}
			}
		}
	}
}

// portBounds returns the sorted starts of the port intervals on which every
// dport condition is constant; the last interval ends at 65535. With prune,
// only the conditions a packet of family fam and protocol proto may meet:
// those of tables of another family, and of rules that never match such a
// packet (another protocol), cannot tell its ports apart, and splitting
// there would only evaluate more intervals to the same end.
//
// Without prune (keepsPort), every condition of the ruleset, as the
// evaluator always split: a DNAT that keeps the port is reported with the
// interval's first port in Via, so where intervals start shows.
func portBounds(rs *firewall.Ruleset, fam string, proto uint8, prune bool) []int {
	set := map[int]bool{0: true}
	add := func(c *firewall.Cond) {
		if c.Kind != firewall.CondDport && c.Kind != firewall.CondOrigDport {
			return
		}
		for _, p := range c.Ports {
			set[int(p.From)] = true
			if p.To < 65535 {
				set[int(p.To)+1] = true
			}
		}
	}
	kind := Packet{Family: fam, Proto: proto}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if prune && t.Family != fam && t.Family != firewall.FamilyInet {
			continue
		}
		for ci := range t.Chains {
		rules:
			for ri := range t.Chains[ci].Rules {
				r := &t.Chains[ci].Rules[ri]
				for k := range r.Conds {
					if c := &r.Conds[k]; prune && condRank(c.Kind) == 0 && kind.Cond(c) == TriFalse {
						continue rules
					}
				}
				for k := range r.Conds {
					add(&r.Conds[k])
				}
				for k := range r.VMap {
					add(&r.VMap[k].Cond)
				}
			}
		}
	}
	out := make([]int, 0, len(set))
	for b := range set {
		out = append(out, b)
	}
	sort.Ints(out)
	return out
}

// keepsPort reports whether a DNAT of rs keeps the client's port (no port
// given): its openings name the port in Via.
func keepsPort(rs *firewall.Ruleset) bool {
	keeps := func(v *firewall.Verdict) bool {
		t := v.NAT
		return v.Kind == firewall.VerdictDNAT && t != nil && t.Unknown == "" && t.PortMin == 0 && t.PortMax == 0
	}
	for ti := range rs.Tables {
		for ci := range rs.Tables[ti].Chains {
			for ri := range rs.Tables[ti].Chains[ci].Rules {
				r := &rs.Tables[ti].Chains[ci].Rules[ri]
				if keeps(&r.Verdict) {
					return true
				}
				for k := range r.VMap {
					if keeps(&r.VMap[k].Verdict) {
						return true
					}
				}
			}
		}
	}
	return false
}

func protoNum(proto string) uint8 {
	if proto == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// atom is a region of source addresses on which every saddr condition is
// constant: prefix minus the more specific named prefixes; other is the rest.
type Atom struct {
	Prefix netip.Prefix
	Other  bool
}

func (a Atom) in(q netip.Prefix) bool {
	if a.Other || a.Prefix.Addr().Is4() != q.Addr().Is4() {
		return false
	}
	return q.Bits() <= a.Prefix.Bits() && q.Contains(a.Prefix.Addr())
}

var notOutside = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("ff00::/8"),
}

func sourceAtoms(rs *firewall.Ruleset, fam string) []Atom {
	seen := map[netip.Prefix]bool{}
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind != firewall.CondSaddr {
			return
		}
		for _, p := range c.Prefixes {
			if p.Addr().Is4() == (fam == firewall.FamilyIP) {
				seen[p.Masked()] = true
			}
		}
	})
	var ps []netip.Prefix
	for p := range seen {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	atoms := []Atom{{Other: true}}
outer:
	for i, p := range ps {
		for _, x := range notOutside {
			if x.Bits() <= p.Bits() && x.Contains(p.Addr()) {
				continue outer
			}
		}
		if nonEmptyAtom(ps, i) {
			atoms = append(atoms, Atom{Prefix: p})
		}
	}
	return atoms
}

// nonEmptyAtom reports whether ps[i] is not entirely covered by the more
// specific prefixes in ps, which are sorted by address, then length, and
// masked. The more specific prefixes inside ps[i] are the ones right after
// it that start within it (prefixes are nested or disjoint); of those, the
// maximal ones are those that do not start within the last maximal one.
func nonEmptyAtom(ps []netip.Prefix, i int) bool {
	p := ps[i]
	if !p.IsValid() {
		return true // contains nothing, so nothing covers it
	}
	end := nft.LastAddr(p)
	var total *big.Int
	var cover netip.Addr // last address of the last maximal one
	for _, q := range ps[i+1:] {
		if end.Less(q.Addr()) {
			break
		}
		if cover.IsValid() && !cover.Less(q.Addr()) {
			continue
		}
		if total == nil {
			total = new(big.Int)
		}
		total.Add(total, new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-q.Bits())))
		cover = nft.LastAddr(q)
	}
	if total == nil {
		return true
	}
	size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	return total.Cmp(size) < 0
}

// packet is the synthetic packet of one evaluation.

// packet is the synthetic packet of one evaluation.
type Packet struct {
	Hook   string
	Family string
	Proto  uint8
	Port   uint16 // destination port now (after a DNAT)
	// origPort is the port the client used (conntrack's original tuple).
	OrigPort uint16
	// sport is the client's source port; 0: any (the usual case).
	Sport uint16
	Src   Atom
	// dst is the destination after a DNAT; invalid: the node's own address
	// (prerouting, input) or an unknown routed destination (forward).
	Dst  netip.Addr
	Dnat bool
	// oif is the output interface of a forwarded packet; "" unknown.
	oif  string
	node *firewall.Node
}

type tri int

const (
	TriFalse tri = iota
	TriTrue
	TriUnknown
)

func (p *Packet) Cond(c *firewall.Cond) tri {
	var t tri
	switch c.Kind {
	case firewall.CondNever:
		return TriFalse
	case firewall.CondUndecidable:
		return TriUnknown
	case firewall.CondNFProto:
		t = boolTri(c.Family == p.Family || c.Family == firewall.FamilyInet)
	case firewall.CondL4Proto:
		t = TriFalse
		for _, x := range c.Protos {
			if x == int(p.Proto) {
				t = TriTrue
			}
		}
	case firewall.CondDport:
		t = boolTri(inPorts(c.Ports, p.Port))
	case firewall.CondOrigDport:
		t = boolTri(inPorts(c.Ports, p.OrigPort))
	case firewall.CondSport:
		if p.Sport != 0 {
			t = boolTri(inPorts(c.Ports, p.Sport))
			break
		}
		// The client's source port is arbitrary.
		t = TriUnknown
		if len(c.Ports) == 0 {
			t = TriFalse
		}
		for _, r := range c.Ports {
			if r.From == 0 && r.To == 65535 {
				t = TriTrue
			}
		}
	case firewall.CondSaddr:
		t = TriFalse
		for _, q := range c.Prefixes {
			if p.Src.in(q) {
				t = TriTrue
			}
		}
	case firewall.CondDaddr:
		if p.Dst.IsValid() {
			t = TriFalse
			for _, q := range c.Prefixes {
				if q.Contains(p.Dst) {
					t = TriTrue
				}
			}
		} else {
			t = daddrTri(c.Prefixes, p.Family)
		}
	case firewall.CondOrigDaddr:
		t = daddrTri(c.Prefixes, p.Family)
	case firewall.CondIifname:
		if p.node.HasInterfaces() {
			t = namesTri(c.Names, p.node.Uplinks())
		} else {
			t = ifnameTri(c.Names)
		}
	case firewall.CondOifname:
		if p.Hook != firewall.HookForward {
			// No output device yet: meta oifname breaks the rule whatever
			// the comparison.
			return TriFalse
		}
		if p.oif != "" {
			t = namesTri(c.Names, []string{p.oif})
		} else {
			t = ifnameTri(c.Names)
		}
	case firewall.CondCtState:
		bits := uint32(firewall.CtStateNew)
		if p.Dnat {
			bits |= firewall.CtStateDNAT
		}
		t = boolTri(c.Bits&bits != 0)
	case firewall.CondCtStatus:
		// A new connection has no reply, is not confirmed, assured or
		// expected, and is not source-NATed before postrouting.
		const known = firewall.IpsExpected | firewall.IpsSeenReply | firewall.IpsAssured | firewall.IpsConfirmed | firewall.IpsSrcNAT | firewall.IpsDstNAT
		status := uint32(0)
		if p.Dnat {
			status |= firewall.IpsDstNAT
		}
		switch {
		case c.Bits&status != 0:
			t = TriTrue
		case c.Bits&^known != 0:
			return TriUnknown
		default:
			t = TriFalse
		}
	case firewall.CondAddrType:
		typ := uint32(firewall.RtnUnicast)
		if c.Addr == "daddr" && (p.Hook == firewall.HookInput || p.Hook == firewall.HookPrerouting) {
			typ = firewall.RtnLocal
		}
		t = boolTri(c.Bits&(1<<typ) != 0)
	case firewall.CondPktType:
		t = boolTri(c.Bits&(1<<firewall.PacketHost) != 0)
	case firewall.CondTCPFlags:
		if p.Proto != unix.IPPROTO_TCP {
			return TriUnknown
		}
		const syn = 0x02
		t = boolTri(syn&c.Mask == c.Value)
	default:
		return TriUnknown
	}
	if c.Negate && t != TriUnknown {
		t = 1 - t
	}
	return t
}

func boolTri(b bool) tri {
	if b {
		return TriTrue
	}
	return TriFalse
}

func inPorts(rs []firewall.PortRange, p uint16) bool {
	for _, r := range rs {
		if r.From <= p && p <= r.To {
			return true
		}
	}
	return false
}

var notOwnUnicast = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// daddrTri decides a destination prefix for a packet to a routable unicast
// address: special-purpose prefixes never hold it, a default prefix always
// does, any other one depends on which address the client picked.
func daddrTri(ps []netip.Prefix, fam string) tri {
	t := TriFalse
	for _, q := range ps {
		if q.Addr().Is4() != (fam == firewall.FamilyIP) {
			continue
		}
		if q.Bits() == 0 {
			return TriTrue
		}
		special := false
		for _, x := range notOwnUnicast {
			if x.Bits() <= q.Bits() && x.Contains(q.Addr()) {
				special = true
				break
			}
		}
		if !special {
			t = TriUnknown
		}
	}
	return t
}

// ifnameTri decides an interface name match for a packet that arrived on some
// interface other than lo.
func ifnameTri(names []string) tri {
	t := TriFalse
	for _, n := range names {
		switch {
		case n == "*":
			return TriTrue
		case n == "lo":
		case strings.HasSuffix(n, "*") && strings.HasPrefix("lo", strings.TrimSuffix(n, "*")):
			t = TriUnknown // "l*" matches lo and others
		default:
			t = TriUnknown
		}
	}
	return t
}

// nameMatch reports whether interface name n matches pattern pat (a
// trailing '*' is a prefix match, as nft's "eth*" and iptables' "eth+").
func nameMatch(pat, n string) bool {
	if p, ok := strings.CutSuffix(pat, "*"); ok {
		return strings.HasPrefix(n, p)
	}
	return pat == n
}

// namesTri decides an interface name condition for a packet on one of the
// interfaces in on (which one is not known): true if every one matches,
// false if none does.
func namesTri(pats, on []string) tri {
	if len(on) == 0 {
		return TriUnknown
	}
	hits := 0
	for _, n := range on {
		for _, pat := range pats {
			if nameMatch(pat, n) {
				hits++
				break
			}
		}
	}
	switch hits {
	case 0:
		return TriFalse
	case len(on):
		return TriTrue
	}
	return TriUnknown
}

// outcome is a set of possible ends of a chain evaluation: accept, drop,
// return, and (in nat chains) one bit per DNAT target the evaluator met, from
// outDNAT on.
type outcome uint64

const (
	outAccept outcome = 1 << iota
	outDrop
	outReturn
	outDNAT // first target bit; target i is outDNAT << i
)

// maxTargets is how many distinct DNAT targets one packet's nat evaluation
// keeps apart; more make the outcome unknown.
const maxTargets = 60

// evaluator follows one packet at a time through the compiled ruleset
// (program.go). Its memo of chain outcomes is a slot per rule, valid for the
// current generation: one hook of one packet.
type evaluator struct {
	prog *program
	pkt  Packet
	memo []memoSlot
	gen  uint32
	// nat is set while nat chains run: a DNAT verdict then yields its
	// target's bit instead of accept.
	nat     bool
	targets []firewall.NATTarget
	// sawSource is set when a source address condition was looked at since
	// it was last cleared: until then the packet's source made no
	// difference to anything.
	sawSource bool
}

type memoSlot struct {
	gen uint32
	o   outcome
}

func NewEvaluator(rs *firewall.Ruleset) *evaluator { return compile(rs).evaluator() }

func (p *program) evaluator() *evaluator {
	return &evaluator{prog: p, memo: make([]memoSlot, p.slots)}
}

// reset starts a new memo generation for a new packet or hook.
func (e *evaluator) reset() {
	e.gen++
	if e.gen == 0 { // wrapped: old stamps could look current
		clear(e.memo)
		e.gen = 1
	}
}

// cond decides c for the current packet.
func (e *evaluator) cond(c *firewall.Cond) tri {
	if c.Kind == firewall.CondSaddr {
		e.sawSource = true
		if set := e.prog.sources[c]; set != nil {
			t := boolTri(set.holds(e.pkt.Src))
			if c.Negate {
				t = 1 - t
			}
			return t
		}
	}
	return e.pkt.Cond(c)
}

// run returns the possible outcomes of chain c from rule i on. outReturn
// means the chain returned (or fell off its end) to its caller. The memo is
// by (chain, rule) only, whatever the depth.
func (e *evaluator) run(c *cchain, i, depth int) outcome {
	if c == nil || depth > 64 {
		return outAccept | outDrop | outReturn
	}
	if c.ch.Unknown != "" {
		return outAccept | outDrop | outReturn
	}
	if i >= len(c.rules) {
		return outReturn
	}
	if s := e.memo[c.base+i]; s.gen == e.gen {
		return s.o
	}
	r := &c.rules[i]
	m := TriTrue
	for _, cd := range r.conds {
		switch e.cond(cd) {
		case TriFalse:
			m = TriFalse
		case TriUnknown:
			m = TriUnknown
		}
		if m == TriFalse {
			break
		}
	}
	var o outcome
	switch m {
	case TriFalse:
		o = e.run(c, i+1, depth)
	default:
		if r.rule.VMap != nil {
			o = e.vmap(c, i, depth)
		} else {
			o = e.verdict(c, i, r.rule.Verdict, r.target, depth)
		}
		if m == TriUnknown {
			o |= e.run(c, i+1, depth)
		}
	}
	e.memo[c.base+i] = memoSlot{e.gen, o}
	return o
}

func (e *evaluator) vmap(c *cchain, i, depth int) outcome {
	r := &c.rules[i]
	var o outcome
	definite := false
	for k := range r.rule.VMap {
		en := &r.rule.VMap[k]
		switch e.cond(&en.Cond) {
		case TriTrue:
			o |= e.verdict(c, i, en.Verdict, r.vtargets[k], depth)
			definite = true
		case TriUnknown:
			o |= e.verdict(c, i, en.Verdict, r.vtargets[k], depth)
		}
	}
	if !definite {
		o |= e.run(c, i+1, depth) // no key matched: the rule does nothing
	}
	return o
}

// verdict is what verdict v of rule i of c does; target is the chain a jump
// or goto names (nil: none by that name). The rest of the chain is rule i+1
// on.
func (e *evaluator) verdict(c *cchain, i int, v firewall.Verdict, target *cchain, depth int) outcome {
	switch v.Kind {
	case firewall.VerdictAccept:
		return outAccept
	case firewall.VerdictDNAT:
		if a := v.NAT; a != nil && a.Addr.IsValid() && a.Addr.Is4() != (e.pkt.Family == firewall.FamilyIP) {
			// "dnat ip to" in an inet table does nothing to an IPv6
			// packet (and the other way round): the rule goes on.
			return e.run(c, i+1, depth)
		}
		if !e.nat {
			return outAccept // a NAT statement ends the base chain like accept
		}
		return e.targetBit(v.NAT)
	case firewall.VerdictDrop, firewall.VerdictReject:
		return outDrop
	case firewall.VerdictReturn:
		return outReturn
	case firewall.VerdictContinue:
		return e.run(c, i+1, depth)
	case firewall.VerdictJump:
		o := e.run(target, 0, depth+1)
		if o&outReturn != 0 {
			o = o&^outReturn | e.run(c, i+1, depth)
		}
		return o
	case firewall.VerdictGoto:
		// The target's return goes to our caller: it is our return.
		return e.run(target, 0, depth+1)
	}
	return outAccept | outDrop | e.run(c, i+1, depth)
}

func (e *evaluator) targetBit(t *firewall.NATTarget) outcome {
	if t == nil {
		t = &firewall.NATTarget{Unknown: "no target decoded"}
	}
	for i := range e.targets {
		if e.targets[i] == *t {
			return outDNAT << i
		}
	}
	if len(e.targets) >= maxTargets {
		return outAccept | outDrop
	}
	e.targets = append(e.targets, *t)
	return outDNAT << (len(e.targets) - 1)
}

// result of the whole hook for one packet.
type result struct {
	Accept, drop bool
}

// runBase runs one base chain; falling off its end (or returning from it)
// is its policy's verdict.
func (e *evaluator) runBase(b chainRef) outcome {
	o := e.run(e.prog.chain(b.chain), 0, 0)
	if o&outReturn != 0 {
		o &^= outReturn
		if b.chain.Policy == "drop" {
			o |= outDrop
		} else {
			o |= outAccept
		}
	}
	return o
}

func (e *evaluator) Hook(bases []chainRef, pkt Packet) result {
	e.pkt = pkt
	e.reset()
	cont, drop := true, false
	for _, b := range bases {
		if !cont {
			break
		}
		o := e.runBase(b)
		if o&outDrop != 0 {
			drop = true
		}
		cont = o&outAccept != 0
	}
	return result{Accept: cont, drop: drop}
}

// natEnd is one way the nat chains at prerouting may end for a packet:
// dropped, not translated (target nil), or DNATed to target.
type natEnd struct {
	drop   bool
	target *firewall.NATTarget
}

// natHook runs the nat base chains in priority order: a chain that
// accepts (or returns) hands the packet to the next, a NAT statement ends
// them all (nf_nat_inet_fn stops once the binding is set up), a drop is
// final.
func (e *evaluator) natHook(bases []chainRef, pkt Packet) []natEnd {
	e.pkt = pkt
	e.reset()
	e.nat, e.targets = true, e.targets[:0]
	defer func() { e.nat = false }()
	cont := true
	var ends outcome
	for _, b := range bases {
		if !cont {
			break
		}
		o := e.runBase(b)
		ends |= o &^ outAccept
		cont = o&outAccept != 0
	}
	var out []natEnd
	if cont {
		out = append(out, natEnd{})
	}
	if ends&outDrop != 0 {
		out = append(out, natEnd{drop: true})
	}
	for i := range e.targets {
		if ends&(outDNAT<<i) != 0 {
			t := e.targets[i]
			out = append(out, natEnd{target: &t})
		}
	}
	return out
}

// path is where a client's connection ends up: the hook that decides it,
// the DNAT target it was sent to, and why it cannot be decided, if so.
type path struct {
	dir, via, reason string
}

// client evaluates one client packet the whole way: prerouting, nat, then
// the input or forward hook of each way the nat chains may send it. A path
// is in the result when the packet may take it.
func (e *evaluator) client(st *stages, pkt Packet) map[path]result {
	out := map[path]result{}
	add := func(p path, r result) {
		o := out[p]
		out[p] = result{Accept: o.Accept || r.Accept, drop: o.drop || r.drop}
	}
	pkt.Hook = firewall.HookPrerouting
	pre := e.Hook(st.pre, pkt)
	if pre.Accept {
		ends := e.natHook(st.nat, pkt)
		unsure := pre.drop || len(ends) > 1
		for _, end := range ends {
			if end.drop {
				continue
			}
			var p path
			var r result
			if end.target == nil {
				q := pkt
				q.Hook = firewall.HookInput
				p, r = path{dir: firewall.HookInput}, e.Hook(st.input, q)
			} else {
				p, r = e.dnat(st, pkt, end.target)
			}
			if unsure {
				r.drop = true // the packet may not take this path at all
			}
			add(p, r)
		}
	}
	if !pkt.node.HasInterfaces() && pkt.node.Forwards(pkt.Family) {
		// Routed to an address beyond the node, as evaluated before DNAT
		// was modelled: kept for a node known only by its ruleset.
		q := pkt
		q.Hook = firewall.HookForward
		add(path{dir: firewall.HookForward}, e.Hook(st.forward, q))
	}
	return out
}

// dnat follows a DNATed packet to the hook that decides it.
func (e *evaluator) dnat(st *stages, pkt Packet, t *firewall.NATTarget) (path, result) {
	unsure := result{Accept: true, drop: true}
	port := pkt.Port
	switch {
	case t.PortMin == 0 && t.PortMax == 0:
	case t.PortMin == t.PortMax:
		port = t.PortMin
	default:
		return path{dir: firewall.HookForward, via: firewall.ViaOf(t.Addr, 0), reason: fmt.Sprintf("DNAT to a port range %d-%d", t.PortMin, t.PortMax)}, unsure
	}
	if t.Unknown != "" {
		return path{dir: firewall.HookForward, reason: "DNAT to a destination the evaluator cannot read: " + t.Unknown}, unsure
	}
	via := firewall.ViaOf(t.Addr, port)
	if t.Local || pkt.node.Local(t.Addr) && !t.Addr.IsLoopback() {
		q := pkt
		q.Hook, q.Port, q.Dnat = firewall.HookInput, port, true
		return path{dir: firewall.HookInput, via: via}, e.Hook(st.input, q)
	}
	if t.Addr.IsLoopback() {
		return path{dir: firewall.HookInput, via: via, reason: "DNAT to a loopback address, which the kernel routes only with route_localnet"}, unsure
	}
	if (t.Addr.Is4() && pkt.Family != firewall.FamilyIP) || (t.Addr.Is6() && pkt.Family != firewall.FamilyIP6) {
		return path{dir: firewall.HookForward, via: via, reason: "DNAT to an address of the other family"}, unsure
	}
	if !pkt.node.Forwards(pkt.Family) {
		return path{dir: firewall.HookForward, via: via}, result{drop: true} // the node routes nothing on
	}
	oif := ""
	if pkt.node.HasInterfaces() {
		name, ok := pkt.node.OifFor(t.Addr)
		if !ok {
			return e.unmapped(st, pkt, t.Addr, port, via)
		}
		oif = name
	}
	q := pkt
	q.Hook, q.Port, q.Dst, q.Dnat, q.oif = firewall.HookForward, port, t.Addr, true, oif
	return path{dir: firewall.HookForward, via: via}, e.Hook(st.forward, q)
}

// unmapped follows a packet DNATed to an address on none of the node's
// networks: where the kernel routes it is not known, so the forward hook
// runs with the output interface undecided. A drop there whatever the
// route closes the port (a flip's mesh drops undeclared ports so, and
// flip.drop can then be kept); anything else stays uncertain, named.
func (e *evaluator) unmapped(st *stages, pkt Packet, addr netip.Addr, port uint16, via string) (path, result) {
	q := pkt
	q.Hook, q.Port, q.Dst, q.Dnat, q.oif = firewall.HookForward, port, addr, true, ""
	if r := e.Hook(st.forward, q); !r.Accept {
		return path{dir: firewall.HookForward, via: via}, r
	}
	return path{dir: firewall.HookForward, via: via, reason: fmt.Sprintf("DNAT target %s is on none of the node's networks: where it is routed is not known", addr)},
		result{Accept: true, drop: true}
}

type openKey struct {
	from      string
	uncertain bool
	path      path
}

// groupAtoms groups source atoms that every saddr condition treats alike, so
// each group is evaluated once (a blocklist of thousands of prefixes in one
// set is one group). The first group is the "any other source" atom alone;
// prefix atoms that behave like it are left out: they are never worth naming.
func groupAtoms(rs *firewall.Ruleset, atoms []Atom) [][]Atom {
	var conds []*firewall.Cond
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind == firewall.CondSaddr {
			conds = append(conds, c)
		}
	})
	sets := make([]*prefixSet, len(conds))
	for i, c := range conds {
		sets[i] = newPrefixSet(c.Prefixes)
	}
	sig := func(a Atom) string {
		b := make([]byte, len(conds))
		for i := range conds {
			b[i] = '0'
			if sets[i].holds(a) {
				b[i] = '1'
			}
		}
		return string(b)
	}
	otherSig := sig(atoms[0])
	groups := [][]Atom{{atoms[0]}}
	index := map[string]int{}
	for _, a := range atoms[1:] {
		s := sig(a)
		if s == otherSig {
			continue
		}
		i, ok := index[s]
		if !ok {
			i = len(groups)
			index[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], a)
	}
	return groups
}

func evalPorts(prog *program, node *firewall.Node, st stages, atoms []Atom, groups [][]Atom, index map[netip.Prefix]int, bounds []int, fam, proto string) []firewall.Opening {
	pnum := protoNum(proto)
	e := prog.evaluator()
	type span struct{ start, end int }
	open := map[openKey]*span{}
	var out []firewall.Opening
	flush := func(k openKey, s *span) {
		o := firewall.Opening{Port: uint16(s.start), Proto: proto, Direction: k.path.dir, From: k.from, Uncertain: k.uncertain,
			Family: fam, Via: k.path.via, Reason: k.path.reason}
		if s.end != s.start {
			o.PortEnd = uint16(s.end)
		}
		out = append(out, o)
	}
	for bi, start := range bounds {
		end := 65535
		if bi+1 < len(bounds) {
			end = bounds[bi+1] - 1
		}
		here := map[openKey]bool{}
		var other map[path]result
		sure, unsure := map[path][]Atom{}, map[path][]Atom{} // open prefix atoms worth naming
		for ai, g := range groups {
			if ai == 1 && !e.sawSource {
				// Any other source went its way without a source
				// condition looked at: every source goes the same way,
				// and a source that goes the way of any other is not
				// worth naming.
				break
			}
			e.sawSource = false
			res := e.client(&st, Packet{Family: fam, Proto: pnum, Port: uint16(start), OrigPort: uint16(start), Src: g[0], node: node})
			if ai == 0 {
				other = res
				for p, r := range res {
					if r.Accept {
						here[openKey{"", r.drop || p.reason != "", p}] = true
					}
				}
				continue
			}
			for p, r := range res {
				if !r.Accept {
					continue
				}
				o := other[p]
				// A prefix is worth naming when the rest of the world does
				// not reach the port, or reaches it only uncertainly while
				// this prefix surely does.
				switch {
				case !o.Accept && r.drop:
					unsure[p] = append(unsure[p], g...)
				case !o.Accept || (o.drop && !r.drop):
					sure[p] = append(sure[p], g...)
				}
			}
		}
		for _, group := range []struct {
			atoms     map[path][]Atom
			uncertain bool
		}{{sure, false}, {unsure, true}} {
			for p, as := range group.atoms {
				for _, pfx := range atomPrefixes(as, atoms, index) {
					here[openKey{pfx.String(), group.uncertain || p.reason != "", p}] = true
				}
			}
		}
		for k, s := range open {
			if !here[k] {
				flush(k, s)
				delete(open, k)
			}
		}
		for k := range here {
			if s, ok := open[k]; ok {
				s.end = end
			} else {
				open[k] = &span{start, end}
			}
		}
	}
	for k, s := range open {
		flush(k, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.From != b.From {
			return fromLess(a.From, b.From)
		}
		if a.Uncertain != b.Uncertain {
			return !a.Uncertain
		}
		if a.Direction != b.Direction {
			return a.Direction == firewall.HookInput
		}
		return a.Via < b.Via
	})
	return out
}

// atomPrefixes returns the fewest prefixes that cover exactly the union of the
// regions of the atoms open (each atom's prefix minus the more specific
// prefixes of all atoms).
func atomPrefixes(open, all []Atom, index map[netip.Prefix]int) []netip.Prefix {
	var rs []addrRange
	for _, a := range open {
		rs = append(rs, atomRanges(a.Prefix, all, index)...)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo.Less(rs[j].lo) })
	var merged []addrRange
	for _, r := range rs {
		if n := len(merged); n > 0 && (!merged[n-1].hi.IsValid() || !merged[n-1].hi.Next().Less(r.lo)) {
			if merged[n-1].hi.Less(r.hi) {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	var out []netip.Prefix
	for _, r := range merged {
		ps, ok := nft.RangePrefixes(r.lo.AsSlice(), r.hi.AsSlice())
		if ok {
			out = append(out, ps...)
		}
	}
	return out
}

type addrRange struct{ lo, hi netip.Addr }

// atomIndex is where each prefix atom is in atoms.
func atomIndex(atoms []Atom) map[netip.Prefix]int {
	index := make(map[netip.Prefix]int, len(atoms))
	for i, a := range atoms {
		if !a.Other {
			index[a.Prefix] = i
		}
	}
	return index
}

// atomRanges is p minus the maximal more specific prefixes of other atoms.
// all is sourceAtoms' list (the prefix atoms sorted by address, then
// length) and index where p is in it: the atoms inside p are the ones right
// after it that start within it, in the order they are cut out.
func atomRanges(p netip.Prefix, all []Atom, index map[netip.Prefix]int) []addrRange {
	var kids []netip.Prefix
	end := nft.LastAddr(p)
	if i, ok := index[p]; ok && p.IsValid() {
		for _, a := range all[i+1:] {
			if end.Less(a.Prefix.Addr()) {
				break
			}
			kids = append(kids, a.Prefix)
		}
	}
	var out []addrRange
	cur := p.Addr()
	done := false
	for _, k := range kids {
		if done || k.Addr().Less(cur) {
			continue // nested in a kid already cut out
		}
		if cur.Less(k.Addr()) {
			out = append(out, addrRange{cur, k.Addr().Prev()})
		}
		last := nft.LastAddr(k)
		if last == end {
			done = true
			continue
		}
		cur = last.Next()
	}
	if !done {
		out = append(out, addrRange{cur, end})
	}
	return out
}

// fromLess orders "" (any source) first, then prefixes by address.
func fromLess(a, b string) bool {
	pa, errA := netip.ParsePrefix(a)
	pb, errB := netip.ParsePrefix(b)
	if a == "" || b == "" || errA != nil || errB != nil {
		return a < b
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c < 0
	}
	return pa.Bits() < pb.Bits()
}
