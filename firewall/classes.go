// This file cuts the header space beyond unicast TCP and UDP to the
// node's own addresses by port into regions (vocab.Class): every packet of
// one family split by protocol, ICMP type, destination (the node's own
// addresses, multicast groups, broadcast, link-local) and ports, cut where
// a rule of the rulesets compared tells packets apart (ClassesOf), so that
// every packet of a region fares alike under them.

package firewall

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"adoption/vocab"
)

// Class is one region of new packets from outside to the node (vocab.Class).
type Class = vocab.Class

// ClassOpening is region c's opening from sources from (empty: any).
func ClassOpening(c Class, from string) Opening {
	o := Opening{Port: c.Port, PortEnd: c.PortEnd, Proto: c.Proto, Direction: HookInput, From: from, Family: c.Family, Class: c.Spelling()}
	if !vocab.PortProto(c.Num) {
		o.Port, o.PortEnd = 0, 0
	}
	if c.Dst.IsValid() {
		o.To = vocab.AddrRangeText(c.Dst, c.DstEnd)
	}
	return o
}

// special are the destination blocks a packet to the node may have
// besides its own unicast addresses, per family.
var special = map[string][]netip.Prefix{
	FamilyIP:  {netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("255.255.255.255/32")},
	FamilyIP6: {netip.MustParsePrefix("ff00::/8"), netip.MustParsePrefix("fe80::/10")},
}

// ClassesOf are the regions of family fam that rulesets rss (and the
// declared regions extra, spelled as ParseClass reads them) split the
// header space into, besides TCP and UDP to the node's own addresses by
// port: each protocol a rule names and one for every other protocol, cut
// by the ICMP types, destination prefixes and ports the rules name, so
// that no rule of rss tells two packets of one region apart by those
// fields. A protocol's regions are cut only by the rules that may match
// it (a rule of TCP's ports cuts no UDP region), and a set of values
// only where a packet's membership changes (a set of types 0 to 136 cuts
// at 137, not at each type): every region is as large as the rules let
// it be along each field.
func ClassesOf(fam string, rss []*Ruleset, extra []string) []Class {
	var rules []*Rule
	protos := map[uint8]bool{unix.IPPROTO_TCP: true, unix.IPPROTO_UDP: true}
	if fam == FamilyIP6 {
		protos[unix.IPPROTO_ICMPV6] = true
	} else {
		protos[unix.IPPROTO_ICMP] = true
	}
	// Source ports are cut by every rule, of whatever protocol: a region
	// of source port 0 alone stands for any source port (classPacket),
	// and is cut wherever it was before.
	sports := cuts{}
	named := func(c *Cond) {
		switch c.Kind {
		case CondL4Proto:
			for _, p := range c.Protos {
				protos[uint8(p)] = true
			}
		case CondSport:
			for _, r := range c.Ports {
				sports.add(int(r.From), int(r.To))
			}
		}
	}
	for _, rs := range rss {
		if rs == nil {
			continue
		}
		for ti := range rs.Tables {
			t := &rs.Tables[ti]
			if t.Family != fam && t.Family != FamilyInet {
				continue
			}
			for ci := range t.Chains {
				for ri := range t.Chains[ci].Rules {
					r := &t.Chains[ci].Rules[ri]
					rules = append(rules, r)
					for k := range r.Conds {
						named(&r.Conds[k])
					}
					for k := range r.VMap {
						named(&r.VMap[k].Cond)
					}
				}
			}
		}
	}
	var declared []vocab.Class
	for _, s := range extra {
		for _, d := range vocab.ParseRegions(s) {
			if d.Family != fam {
				continue
			}
			if !d.Other {
				protos[d.Num] = true
			}
			declared = append(declared, d)
			sports.add(int(d.Sport), int(d.SportEnd))
		}
	}
	sportSpans := sports.spans(65535)
	nums := make([]int, 0, len(protos))
	for n := range protos {
		if n != vocab.OtherProto {
			nums = append(nums, int(n))
		}
	}
	sort.Ints(nums)
	// Each protocol's cuts are made once, and the regions counted before
	// they are made: a ruleset naming many ports cuts thousands.
	var all []protoCuts
	n := 0
	for _, num := range nums {
		all = append(all, cutsOf(vocab.NewClass(fam, uint8(num), false), rules, declared, sportSpans))
	}
	all = append(all, cutsOf(vocab.NewClass(fam, vocab.OtherProto, true), rules, declared, sportSpans))
	for _, pc := range all {
		n += pc.count()
	}
	out := make([]Class, 0, n)
	for _, pc := range all {
		out = pc.emit(out)
	}
	return out
}

