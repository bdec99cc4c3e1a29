// This file holds the evaluator: which (port, proto) a new connection from
// outside reaches, through the nat table's DNAT into the input or forward
// hook, per port interval and per source region.

package firewall

import (
	"math/big"
	"net/netip"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenPorts evaluates which (port, proto) a new connection from an arbitrary
// outside address can reach, for the input hook (to the node's own unicast
// address) and the forward hook (to a non-local unicast address), for TCP and
// UDP, over IPv4 and IPv6.
//
// The synthetic packet: conntrack state NEW, a TCP SYN or a UDP datagram,
// source a unicast address that is not loopback and not the node's own,
// arriving on an interface other than lo, unicast to this host's link
// address, without IPv6 extension headers. Every base chain at the hook in a
// table of a matching family runs, in priority order: accept ends that base
// chain only, drop and reject are final, jump/goto/return and policies are
// followed. A condition that cannot be decided splits the evaluation; if the
// branches end differently the opening is Uncertain.
//
// Ports are evaluated per interval whose bounds come from every port
// condition in the ruleset, and sources per "atom": the region of each
// source prefix the ruleset names, minus the more specific prefixes it also
// names, plus "any other source". When any other source reaches a port, one
// opening with an empty From is reported (sources the ruleset singles out
// for a drop are then not listed). Otherwise each reaching source region is
// reported exactly, as the fewest CIDRs that cover it (10.0.0.0/8 minus
// 10.1.0.0/16 gives seven prefixes).
//
// Forward openings assume the node forwards at all (ip_forward): with no base
// chain at the forward hook every port is reported open.
//
// Results are reported per family ("ip", "ip6"), never merged: a source
// prefix belongs to one family, and per-family results read plainly.
// Sorted by direction (input, forward), family, proto, port, from.
//
// Only the input and forward hooks are evaluated: a drop at prerouting or
// ingress is not seen.
func OpenPorts(rs *Ruleset) []Opening {
	var out []Opening
	bounds := portBounds(rs)
	for _, hook := range []string{HookInput, HookForward} {
		for _, fam := range []string{FamilyIP, FamilyIP6} {
			bases := baseChains(rs, hook, fam)
			atoms := sourceAtoms(rs, fam)
			groups := groupAtoms(rs, atoms)
			for _, proto := range []string{"tcp", "udp"} {
				out = append(out, evalPorts(rs, bases, atoms, groups, bounds, hook, fam, proto)...)
			}
		}
	}
	return out
}

type chainRef struct {
	table *Table
	chain *Chain
}

func baseChains(rs *Ruleset, hook, fam string) []chainRef {
	var out []chainRef
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != fam && t.Family != FamilyInet {
			continue
		}
		for ci := range t.Chains {
			if t.Chains[ci].Hook == hook {
				out = append(out, chainRef{t, &t.Chains[ci]})
			}
		}
	}
	// Order does not change the outcome (accept only ends one base chain,
	// drop anywhere is final) but is kept as the kernel runs them.
	sort.SliceStable(out, func(i, j int) bool { return out[i].chain.Priority < out[j].chain.Priority })
	return out
}

