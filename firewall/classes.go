// This file holds the regions of the header space beyond unicast TCP and
// UDP to the node's own addresses by port: every packet of one family
// split by protocol, ICMP type, destination (the node's own addresses,
// multicast groups, broadcast, link-local) and destination port, cut
// where a rule of the rulesets compared tells packets apart (ClassesOf),
// so that every packet of a region fares alike under them. Each region
// reads on one line ("ip udp to 239.255.255.250 dport 1900"), and
// flip.drop and flip.widen name regions the same way (ParseClass).

package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Class is one region of new packets from outside to the node: a family,
// a protocol (or every protocol no rule names: Other), for ICMP a type
// range, a destination, and for protocols with ports a destination port
// range.
type Class struct {
	Family string
	// Proto is the protocol's name ("icmp", "udp", "esp", or its number),
	// Num its number (for Other, a number no rule names, standing for
	// them all).
	Proto string
	Num   uint8
	Other bool
	// Type..TypeEnd are the ICMP or ICMPv6 types (ICMP only; code 0).
	Type, TypeEnd uint8
	// Dst..DstEnd is the destination range; Own: the node's own unicast
	// addresses instead; neither: any destination (a declared region).
	Dst, DstEnd netip.Addr
	Own         bool
	// Port..PortEnd are the destination ports of a protocol with ports
	// (PortProto), Sport..SportEnd its source ports; 0-65535 for any.
	Port, PortEnd   uint16
	Sport, SportEnd uint16
}

// Name is the region as the preview prints it and flip.drop and
// flip.widen spell it.
func (c Class) Name() string { return c.Spelling() }

// Spelling is the region on one line: "FAMILY PROTO [type T[-U]] [to
// node|ADDR|PREFIX|ADDR-ADDR] [sport P[-Q]] [dport P[-Q]]", as
// ParseClass reads it.
func (c Class) Spelling() string {
	var b strings.Builder
	b.WriteString(c.Family)
	if c.Other {
		b.WriteString(" proto other")
	} else {
		b.WriteString(" " + c.Proto)
	}
	if c.ICMP() && !(c.Type == 0 && c.TypeEnd == 255) {
		b.WriteString(" type " + span(int(c.Type), int(c.TypeEnd)))
	}
	switch {
	case c.Own:
		b.WriteString(" to node")
	case c.Dst.IsValid():
		b.WriteString(" to " + AddrRangeText(c.Dst, c.DstEnd))
	}
	if PortProto(c.Num) && !(c.Sport == 0 && c.SportEnd == 65535) {
		b.WriteString(" sport " + span(int(c.Sport), int(c.SportEnd)))
	}
	if PortProto(c.Num) && !(c.Port == 0 && c.PortEnd == 65535) {
		b.WriteString(" dport " + span(int(c.Port), int(c.PortEnd)))
	}
	return b.String()
}

