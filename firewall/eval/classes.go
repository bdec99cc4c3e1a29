// This file holds the traffic classes beyond unicast TCP and UDP by port:
// ICMP and ICMPv6 by type, other protocols by number, broadcast and
// multicast services. Each is one synthetic packet per family, judged by
// source region at the input hook, the way OpenPortsOn judges a port.

package eval

import (
	"net/netip"
	"sort"

	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// Class is one kind of new packet from outside to the node.
type Class struct {
	// Name is what the preview and the derived rule call it
	// ("echo-request", "esp", "mdns").
	Name   string
	Family string
	// Proto is the protocol's name in an Opening ("icmp", "icmpv6",
	// "esp", "gre", "vrrp", "sctp", "udp"), Num its number.
	Proto string
	Num   uint8
	// Type is the ICMP or ICMPv6 type (code 0).
	Type uint8
	// Port is the UDP port of a broadcast or multicast service.
	Port uint16
	// Dst is the broadcast address or multicast group the packet is sent
	// to (Cast says which); invalid: one of the node's own addresses.
	Dst  netip.Addr
	Cast uint8
	// HopLimit is the TTL or hop limit the protocol sends with (255 for
	// neighbour discovery and VRRP, 1 for MLD); 0: any.
	HopLimit uint8
	// Untracked: conntrack does not track it (neighbour discovery, MLD).
	Untracked bool
}

// Classes are the traffic classes the evaluator judges besides TCP and UDP
// by port, per family: what a host needs (ping, IPv6's neighbour
// discovery, router adverts and MLD), tunnels and failover (ESP, GRE, VRRP,
// SCTP), and the broadcast and multicast services a node may serve (a DHCP
// server, mDNS).
func Classes() []Class {
	mc := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	const b, m = firewall.PacketBroadcast, firewall.PacketMulticast
	var out []Class
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		v6 := fam == firewall.FamilyIP6
		if !v6 {
			out = append(out,
				Class{Name: "echo-request", Proto: "icmp", Num: unix.IPPROTO_ICMP, Type: 8},
				Class{Name: "dhcp-server", Proto: "udp", Num: unix.IPPROTO_UDP, Port: 67, Dst: mc("255.255.255.255"), Cast: b},
				Class{Name: "mdns", Proto: "udp", Num: unix.IPPROTO_UDP, Port: 5353, Dst: mc("224.0.0.251"), Cast: m},
				Class{Name: "vrrp", Proto: "vrrp", Num: 112, Dst: mc("224.0.0.18"), Cast: m, HopLimit: 255},
			)
		} else {
			out = append(out,
				Class{Name: "echo-request", Proto: "icmpv6", Num: unix.IPPROTO_ICMPV6, Type: 128},
				Class{Name: "nd-router-advert", Proto: "icmpv6", Num: unix.IPPROTO_ICMPV6, Type: 134, Dst: mc("ff02::1"), Cast: m, HopLimit: 255, Untracked: true},
				Class{Name: "nd-neighbor-solicit", Proto: "icmpv6", Num: unix.IPPROTO_ICMPV6, Type: 135, HopLimit: 255, Untracked: true},
				Class{Name: "nd-neighbor-advert", Proto: "icmpv6", Num: unix.IPPROTO_ICMPV6, Type: 136, HopLimit: 255, Untracked: true},
				Class{Name: "mld-listener-query", Proto: "icmpv6", Num: unix.IPPROTO_ICMPV6, Type: 130, Dst: mc("ff02::1"), Cast: m, HopLimit: 1, Untracked: true},
				Class{Name: "dhcp-server", Proto: "udp", Num: unix.IPPROTO_UDP, Port: 547, Dst: mc("ff02::1:2"), Cast: m},
				Class{Name: "mdns", Proto: "udp", Num: unix.IPPROTO_UDP, Port: 5353, Dst: mc("ff02::fb"), Cast: m},
				Class{Name: "vrrp", Proto: "vrrp", Num: 112, Dst: mc("ff02::12"), Cast: m, HopLimit: 255},
			)
		}
		out = append(out,
			Class{Name: "esp", Proto: "esp", Num: unix.IPPROTO_ESP},
			Class{Name: "gre", Proto: "gre", Num: unix.IPPROTO_GRE},
			Class{Name: "sctp", Proto: "sctp", Num: unix.IPPROTO_SCTP},
		)
		for i := range out {
			if out[i].Family == "" {
				out[i].Family = fam
			}
		}
	}
	return out
}

// ClassByName is the class of family fam called name.
func ClassByName(fam, name string) (Class, bool) {
	for _, c := range Classes() {
		if c.Family == fam && c.Name == name {
			return c, true
		}
	}
	return Class{}, false
}

