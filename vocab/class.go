// This file holds a region of the header space beyond unicast TCP and
// UDP to the node's own addresses by port: a family, a protocol, ICMP
// types, a destination and ports, and how it reads on one line ("ip udp
// to 239.255.255.250 dport 1900"). The firewall cuts the header space
// into regions (firewall.ClassesOf); config reads their spellings.

package vocab

import (
	"encoding/binary"
	"fmt"
	mathbits "math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The IP families a region is sent in (the firewall's table families of
// the same names).
const (
	FamilyIP  = "ip"
	FamilyIP6 = "ip6"
)

// What a region's packet is sent to (Class.Cast): the kernel's packet
// types (meta pkttype).
const (
	PacketHost      = 0
	PacketBroadcast = 1
	PacketMulticast = 2
)

// The conntrack states of a region's first packet (Class.CtState): the
// kernel's ct state bits.
const (
	CtStateInvalid   = 1
	CtStateNew       = 8
	CtStateUntracked = 64
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
	if p, ok := rangePrefix(lo, hi); ok {
		return p.String()
	}
	return lo.String() + "-" + hi.String()
}

// rangePrefix is the prefix that holds exactly lo..hi, if one does: the
// bits lo and hi share, when lo has only zeros after them and hi only
// ones.
func rangePrefix(lo, hi netip.Addr) (netip.Prefix, bool) {
	if !lo.IsValid() || lo.BitLen() != hi.BitLen() {
		return netip.Prefix{}, false
	}
	a, b := lo.As16(), hi.As16()
	bits := 0
	for i := 16 - lo.BitLen()/8; i < 16 && a[i] == b[i]; i++ {
		bits += 8
	}
	if i := 16 - lo.BitLen()/8 + bits/8; i < 16 {
		bits += mathbits.LeadingZeros8(a[i] ^ b[i])
	}
	p := netip.PrefixFrom(lo, bits)
	return p, p.Masked().Addr() == lo && LastAddr(p) == hi
}

// RangeToPrefixes is the fewest prefixes covering exactly lo..hi.
func RangeToPrefixes(lo, hi netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for lo.IsValid() && lo.Compare(hi) <= 0 {
		bits := lo.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(lo, bits-1).Masked()
			if p.Addr() != lo || LastAddr(p).Compare(hi) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(lo, bits)
		out = append(out, p)
		last := LastAddr(p)
		if last == maxAddr(lo.BitLen()) {
			break
		}
		lo = last.Next()
	}
	return out
}

// LastAddr is the last address of prefix p: its bits after the prefix's
// all ones.
func LastAddr(p netip.Prefix) netip.Addr {
	if !p.IsValid() {
		return netip.Addr{}
	}
	a := p.Masked().Addr()
	if a.Is4() {
		b := a.As4()
		v := binary.BigEndian.Uint32(b[:]) | uint32(uint64(1)<<(32-p.Bits())-1)
		binary.BigEndian.PutUint32(b[:], v)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	switch n := p.Bits(); {
	case n < 64:
		hi |= 1<<(64-n) - 1
		lo = ^uint64(0)
	case n < 128:
		lo |= 1<<(128-n) - 1
	}
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

func maxAddr(bits int) netip.Addr {
	if bits == 32 {
		return netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	var b [16]byte
	for i := range b {
		b[i] = 0xff
	}
	return netip.AddrFrom16(b)
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

// ICMPCutTypes are the ICMP (ip) or ICMPv6 (ip6) types whose boundaries
// cut every region's type range: conntrack treats them apart, or their
// senders use a fixed hop limit.
func ICMPCutTypes(fam string) []int {
	if fam == FamilyIP6 {
		return slices.Concat(icmp6New, icmp6NoCt, icmp6HL255, icmp6HL1)
	}
	return slices.Clone(icmp4New)
}

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
		for _, d := range ParseRegions(s) {
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

// OtherProto is the protocol number standing for every protocol no rule
// names (253: reserved for experiments, RFC 3692).
const OtherProto = 253

// NewClass is the region of proto n in family fam, any type, destination
// and port.
func NewClass(fam string, n uint8, other bool) Class {
	c := Class{Family: fam, Num: n, Proto: ProtoName(n), Other: other, TypeEnd: 255, PortEnd: 65535, SportEnd: 65535}
	if other {
		c.Proto = "other"
	}
	return c
}