// protoCuts are the cuts of one protocol's regions: its class (any type,
// destination and port) and the spans each field is cut into.
type protoCuts struct {
	c                    Class
	types, sports, ports [][2]int
	dsts                 []drange
}

// drange is a destination range; invalid: the node's own addresses.
type drange struct{ lo, hi netip.Addr }

// mayMatch reports whether rule r may match a packet of family fam and
// protocol num: none of its conditions on the family or the protocol is
// false for it.
func mayMatch(r *Rule, fam string, num uint8) bool {
	for i := range r.Conds {
		c := &r.Conds[i]
		var in bool
		switch c.Kind {
		case CondL4Proto:
			in = slices.Contains(c.Protos, int(num))
		case CondNFProto:
			in = c.Family == fam || c.Family == FamilyInet
		default:
			continue
		}
		if in == c.Negate {
			return false
		}
	}
	return true
}

// cutsOf are the cuts of class c's protocol by the rules that may match
// it and by the declared regions, its source ports cut into sports.
func cutsOf(c Class, rules []*Rule, declared []vocab.Class, sports [][2]int) protoCuts {
	fam := c.Family
	types, ports := cuts{}, cuts{}
	if c.ICMP() {
		for _, t := range vocab.ICMPCutTypes(fam) {
			types.add(t, t)
		}
	}
	dsts := map[netip.Prefix]bool{}
	visit := func(cd *Cond) {
		switch cd.Kind {
		case CondICMPType:
			types.addSet(cd.Types)
		case CondDport, CondOrigDport:
			for _, r := range cd.Ports {
				ports.add(int(r.From), int(r.To))
			}
		case CondDaddr, CondOrigDaddr:
			for _, p := range cd.Prefixes {
				if p.Addr().Is4() == (fam == FamilyIP) {
					dsts[p.Masked()] = true
				}
			}
		}
	}
	for _, r := range rules {
		if !mayMatch(r, fam, c.Num) {
			continue
		}
		for k := range r.Conds {
			visit(&r.Conds[k])
		}
		for k := range r.VMap {
			visit(&r.VMap[k].Cond)
		}
	}
	for _, d := range declared {
		types.add(int(d.Type), int(d.TypeEnd))
		ports.add(int(d.Port), int(d.PortEnd))
		if d.Dst.IsValid() {
			for _, p := range vocab.RangeToPrefixes(d.Dst, d.DstEnd) {
				dsts[p] = true
			}
		}
	}
	pc := protoCuts{c: c, types: [][2]int{{0, 255}}, sports: [][2]int{{0, 65535}}, ports: [][2]int{{0, 65535}}}
	if c.ICMP() {
		pc.types = types.spans(255)
	}
	if vocab.PortProto(c.Num) {
		pc.sports, pc.ports = sports, ports.spans(65535)
	}
	// Destinations: the node's own, and the special blocks cut by every
	// prefix named inside them.
	pc.dsts = []drange{{}}
	for _, blk := range special[fam] {
		var bs []netip.Addr
		bs = append(bs, blk.Addr())
		for p := range dsts {
			if !blk.Overlaps(p) {
				continue
			}
			lo, hi := p.Masked().Addr(), vocab.LastAddr(p)
			if blk.Contains(lo) {
				bs = append(bs, lo)
			}
			if blk.Contains(hi) && hi != vocab.LastAddr(blk) {
				bs = append(bs, hi.Next())
			}
		}
		slices.SortFunc(bs, func(a, b netip.Addr) int { return a.Compare(b) })
		bs = slices.Compact(bs)
		for i, lo := range bs {
			hi := vocab.LastAddr(blk)
			if i+1 < len(bs) {
				hi = bs[i+1].Prev()
			}
			pc.dsts = append(pc.dsts, drange{lo, hi})
		}
	}
	return pc
}