// ICMP reports whether the class is an ICMP or ICMPv6 type.
func (c Class) ICMP() bool { return c.Num == unix.IPPROTO_ICMP || c.Num == unix.IPPROTO_ICMPV6 }

// packet is the class's synthetic packet, its source aside.
func (c Class) packet() Packet {
	return Packet{Family: c.Family, Proto: c.Num, Port: c.Port, OrigPort: c.Port, ICMPType: c.Type, Dst: c.Dst, Cast: c.Cast,
		HopLimit: c.HopLimit, Untracked: c.Untracked}
}

// Opening is the class's opening from sources from (empty: any).
func (c Class) Opening(from string) firewall.Opening {
	o := firewall.Opening{Port: c.Port, Proto: c.Proto, Direction: firewall.HookInput, From: from, Family: c.Family, Class: c.Name}
	if c.Dst.IsValid() {
		o.To = c.Dst.String()
	}
	return o
}

// Class is the region of sources from which a packet of class c reaches
// the node (the input hook).
func (x *Reacher) Class(c Class) SourceReach {
	f := x.family(c.Family)
	x.e.bounds = portBounds(x.rs, c.Family, c.Num, false)
	return x.region(f, firewall.HookInput, c.packet())
}

// ClassOpenings are the openings of every class on node: one with an
// empty From when any other source reaches it (Uncertain when only under a
// condition the evaluator cannot decide), else one per prefix of the
// region that does. The probe lists them beside OpenPortsOn's.
func ClassOpenings(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	x := NewReacher(rs, node)
	out := []firewall.Opening{}
	for _, c := range Classes() {
		r := x.Class(c)
		if r.Any {
			o := c.Opening("")
			o.Uncertain = r.Unsure
			out = append(out, o)
			continue
		}
		for _, p := range r.Only {
			o := c.Opening(p.String())
			o.Uncertain = r.Unsure
			out = append(out, o)
		}
	}
	return out
}

// Passage is how a class's packet from one source region fares under one
// ruleset: it passes (surely, or only under a condition the evaluator
// cannot decide: Unsure) or not.
type Passage struct {
	Open, Unsure bool
}

// ClassRegion is one source region of a class (From empty: any source the
// rulesets do not single out) and how its packets fare before and after.
type ClassRegion struct {
	Class         Class
	From          string
	Before, After Passage
}

// CompareClasses judges every class before and after on node, per source
// region cut by the source prefixes of both rulesets: one region for any
// other source, and one per prefix of the regions that fare otherwise. A
// class that passes in neither is left out.
func CompareClasses(before, after *firewall.Ruleset, node firewall.Node) []ClassRegion {
	both := &firewall.Ruleset{Tables: append(append([]firewall.Table(nil), before.Tables...), after.Tables...)}
	eb, ea := compile(before).Evaluator(), compile(after).Evaluator()
	var out []ClassRegion
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		sb, sa := stagesOf(before, fam), stagesOf(after, fam)
		atoms := sourceAtoms(both, fam)
		groups, index := groupAtoms(both, atoms), atomIndex(atoms)
		own := node.Own(fam)
		for _, c := range Classes() {
			if c.Family != fam {
				continue
			}
			eb.bounds, ea.bounds = portBounds(before, fam, c.Num, false), portBounds(after, fam, c.Num, false)
			pass := func(res map[path]Result) Passage {
				r := reachOf(res, firewall.HookInput)
				return Passage{Open: r.Accept, Unsure: r.Accept && r.drop}
			}
			var other [2]Passage
			regions := map[[2]Passage][]Atom{}
			var order [][2]Passage
			for gi, g := range groups {
				if gi == 1 && !eb.sawSource && !ea.sawSource {
					break
				}
				eb.sawSource, ea.sawSource = false, false
				pkt := c.packet()
				pkt.Src, pkt.node, pkt.own = g[0], &node, own
				k := [2]Passage{pass(eb.client(&sb, pkt)), pass(ea.client(&sa, pkt))}
				if gi == 0 {
					other = k
					continue
				}
				if k == other {
					continue
				}
				if regions[k] == nil {
					order = append(order, k)
				}
				regions[k] = append(regions[k], g...)
			}
			if other[0].Open || other[1].Open {
				out = append(out, ClassRegion{Class: c, Before: other[0], After: other[1]})
			}
			for _, k := range order {
				if !k[0].Open && !k[1].Open {
					continue
				}
				for _, p := range atomPrefixes(regions[k], atoms, index) {
					out = append(out, ClassRegion{Class: c, From: p.String(), Before: k[0], After: k[1]})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Class.Family != b.Class.Family || a.Class.Name != b.Class.Name {
			return false
		}
		return fromLess(a.From, b.From)
	})
	return out
}
