// This file holds the traffic classes beyond unicast TCP and UDP by port:
// ICMP and ICMPv6 by type, other protocols by number, broadcast and
// multicast services, and how flip.drop and flip.widen spell them. The
// evaluator judges each (eval.Class); config reads the spellings.

package vocab

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// The IP families a class is sent in (the firewall's table families of
// the same names).
const (
	FamilyIP  = "ip"
	FamilyIP6 = "ip6"
)

// What a class's packet is sent to besides one of the node's own
// addresses (Class.Cast): the kernel's packet types (meta pkttype).
const (
	PacketBroadcast = 1
	PacketMulticast = 2
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
	const b, m = PacketBroadcast, PacketMulticast
	var out []Class
	for _, fam := range []string{FamilyIP, FamilyIP6} {
		v6 := fam == FamilyIP6
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

// Spelling is how flip.drop and flip.widen name the class, the way
// PortText begins it: NAME/PROTO ("echo-request/icmp",
// "mdns/udp", "esp/esp").
func (c Class) Spelling() string { return c.Name + "/" + c.Proto }

// ClassSpellings are every class's spelling, each once, in Classes' order.
func ClassSpellings() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range Classes() {
		if s := c.Spelling(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// ParseClass reads a traffic class as flip.drop and flip.widen name it:
// NAME/PROTO (a Spelling: "echo-request/icmp" is IPv4's ping,
// "echo-request/icmpv6" IPv6's), or NAME alone for every family's
// ("echo-request", "mdns", "esp"). It returns the spellings s names; an
// error lists the accepted ones.
func ParseClass(s string) ([]string, error) {
	var out []string
	for _, sp := range ClassSpellings() {
		if name, _, _ := strings.Cut(sp, "/"); sp == s || name == s {
			out = append(out, sp)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q is not a traffic class: want NAME/PROTO or NAME, one of %s", s, strings.Join(ClassSpellings(), ", "))
	}
	return out, nil
}