// count is an upper bound of how many regions emit makes.
func (pc protoCuts) count() int {
	k := len(pc.dsts) * len(pc.types)
	if vocab.PortProto(pc.c.Num) {
		k *= len(pc.sports) * len(pc.ports)
	}
	return k
}

// emit appends the protocol's regions to out, in order of type,
// destination, source port and port.
func (pc protoCuts) emit(out []Class) []Class {
	for _, tv := range pc.types {
		c := pc.c
		if c.ICMP() {
			c.Type, c.TypeEnd = uint8(tv[0]), uint8(tv[1])
		}
		for _, d := range pc.dsts {
			x := c
			if d.lo.IsValid() {
				x.Dst, x.DstEnd = d.lo, d.hi
			} else {
				x.Own = true
			}
			if !vocab.PortProto(x.Num) {
				out = append(out, x)
				continue
			}
			if x.Own && (x.Num == unix.IPPROTO_TCP || x.Num == unix.IPPROTO_UDP) {
				continue // the ports' own comparison
			}
			if (x.Num == unix.IPPROTO_TCP || x.Num == unix.IPPROTO_UDP) && x.Cast() == PacketHost {
				// To the node's link-local address: the ports' own
				// comparison, as its other addresses.
				continue
			}
			if x.Num == unix.IPPROTO_TCP {
				continue // TCP takes no broadcast or multicast packet
			}
			for _, sv := range pc.sports {
				for _, iv := range pc.ports {
					y := x
					y.Port, y.PortEnd = uint16(iv[0]), uint16(iv[1])
					y.Sport, y.SportEnd = uint16(sv[0]), uint16(sv[1])
					out = append(out, y)
				}
			}
		}
	}
	return out
}

// cuts are the starts of the intervals a value space is cut into.
type cuts map[int]bool

func (c cuts) add(lo, hi int) {
	c[lo] = true
	c[hi+1] = true
}