func span(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// AddrRangeText is the range lo..hi as a prefix when it is one, else
// "LO-HI".
func AddrRangeText(lo, hi netip.Addr) string {
	if lo == hi {
		return lo.String()
	}
	if ps := RangeToPrefixes(lo, hi); len(ps) == 1 {
		return ps[0].String()
	}
	return lo.String() + "-" + hi.String()
}

// RangeToPrefixes is the fewest prefixes covering exactly lo..hi.
func RangeToPrefixes(lo, hi netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for lo.IsValid() && lo.Compare(hi) <= 0 {
		bits := lo.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(lo, bits-1).Masked()
			if p.Addr() != lo || lastAddr(p).Compare(hi) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(lo, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last == maxAddr(lo.BitLen()) {
			break
		}
		lo = last.Next()
	}
	return out
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func maxAddr(bits int) netip.Addr {
	b := make([]byte, bits/8)
	for i := range b {
		b[i] = 0xff
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ICMP reports whether the region is ICMP of its family.
func (c Class) ICMP() bool {
	return !c.Other && (c.Family == FamilyIP && c.Num == unix.IPPROTO_ICMP || c.Family == FamilyIP6 && c.Num == unix.IPPROTO_ICMPV6)
}

// PortProto reports whether protocol n has TCP's and UDP's ports (a port
// match means the same in it): TCP, UDP, DCCP, SCTP, UDP-Lite.
func PortProto(n uint8) bool {
	switch n {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_DCCP, unix.IPPROTO_SCTP, unix.IPPROTO_UDPLITE:
		return true
	}
	return false
}

// Cast is PacketBroadcast or PacketMulticast for a region sent to a
// broadcast address or a multicast group, else PacketHost.
func (c Class) Cast() uint8 {
	switch {
	case !c.Dst.IsValid():
		return PacketHost
	case c.Dst.Is4() && c.Dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return PacketBroadcast
	case c.Dst.IsMulticast():
		return PacketMulticast
	}
	return PacketHost
}

// CastAddr is an address that stands for cast kind k in a key (0.0.0.0
// plus k): no destination of a region.
func CastAddr(k uint8) netip.Addr { return netip.AddrFrom4([4]byte{0, 0, 0, k}) }

// The ICMP and ICMPv6 types the kernel's conntrack treats apart (new,
// untracked, invalid when unsolicited) and the hop limits their senders
// use: their boundaries cut the type ranges of every region.
var (
	icmp4New   = []int{8, 13, 15, 17}
	icmp6New   = []int{128, 139}
	icmp6NoCt  = []int{130, 131, 132, 133, 134, 135, 136, 143}
	icmp6HL255 = []int{133, 134, 135, 136, 137, 141, 142, 148, 149}
	icmp6HL1   = []int{130, 131, 132, 143, 151, 152, 153}
)

// ICMPNewTypes are the ICMP (ip) or ICMPv6 (ip6) types conntrack tracks
// as a new conversation: the ones a forward hook decides as a new
// connection (every other type forwarded is related or invalid).
func ICMPNewTypes(fam string) []int {
	if fam == FamilyIP6 {
		return slices.Clone(icmp6New)
	}
	return slices.Clone(icmp4New)
}

// CtState is the conntrack state of the region's first packet: new,
// untracked (ICMPv6 neighbour discovery and MLD), or invalid (an ICMP
// type that cannot start a connection, sent unsolicited).
func (c Class) CtState() uint32 {
	if !c.ICMP() {
		return CtStateNew
	}
	t := int(c.Type)
	if c.Family == FamilyIP {
		if slices.Contains(icmp4New, t) {
			return CtStateNew
		}
		return CtStateInvalid
	}
	switch {
	case slices.Contains(icmp6New, t):
		return CtStateNew
	case slices.Contains(icmp6NoCt, t):
		return CtStateUntracked
	}
	return CtStateInvalid
}

// HopLimit is the TTL or hop limit the region's senders use (255 for
// neighbour discovery, 1 for MLD); 0: any.
func (c Class) HopLimit() uint8 {
	if !c.ICMP() || c.Family != FamilyIP6 {
		return 0
	}
	switch t := int(c.Type); {
	case slices.Contains(icmp6HL255, t):
		return 255
	case slices.Contains(icmp6HL1, t):
		return 1
	}
	return 0
}

// Opening is the region's opening from sources from (empty: any).
func (c Class) Opening(from string) Opening {
	o := Opening{Port: c.Port, PortEnd: c.PortEnd, Proto: c.Proto, Direction: HookInput, From: from, Family: c.Family, Class: c.Spelling()}
	if !PortProto(c.Num) {
		o.Port, o.PortEnd = 0, 0
	}
	if c.Dst.IsValid() {
		o.To = AddrRangeText(c.Dst, c.DstEnd)
	}
	return o
}

// Within reports whether every packet of c is one of d.
func (c Class) Within(d Class) bool {
	if c.Family != d.Family || c.Other != d.Other || (!c.Other && c.Num != d.Num) {
		return false
	}
	if c.ICMP() && (c.Type < d.Type || c.TypeEnd > d.TypeEnd) {
		return false
	}
	if PortProto(c.Num) && (c.Port < d.Port || c.PortEnd > d.PortEnd || c.Sport < d.Sport || c.SportEnd > d.SportEnd) {
		return false
	}
	switch {
	case d.Own:
		return c.Own
	case d.Dst.IsValid():
		return c.Dst.IsValid() && d.Dst.Compare(c.Dst) <= 0 && c.DstEnd.Compare(d.DstEnd) <= 0
	}
	return true
}

// Holds reports whether c's destination holds a packet to dst, the node's
// own unicast address when own: a region to the node holds only those, a
// destination range only its addresses, a region without one any.
func (c Class) Holds(dst netip.Addr, own bool) bool {
	switch {
	case c.Own:
		return own
	case c.Dst.IsValid():
		return c.Dst.Compare(dst) <= 0 && dst.Compare(c.DstEnd) <= 0
	}
	return true
}

// WithinAny reports whether c is within one of the regions ds spells.
func (c Class) WithinAny(ds []string) bool {
	for _, s := range ds {
		for _, d := range parseRegions(s) {
			if c.Within(d) {
				return true
			}
		}
	}
	return false
}

var protoNames = map[string]uint8{
	"icmp": unix.IPPROTO_ICMP, "igmp": unix.IPPROTO_IGMP, "tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP,
	"dccp": unix.IPPROTO_DCCP, "gre": unix.IPPROTO_GRE, "esp": unix.IPPROTO_ESP, "ah": unix.IPPROTO_AH,
	"icmpv6": unix.IPPROTO_ICMPV6, "vrrp": 112, "sctp": unix.IPPROTO_SCTP, "udplite": unix.IPPROTO_UDPLITE,
	"ipip": unix.IPPROTO_IPIP, "ipv6": unix.IPPROTO_IPV6, "ospf": 89, "pim": unix.IPPROTO_PIM,
}

// ProtoName is protocol n's name, or its number.
func ProtoName(n uint8) string {
	for k, v := range protoNames {
		if v == n {
			return k
		}
	}
	return strconv.Itoa(int(n))
}

// otherProto is the protocol number standing for every protocol no rule
// names (253: reserved for experiments, RFC 3692).
const otherProto = 253

// newClass is the region of proto n in family fam, any type, destination
// and port.
func newClass(fam string, n uint8, other bool) Class {
	c := Class{Family: fam, Num: n, Proto: ProtoName(n), Other: other, TypeEnd: 255, PortEnd: 65535, SportEnd: 65535}
	if other {
		c.Proto = "other"
	}
	return c
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
// by every ICMP type, destination prefix and destination port a rule
// names, so that no rule of rss tells two packets of one region apart by
// those fields.
func ClassesOf(fam string, rss []*Ruleset, extra []string) []Class {
	protos := map[uint8]bool{unix.IPPROTO_TCP: true, unix.IPPROTO_UDP: true}
	icmpN := uint8(unix.IPPROTO_ICMP)
	newTypes := icmp4New
	if fam == FamilyIP6 {
		icmpN, newTypes = unix.IPPROTO_ICMPV6, slices.Concat(icmp6New, icmp6NoCt, icmp6HL255, icmp6HL1)
	}
	protos[icmpN] = true
	types := cuts{}
	for _, t := range newTypes {
		types.add(t, t)
	}
	ports, sports := cuts{}, cuts{}
	dsts := map[netip.Prefix]bool{}
	visit := func(c *Cond) {
		switch c.Kind {
		case CondL4Proto:
			for _, p := range c.Protos {
				protos[uint8(p)] = true
			}
		case CondICMPType:
			for _, t := range c.Types {
				types.add(t, t)
			}
		case CondDport, CondOrigDport:
			for _, r := range c.Ports {
				ports.add(int(r.From), int(r.To))
			}
		case CondSport:
			for _, r := range c.Ports {
				sports.add(int(r.From), int(r.To))
			}
		case CondDaddr, CondOrigDaddr:
			for _, p := range c.Prefixes {
				if p.Addr().Is4() == (fam == FamilyIP) {
					dsts[p.Masked()] = true
				}
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
					for k := range r.Conds {
						visit(&r.Conds[k])
					}
					for k := range r.VMap {
						visit(&r.VMap[k].Cond)
					}
				}
			}
		}
	}
	for _, s := range extra {
		for _, d := range parseRegions(s) {
			if d.Family != fam {
				continue
			}
			if !d.Other {
				protos[d.Num] = true
			}
			types.add(int(d.Type), int(d.TypeEnd))
			ports.add(int(d.Port), int(d.PortEnd))
			sports.add(int(d.Sport), int(d.SportEnd))
			if d.Dst.IsValid() {
				for _, p := range RangeToPrefixes(d.Dst, d.DstEnd) {
					dsts[p] = true
				}
			}
		}
	}
	// Destinations: the node's own, and the special blocks cut by every
	// prefix named inside them.
	type drange struct{ lo, hi netip.Addr }
	dranges := []drange{{}}
	for _, blk := range special[fam] {
		var bs []netip.Addr
		bs = append(bs, blk.Addr())
		for p := range dsts {
			if !blk.Overlaps(p) {
				continue
			}
			lo, hi := p.Masked().Addr(), lastAddr(p)
			if blk.Contains(lo) {
				bs = append(bs, lo)
			}
			if blk.Contains(hi) && hi != lastAddr(blk) {
				bs = append(bs, hi.Next())
			}
		}
		slices.SortFunc(bs, func(a, b netip.Addr) int { return a.Compare(b) })
		bs = slices.Compact(bs)
		for i, lo := range bs {
			hi := lastAddr(blk)
			if i+1 < len(bs) {
				hi = bs[i+1].Prev()
			}
			dranges = append(dranges, drange{lo, hi})
		}
	}
	nums := make([]int, 0, len(protos))
	for n := range protos {
		nums = append(nums, int(n))
	}
	sort.Ints(nums)
	var out []Class
	emit := func(c Class) {
		for _, d := range dranges {
			x := c
			if d.lo.IsValid() {
				x.Dst, x.DstEnd = d.lo, d.hi
			} else {
				x.Own = true
			}
			if !PortProto(x.Num) {
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
			for _, sv := range sports.spans(65535) {
				for _, iv := range ports.spans(65535) {
					y := x
					y.Port, y.PortEnd = uint16(iv[0]), uint16(iv[1])
					y.Sport, y.SportEnd = uint16(sv[0]), uint16(sv[1])
					out = append(out, y)
				}
			}
		}
	}
	for _, n := range nums {
		if n == int(otherProto) {
			continue
		}
		c := newClass(fam, uint8(n), false)
		if c.ICMP() {
			for _, iv := range types.spans(255) {
				x := c
				x.Type, x.TypeEnd = uint8(iv[0]), uint8(iv[1])
				emit(x)
			}
			continue
		}
		emit(c)
	}
	emit(newClass(fam, otherProto, true))
	return out
}

// cuts are the starts of the intervals a value space is cut into.
type cuts map[int]bool

func (c cuts) add(lo, hi int) {
	c[lo] = true
	c[hi+1] = true
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
func MergeClasses(cs []Class) []Class {
	out := slices.Clone(cs)
	dims := []struct {
		clear func(*Class)
		join  func(a, b *Class) bool
	}{
		{func(c *Class) { c.Port, c.PortEnd = 0, 0 }, func(a, b *Class) bool {
			if int(a.PortEnd)+1 != int(b.Port) {
				return false
			}
			a.PortEnd = b.PortEnd
			return true
		}},
		{func(c *Class) { c.Sport, c.SportEnd = 0, 0 }, func(a, b *Class) bool {
			if int(a.SportEnd)+1 != int(b.Sport) {
				return false
			}
			a.SportEnd = b.SportEnd
			return true
		}},
		{func(c *Class) { c.Dst, c.DstEnd = netip.Addr{}, netip.Addr{} }, func(a, b *Class) bool {
			if !a.DstEnd.IsValid() || !b.Dst.IsValid() || a.DstEnd.Next() != b.Dst {
				return false
			}
			a.DstEnd = b.DstEnd
			return true
		}},
		{func(c *Class) { c.Type, c.TypeEnd = 0, 0 }, func(a, b *Class) bool {
			if int(a.TypeEnd)+1 != int(b.Type) {
				return false
			}
			a.TypeEnd = b.TypeEnd
			return true
		}},
	}
	for _, d := range dims {
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			d.clear(&a)
			d.clear(&b)
			if a != b {
				return classLess(a, b)
			}
			return classLess(out[i], out[j])
		})
		var merged []Class
		for _, c := range out {
			if n := len(merged); n > 0 {
				a, b := merged[n-1], c
				d.clear(&a)
				d.clear(&b)
				if a == b && d.join(&merged[n-1], &c) {
					continue
				}
			}
			merged = append(merged, c)
		}
		out = merged
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
				if c.Dst == b.Addr() && c.DstEnd == lastAddr(b) {
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
	sort.SliceStable(res, func(i, j int) bool { return classLess(res[i], res[j]) })
	return res
}

// classLess orders regions by family, protocol, type, destination, port.
func classLess(a, b Class) bool {
	switch {
	case a.Family != b.Family:
		return a.Family < b.Family
	case a.Other != b.Other:
		return !a.Other
	case a.Num != b.Num:
		return a.Num < b.Num
	case a.Type != b.Type:
		return a.Type < b.Type
	case a.TypeEnd != b.TypeEnd:
		return a.TypeEnd < b.TypeEnd
	case a.Own != b.Own:
		return a.Own
	case a.Dst != b.Dst:
		return a.Dst.Less(b.Dst)
	case a.DstEnd != b.DstEnd:
		return a.DstEnd.Less(b.DstEnd)
	case a.Sport != b.Sport:
		return a.Sport < b.Sport
	case a.SportEnd != b.SportEnd:
		return a.SportEnd < b.SportEnd
	case a.Port != b.Port:
		return a.Port < b.Port
	}
	return a.PortEnd < b.PortEnd
}