// eachCond calls f for every condition in the ruleset, vmap keys included.
func eachCond(rs *Ruleset, f func(c *Cond)) {
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
// dport condition is constant; the last interval ends at 65535.
func portBounds(rs *Ruleset) []int {
	set := map[int]bool{0: true}
	eachCond(rs, func(c *Cond) {
		if c.Kind != CondDport {
			return
		}
		for _, p := range c.Ports {
			set[int(p.From)] = true
			if p.To < 65535 {
				set[int(p.To)+1] = true
			}
		}
	})
	out := make([]int, 0, len(set))
	for b := range set {
		out = append(out, b)
	}
	sort.Ints(out)
	return out
}

// atom is a region of source addresses on which every saddr condition is
// constant: prefix minus the more specific named prefixes; other is the rest.
type atom struct {
	prefix netip.Prefix
	other  bool
}

func (a atom) in(q netip.Prefix) bool {
	if a.other || a.prefix.Addr().Is4() != q.Addr().Is4() {
		return false
	}
	return q.Bits() <= a.prefix.Bits() && q.Contains(a.prefix.Addr())
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

func sourceAtoms(rs *Ruleset, fam string) []atom {
	seen := map[netip.Prefix]bool{}
	eachCond(rs, func(c *Cond) {
		if c.Kind != CondSaddr {
			return
		}
		for _, p := range c.Prefixes {
			if p.Addr().Is4() == (fam == FamilyIP) {
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
	atoms := []atom{{other: true}}
outer:
	for _, p := range ps {
		for _, x := range notOutside {
			if x.Bits() <= p.Bits() && x.Contains(p.Addr()) {
				continue outer
			}
		}
		if nonEmptyAtom(p, ps) {
			atoms = append(atoms, atom{prefix: p})
		}
	}
	return atoms
}

// nonEmptyAtom reports whether p is not entirely covered by the more specific
// prefixes in ps.
func nonEmptyAtom(p netip.Prefix, ps []netip.Prefix) bool {
	var kids []netip.Prefix
	for _, q := range ps {
		if q.Bits() > p.Bits() && p.Contains(q.Addr()) {
			kids = append(kids, q)
		}
	}
	total := new(big.Int)
	for _, q := range kids {
		maximal := true
		for _, r := range kids {
			if r != q && r.Bits() < q.Bits() && r.Contains(q.Addr()) {
				maximal = false
				break
			}
		}
		if maximal {
			total.Add(total, new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-q.Bits())))
		}
	}
	size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	return total.Cmp(size) < 0
}

// packet is the synthetic packet of one evaluation.
type packet struct {
	hook   string
	family string
	proto  uint8
	port   uint16
	src    atom
}

type tri int

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func (p *packet) cond(c *Cond) tri {
	var t tri
	switch c.Kind {
	case CondNever:
		return triFalse
	case CondUndecidable:
		return triUnknown
	case CondNFProto:
		t = boolTri(c.Family == p.family || c.Family == FamilyInet)
	case CondL4Proto:
		t = triFalse
		for _, x := range c.Protos {
			if x == int(p.proto) {
				t = triTrue
			}
		}
	case CondDport:
		t = boolTri(inPorts(c.Ports, p.port))
	case CondSport:
		// The client's source port is arbitrary.
		t = triUnknown
		if len(c.Ports) == 0 {
			t = triFalse
		}
		for _, r := range c.Ports {
			if r.From == 0 && r.To == 65535 {
				t = triTrue
			}
		}
	case CondSaddr:
		t = triFalse
		for _, q := range c.Prefixes {
			if p.src.in(q) {
				t = triTrue
			}
		}
	case CondDaddr:
		t = daddrTri(c.Prefixes, p.family)
	case CondIifname:
		t = ifnameTri(c.Names)
	case CondOifname:
		if p.hook == HookInput {
			// No output device yet: meta oifname breaks the rule whatever
			// the comparison.
			return triFalse
		}
		t = ifnameTri(c.Names)
	case CondCtState:
		t = boolTri(c.Bits&ctStateNew != 0)
	case CondAddrType:
		typ := uint32(rtnUnicast)
		if c.Addr == "daddr" && p.hook == HookInput {
			typ = rtnLocal
		}
		t = boolTri(c.Bits&(1<<typ) != 0)
	case CondPktType:
		t = boolTri(c.Bits&(1<<packetHost) != 0)
	case CondTCPFlags:
		if p.proto != unix.IPPROTO_TCP {
			return triUnknown
		}
		const syn = 0x02
		t = boolTri(syn&c.Mask == c.Value)
	default:
		return triUnknown
	}
	if c.Negate && t != triUnknown {
		t = 1 - t
	}
	return t
}

func boolTri(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func inPorts(rs []PortRange, p uint16) bool {
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
	t := triFalse
	for _, q := range ps {
		if q.Addr().Is4() != (fam == FamilyIP) {
			continue
		}
		if q.Bits() == 0 {
			return triTrue
		}
		special := false
		for _, x := range notOwnUnicast {
			if x.Bits() <= q.Bits() && x.Contains(q.Addr()) {
				special = true
				break
			}
		}
		if !special {
			t = triUnknown
		}
	}
	return t
}

// ifnameTri decides an interface name match for a packet that arrived on some
// interface other than lo.
func ifnameTri(names []string) tri {
	t := triFalse
	for _, n := range names {
		switch {
		case n == "*":
			return triTrue
		case n == "lo":
		case strings.HasSuffix(n, "*") && strings.HasPrefix("lo", strings.TrimSuffix(n, "*")):
			t = triUnknown // "l*" matches lo and others
		default:
			t = triUnknown
		}
	}
	return t
}

// outcome is a set of possible ends of a chain evaluation.
type outcome uint8

const (
	outAccept outcome = 1 << iota
	outDrop
	outReturn
)

type evaluator struct {
	rs     *Ruleset
	pkt    packet
	memo   map[memoKey]outcome
	chains map[chainKey]*Chain
}

type memoKey struct {
	chain *Chain
	idx   int
}

type chainKey struct {
	table *Table
	name  string
}

func newEvaluator(rs *Ruleset) *evaluator {
	e := &evaluator{rs: rs, chains: map[chainKey]*Chain{}}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		for ci := range t.Chains {
			e.chains[chainKey{t, t.Chains[ci].Name}] = &t.Chains[ci]
		}
	}
	return e
}

// run returns the possible outcomes of chain ch from rule i on. outReturn
// means the chain returned (or fell off its end) to its caller.
func (e *evaluator) run(t *Table, ch *Chain, i, depth int) outcome {
	if ch == nil || depth > 64 {
		return outAccept | outDrop | outReturn
	}
	if ch.Unknown != "" {
		return outAccept | outDrop | outReturn
	}
	if i >= len(ch.Rules) {
		return outReturn
	}
	k := memoKey{ch, i}
	if o, ok := e.memo[k]; ok {
		return o
	}
	r := &ch.Rules[i]
	rest := func() outcome { return e.run(t, ch, i+1, depth) }
	m := triTrue
	for ci := range r.Conds {
		switch e.pkt.cond(&r.Conds[ci]) {
		case triFalse:
			m = triFalse
		case triUnknown:
			if m == triTrue {
				m = triUnknown
			}
		}
		if m == triFalse {
			break
		}
	}
	var o outcome
	switch m {
	case triFalse:
		o = rest()
	default:
		if r.VMap != nil {
			o = e.vmap(t, ch, r, rest, depth)
		} else {
			o = e.verdict(t, r.Verdict, rest, depth)
		}
		if m == triUnknown {
			o |= rest()
		}
	}
	e.memo[k] = o
	return o
}

func (e *evaluator) vmap(t *Table, ch *Chain, r *Rule, rest func() outcome, depth int) outcome {
	var o outcome
	definite := false
	for _, en := range r.VMap {
		switch e.pkt.cond(&en.Cond) {
		case triTrue:
			o |= e.verdict(t, en.Verdict, rest, depth)
			definite = true
		case triUnknown:
			o |= e.verdict(t, en.Verdict, rest, depth)
		}
	}
	if !definite {
		o |= rest() // no key matched: the rule does nothing
	}
	return o
}

func (e *evaluator) verdict(t *Table, v Verdict, rest func() outcome, depth int) outcome {
	switch v.Kind {
	case VerdictAccept:
		return outAccept
	case VerdictDrop, VerdictReject:
		return outDrop
	case VerdictReturn:
		return outReturn
	case VerdictContinue:
		return rest()
	case VerdictJump:
		o := e.run(t, e.chains[chainKey{t, v.Target}], 0, depth+1)
		if o&outReturn != 0 {
			o = o&^outReturn | rest()
		}
		return o
	case VerdictGoto:
		// The target's return goes to our caller: it is our return.
		return e.run(t, e.chains[chainKey{t, v.Target}], 0, depth+1)
	}
	return outAccept | outDrop | rest()
}

// result of the whole hook for one packet.
type result struct {
	accept, drop bool
}

func (e *evaluator) hook(bases []chainRef, pkt packet) result {
	e.pkt = pkt
	e.memo = map[memoKey]outcome{}
	cont, drop := true, false
	for _, b := range bases {
		if !cont {
			break
		}
		o := e.run(b.table, b.chain, 0, 0)
		if o&outReturn != 0 {
			o &^= outReturn
			if b.chain.Policy == "drop" {
				o |= outDrop
			} else {
				o |= outAccept
			}
		}
		if o&outDrop != 0 {
			drop = true
		}
		cont = o&outAccept != 0
	}
	return result{accept: cont, drop: drop}
}

type openKey struct {
	from      string
	uncertain bool
}

// groupAtoms groups source atoms that every saddr condition treats alike, so
// each group is evaluated once (a blocklist of thousands of prefixes in one
// set is one group). The first group is the "any other source" atom alone;
// prefix atoms that behave like it are left out: they are never worth naming.
func groupAtoms(rs *Ruleset, atoms []atom) [][]atom {
	var conds []*Cond
	eachCond(rs, func(c *Cond) {
		if c.Kind == CondSaddr {
			conds = append(conds, c)
		}
	})
	sig := func(a atom) string {
		b := make([]byte, len(conds))
		for i, c := range conds {
			b[i] = '0'
			for _, q := range c.Prefixes {
				if a.in(q) {
					b[i] = '1'
					break
				}
			}
		}
		return string(b)
	}
	otherSig := sig(atoms[0])
	groups := [][]atom{{atoms[0]}}
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

func evalPorts(rs *Ruleset, bases []chainRef, atoms []atom, groups [][]atom, bounds []int, hook, fam, proto string) []Opening {
	pnum := uint8(unix.IPPROTO_TCP)
	if proto == "udp" {
		pnum = unix.IPPROTO_UDP
	}
	e := newEvaluator(rs)
	type span struct{ start, end int }
	open := map[openKey]*span{}
	var out []Opening
	flush := func(k openKey, s *span) {
		o := Opening{Port: uint16(s.start), Proto: proto, Direction: hook, From: k.from, Uncertain: k.uncertain, Family: fam}
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
		var other result
		var sure, unsure []atom // open prefix atoms worth naming
		for ai, g := range groups {
			r := e.hook(bases, packet{hook: hook, family: fam, proto: pnum, port: uint16(start), src: g[0]})
			if ai == 0 {
				other = r
				if r.accept {
					here[openKey{"", r.drop}] = true
				}
				continue
			}
			if !r.accept {
				continue
			}
			// A prefix is worth naming when the rest of the world does not
			// reach the port, or reaches it only uncertainly while this
			// prefix surely does.
			switch {
			case !other.accept && r.drop:
				unsure = append(unsure, g...)
			case !other.accept || (other.drop && !r.drop):
				sure = append(sure, g...)
			}
		}
		for _, group := range []struct {
			atoms     []atom
			uncertain bool
		}{{sure, false}, {unsure, true}} {
			for _, p := range atomPrefixes(group.atoms, atoms) {
				here[openKey{p.String(), group.uncertain}] = true
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
		return !a.Uncertain && b.Uncertain
	})
	return out
}

// atomPrefixes returns the fewest prefixes that cover exactly the union of the
// regions of the atoms open (each atom's prefix minus the more specific
// prefixes of all atoms).
func atomPrefixes(open, all []atom) []netip.Prefix {
	var rs []addrRange
	for _, a := range open {
		rs = append(rs, atomRanges(a.prefix, all)...)
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
		ps, ok := rangePrefixes(r.lo.AsSlice(), r.hi.AsSlice())
		if ok {
			out = append(out, ps...)
		}
	}
	return out
}

type addrRange struct{ lo, hi netip.Addr }

// atomRanges is p minus the maximal more specific prefixes of other atoms.
func atomRanges(p netip.Prefix, all []atom) []addrRange {
	var kids []netip.Prefix
	for _, a := range all {
		q := a.prefix
		if a.other || q.Addr().Is4() != p.Addr().Is4() || q.Bits() <= p.Bits() || !p.Contains(q.Addr()) {
			continue
		}
		kids = append(kids, q)
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].Addr().Less(kids[j].Addr()) })
	var out []addrRange
	cur := p.Addr()
	end := lastAddr(p)
	done := false
	for _, k := range kids {
		if done || k.Addr().Less(cur) {
			continue // nested in a kid already cut out
		}
		if cur.Less(k.Addr()) {
			out = append(out, addrRange{cur, k.Addr().Prev()})
		}
		last := lastAddr(k)
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
