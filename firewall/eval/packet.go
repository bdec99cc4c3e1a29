// This file holds the synthetic packet and the tri-state logic of a
// condition: true, false, or undecided (a branch of the evaluation).

package eval

import (
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"adoption/firewall"
)

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
	// dst is the destination after a DNAT, or the address a routed packet
	// was sent to; invalid: one of the node's own addresses (prerouting,
	// input; firewall.Node.Own) or an unknown routed destination (forward).
	Dst  netip.Addr
	Dnat bool
	// ICMPType is the type of an ICMP (ip) or ICMPv6 (ip6) packet, code 0.
	ICMPType uint8
	// HopLimit is the packet's TTL or hop limit; 0: any (a client's, after
	// an unknown number of hops).
	HopLimit uint8
	// Cast is firewall.PacketBroadcast or PacketMulticast for a packet to
	// a broadcast address or a multicast group (Dst), delivered to the node
	// itself; 0: unicast.
	Cast uint8
	// Untracked: conntrack leaves the packet untracked (ICMPv6 neighbour
	// discovery and MLD): ct state untracked, not new.
	Untracked bool
	// Invalid: conntrack finds the packet invalid (an ICMP type that
	// cannot start a connection, sent unsolicited): ct state invalid.
	Invalid bool
	// Local: Dst is the node's own though not a unicast address the node
	// lists (its link-local address): delivered, not routed.
	Local bool
	// via names the region behind the node a routed packet stands for
	// (routedDest); "" for one sent to Dst alone.
	via string
	// oif is the output interface of a forwarded packet; "" unknown.
	oif string
	// iif is the input interface, when not one of the node's uplinks (a
	// container's egress, EgressFrom); "" for a client from outside.
	iif string
	// notIif, for a client from outside (iif ""), is the uplink it does
	// not come in by: the one a routed destination's network is on.
	notIif string
	node   *firewall.Node
	// own is node.Own(Family), read once per evaluation: the addresses
	// an invalid Dst stands for. Nil: not known.
	own []netip.Addr
}

// Tri is a condition's value for a packet: false, true, or unknown (the
// evaluation branches).
type Tri int

const (
	TriFalse Tri = iota
	TriTrue
	TriUnknown
)

// Cond is condition c's value for the packet.
func (p *Packet) Cond(c *firewall.Cond) Tri {
	var t Tri
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
	case firewall.CondDport, firewall.CondOrigDport, firewall.CondSport:
		if !portProto(p.Proto) {
			// The bytes a port match reads are another protocol's header.
			return TriUnknown
		}
	}
	switch c.Kind {
	case firewall.CondNFProto, firewall.CondL4Proto:
		// decided above
	case firewall.CondDport:
		t = boolTri(inPorts(c.Ports, p.Port))
	case firewall.CondOrigDport:
		t = boolTri(inPorts(c.Ports, p.OrigPort))
	case firewall.CondICMPType:
		if !p.isICMP() {
			return TriFalse
		}
		t = TriTrue
		if len(c.Types) > 0 {
			t = boolTri(slices.Contains(c.Types, int(p.ICMPType)))
		}
	case firewall.CondHopLimit:
		if p.HopLimit == 0 {
			return TriUnknown
		}
		switch c.Mask {
		case 0:
			t = boolTri(p.HopLimit == c.Value)
		case 1:
			t = boolTri(p.HopLimit != c.Value)
		case 2:
			t = boolTri(p.HopLimit < c.Value)
		default:
			t = boolTri(p.HopLimit > c.Value)
		}
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
		t = p.dstTri(c.Prefixes, p.Dst)
	case firewall.CondOrigDaddr:
		// The original destination is the one the client used: the
		// node's own address unless the packet was routed to Dst as sent.
		orig := netip.Addr{}
		if !p.Dnat {
			orig = p.Dst
		}
		t = p.dstTri(c.Prefixes, orig)
	case firewall.CondIifname:
		if p.iif != "" {
			t = namesTri(c.Names, []string{p.iif})
		} else if p.node.HasInterfaces() {
			t = namesTri(c.Names, slices.DeleteFunc(p.node.Uplinks(), func(u string) bool { return u == p.notIif }))
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
		switch {
		case p.Untracked:
			bits = firewall.CtStateUntracked
		case p.Invalid:
			bits = firewall.CtStateInvalid
		}
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
		switch {
		case c.Addr == "daddr" && p.Cast == firewall.PacketBroadcast:
			typ = firewall.RtnBroadcast
		case c.Addr == "daddr" && p.Cast == firewall.PacketMulticast:
			typ = firewall.RtnMulticast
		case c.Addr == "daddr" && (p.Hook == firewall.HookInput || p.Hook == firewall.HookPrerouting) && (!p.Dst.IsValid() || p.Local || p.node.Local(p.Dst)):
			typ = firewall.RtnLocal
		}
		t = boolTri(c.Bits&(1<<typ) != 0)
	case firewall.CondPktType:
		t = boolTri(c.Bits&(1<<p.Cast) != 0) // PacketHost is 0
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

// portProto reports whether protocol n has TCP's and UDP's ports (a port
// match means the same in it): TCP, UDP, DCCP, SCTP, UDP-Lite; 0 (a packet whose protocol no one set) counts as one.
func portProto(n uint8) bool {
	switch n {
	case 0, unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_DCCP, unix.IPPROTO_SCTP, unix.IPPROTO_UDPLITE:
		return true
	}
	return false
}

// isICMP reports whether the packet is ICMP of its family.
func (p *Packet) isICMP() bool {
	if p.Family == firewall.FamilyIP6 {
		return p.Proto == unix.IPPROTO_ICMPV6
	}
	return p.Proto == unix.IPPROTO_ICMP
}

func boolTri(b bool) Tri {
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

// dstTri decides a destination prefix condition for a packet to dst, or,
// when dst is invalid, to one of the node's own addresses: on a node whose
// addresses are known, true if the prefixes hold every one of them, false
// if none (Docker's "-d CONTAINER ! -i BRIDGE -j DROP" in raw prerouting
// for a client of the node), undecided if the client's choice of address
// decides it.
func (p *Packet) dstTri(ps []netip.Prefix, dst netip.Addr) Tri {
	if dst.IsValid() {
		return boolTri(inPrefixes(ps, dst))
	}
	if len(p.own) == 0 {
		return daddrTri(ps, p.Family)
	}
	hits := 0
	for _, a := range p.own {
		if inPrefixes(ps, a) {
			hits++
		}
	}
	switch hits {
	case 0:
		return TriFalse
	case len(p.own):
		return TriTrue
	}
	return TriUnknown
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	for _, q := range ps {
		if q.Contains(a) {
			return true
		}
	}
	return false
}

// daddrTri decides a destination prefix for a packet to a routable unicast
// address: special-purpose prefixes never hold it, a default prefix always
// does, any other one depends on which address the client picked.
func daddrTri(ps []netip.Prefix, fam string) Tri {
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
func ifnameTri(names []string) Tri {
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
func namesTri(pats, on []string) Tri {
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