// addSet cuts where a packet's membership of the set xs changes: at
// the ends of its runs of consecutive values, not at each value.
func (c cuts) addSet(xs []int) {
	if len(xs) == 0 {
		return
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	lo := s[0]
	for i := 1; i <= len(s); i++ {
		if i < len(s) && s[i] <= s[i-1]+1 {
			continue
		}
		c.add(lo, s[i-1])
		if i < len(s) {
			lo = s[i]
		}
	}
}

// spans are the intervals [0, max] is cut into.
func (c cuts) spans(max int) [][2]int {
	starts := []int{0}
	for s := range c {
		if s > 0 && s <= max {
			starts = append(starts, s)
		}
	}
	sort.Ints(starts)
	starts = slices.Compact(starts)
	out := make([][2]int, len(starts))
	for i, s := range starts {
		e := max
		if i+1 < len(starts) {
			e = starts[i+1] - 1
		}
		out[i] = [2]int{s, e}
	}
	return out
}

// MergeClasses joins regions that differ in one range only and meet end
// to end (ports, source ports, destinations, ICMP types), and regions of one
// protocol whose destinations together are every destination (the
// node's own and every special block): the fewest regions holding the
// same packets.
func MergeClasses(cs []Class) []Class { return MergeClassesOwned(slices.Clone(cs)) }

// MergeClassesOwned is MergeClasses of regions the caller gives up: it
// sorts and joins them in cs's own storage.
func MergeClassesOwned(cs []Class) []Class {
	out := cs
	for d := range mergeDims {
		// Regions already side by side that meet end to end are joined
		// first (ClassesOf gives a region's ports in order): for regions
		// apart from each other the runs joined are the same, and fewer
		// are sorted.
		out = joinAdjacent(out, d)
		slices.SortStableFunc(out, func(x, y Class) int {
			if a, b := clearDim(x, d), clearDim(y, d); a != b {
				return classCmp(a, b)
			}
			return classCmp(x, y)
		})
		out = joinAdjacent(out, d)
	}
	// Every destination: one region without a destination.
	byRest := map[Class][]int{}
	var order []Class
	for i, c := range out {
		k := c
		k.Dst, k.DstEnd, k.Own = netip.Addr{}, netip.Addr{}, false
		if byRest[k] == nil {
			order = append(order, k)
		}
		byRest[k] = append(byRest[k], i)
	}
	drop := map[int]bool{}
	var whole []Class
	for _, k := range order {
		idx := byRest[k]
		own, blocks := false, 0
		for _, i := range idx {
			c := out[i]
			if c.Own {
				own = true
				continue
			}
			for _, b := range special[c.Family] {
				if c.Dst == b.Addr() && c.DstEnd == vocab.LastAddr(b) {
					blocks++
				}
			}
		}
		if own && blocks == len(special[k.Family]) && len(idx) == blocks+1 {
			for _, i := range idx {
				drop[i] = true
			}
			whole = append(whole, k)
		}
	}
	var res []Class
	for i, c := range out {
		if !drop[i] {
			res = append(res, c)
		}
	}
	res = append(res, whole...)
	slices.SortStableFunc(res, classCmp)
	return res
}

// The ranges MergeClasses joins regions along, in order: destination
// ports, source ports, destinations, ICMP types.
const (
	dimPort = iota
	dimSport
	dimDst
	dimType
	mergeDims
)

// clearDim is c without its range along dimension d: what two regions
// that may join along d have alike. By value: a region cleared is not
// moved to the heap.
func clearDim(c Class, d int) Class {
	switch d {
	case dimPort:
		c.Port, c.PortEnd = 0, 0
	case dimSport:
		c.Sport, c.SportEnd = 0, 0
	case dimDst:
		c.Dst, c.DstEnd = netip.Addr{}, netip.Addr{}
	case dimType:
		c.Type, c.TypeEnd = 0, 0
	}
	return c
}

// joinDim joins b to a along dimension d where a's range there ends just
// before b's begins.
func joinDim(a *Class, b Class, d int) bool {
	switch d {
	case dimPort:
		if int(a.PortEnd)+1 != int(b.Port) {
			return false
		}
		a.PortEnd = b.PortEnd
	case dimSport:
		if int(a.SportEnd)+1 != int(b.Sport) {
			return false
		}
		a.SportEnd = b.SportEnd
	case dimDst:
		if !a.DstEnd.IsValid() || !b.Dst.IsValid() || a.DstEnd.Next() != b.Dst {
			return false
		}
		a.DstEnd = b.DstEnd
	case dimType:
		if int(a.TypeEnd)+1 != int(b.Type) {
			return false
		}
		a.TypeEnd = b.TypeEnd
	}
	return true
}

// joinAdjacent joins each region of cs with the one after it where they
// differ along dimension d only and meet there end to end, in place.
func joinAdjacent(cs []Class, d int) []Class {
	merged := cs[:0]
	for _, c := range cs {
		if n := len(merged); n > 0 && clearDim(merged[n-1], d) == clearDim(c, d) && joinDim(&merged[n-1], c, d) {
			continue
		}
		merged = append(merged, c)
	}
	return merged
}

// classCmp orders regions by family, protocol, type, destination, port:
// -1, 0 or +1 (a region's protocol's name follows its number).
func classCmp(a, b Class) int {
	switch {
	case a.Family != b.Family:
		return strings.Compare(a.Family, b.Family)
	case a.Other != b.Other:
		if !a.Other {
			return -1
		}
		return 1
	case a.Num != b.Num:
		return cmp.Compare(a.Num, b.Num)
	case a.Type != b.Type:
		return cmp.Compare(a.Type, b.Type)
	case a.TypeEnd != b.TypeEnd:
		return cmp.Compare(a.TypeEnd, b.TypeEnd)
	case a.Own != b.Own:
		if a.Own {
			return -1
		}
		return 1
	case a.Dst != b.Dst:
		return a.Dst.Compare(b.Dst)
	case a.DstEnd != b.DstEnd:
		return a.DstEnd.Compare(b.DstEnd)
	case a.Sport != b.Sport:
		return cmp.Compare(a.Sport, b.Sport)
	case a.SportEnd != b.SportEnd:
		return cmp.Compare(a.SportEnd, b.SportEnd)
	case a.Port != b.Port:
		return cmp.Compare(a.Port, b.Port)
	}
	return cmp.Compare(a.PortEnd, b.PortEnd)
}
