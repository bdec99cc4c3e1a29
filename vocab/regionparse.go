// This file reads regions as flip.drop and flip.widen spell them
// ("ip udp to 239.255.255.250 dport 1900", "icmp type 13"), and the class
// names those keys took before regions: the one parser of the notation
// that Class.Spelling writes.

package vocab

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// legacyClasses are the class names flip.drop and flip.widen took before
// regions, and the regions they name.
var legacyClasses = map[string][]string{
	"echo-request":        {"ip icmp type 8", "ip6 icmpv6 type 128"},
	"dhcp-server":         {"ip udp to 255.255.255.255 dport 67", "ip6 udp to ff02::1:2 dport 547"},
	"mdns":                {"ip udp to 224.0.0.251 dport 5353", "ip6 udp to ff02::fb dport 5353"},
	"vrrp":                {"ip vrrp to 224.0.0.18", "ip6 vrrp to ff02::12"},
	"nd-router-advert":    {"ip6 icmpv6 type 134"},
	"nd-neighbor-solicit": {"ip6 icmpv6 type 135"},
	"nd-neighbor-advert":  {"ip6 icmpv6 type 136"},
	"mld-listener-query":  {"ip6 icmpv6 type 130"},
	"esp":                 {"ip esp", "ip6 esp"},
	"gre":                 {"ip gre", "ip6 gre"},
	"sctp":                {"ip sctp", "ip6 sctp"},
}

// ParseClass reads a region as flip.drop and flip.widen name it
// ("ip udp to 239.255.255.250 dport 1900", "ip6 icmpv6 type 133",
// "icmp type 13": without a family, every family it can be), or a class
// name from before regions ("echo-request", "mdns/udp"). It returns the
// spellings of the regions s names; an error says what it expects.
func ParseClass(s string) ([]string, error) {
	if rs, ok := legacy(s); ok {
		return rs, nil
	}
	cs, err := ParseRegion(s)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Spelling()
	}
	return out, nil
}

func legacy(s string) ([]string, bool) {
	name, proto, slash := strings.Cut(s, "/")
	rs, ok := legacyClasses[name]
	if !ok {
		return nil, false
	}
	if !slash {
		return rs, true
	}
	var out []string
	for _, r := range rs {
		f := strings.Fields(r)
		if f[1] == proto {
			out = append(out, r)
		}
	}
	return out, len(out) > 0
}

// ParseRegions is ParseClass's regions of a spelling it accepted.
func ParseRegions(s string) []Class {
	if rs, ok := legacy(s); ok {
		var out []Class
		for _, r := range rs {
			cs, _ := ParseRegion(r)
			out = append(out, cs...)
		}
		return out
	}
	cs, _ := ParseRegion(s)
	return cs
}

// ClassByName is the region of family fam spelled name (a Spelling, or a
// class name from before regions naming one region of fam).
func ClassByName(fam, name string) (Class, bool) {
	for _, c := range ParseRegions(name) {
		if c.Family == fam {
			return c, true
		}
	}
	return Class{}, false
}

const regionSyntax = `want "[ip|ip6] PROTO [type T[-U]] [to node|ADDR|PREFIX|ADDR-ADDR] [sport P[-Q]] [dport P[-Q]]" (PROTO a name such as icmp, icmpv6, udp, esp, or a number, or "proto other"), or one of ` +
	"echo-request, dhcp-server, mdns, vrrp, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, mld-listener-query, esp, gre, sctp"

// ParseRegion reads a region's spelling: one region per family it names.
func ParseRegion(s string) ([]Class, error) {
	bad := func(why string) ([]Class, error) {
		return nil, fmt.Errorf("%q is not a region of packets: %s; %s", s, why, regionSyntax)
	}
	f := strings.Fields(s)
	fams := []string{FamilyIP, FamilyIP6}
	if len(f) > 0 && (f[0] == FamilyIP || f[0] == FamilyIP6) {
		fams, f = []string{f[0]}, f[1:]
	}
	if len(f) == 0 {
		return bad("no protocol")
	}
	var n uint8
	other := false
	switch {
	case f[0] == "proto" && len(f) > 1 && f[1] == "other":
		n, other, f = OtherProto, true, f[2:]
	default:
		v, ok := protoNames[f[0]]
		if !ok {
			x, err := strconv.ParseUint(f[0], 10, 8)
			if err != nil {
				return bad(fmt.Sprintf("unknown protocol %q", f[0]))
			}
			v = uint8(x)
		}
		n, f = v, f[1:]
	}
	// Without a family, icmp is IPv4's and icmpv6 IPv6's ("ip6 icmp" is
	// ICMP for IPv4 carried by IPv6: a protocol like any other).
	switch {
	case len(fams) == 2 && n == unix.IPPROTO_ICMP:
		fams = []string{FamilyIP}
	case len(fams) == 2 && n == unix.IPPROTO_ICMPV6:
		fams = []string{FamilyIP6}
	}
	c := NewClass("", n, other)
	icmp := fams[0] == FamilyIP && n == unix.IPPROTO_ICMP || fams[0] == FamilyIP6 && n == unix.IPPROTO_ICMPV6
	for len(f) > 0 {
		if len(f) < 2 {
			return bad(fmt.Sprintf("%q wants a value", f[0]))
		}
		k, v := f[0], f[1]
		f = f[2:]
		switch k {
		case "type":
			if !icmp {
				return bad("a type is for icmp and icmpv6")
			}
			lo, hi, err := parseSpan(v, 255)
			if err != nil {
				return bad("type " + err.Error())
			}
			c.Type, c.TypeEnd = uint8(lo), uint8(hi)
		case "dport", "sport":
			if !PortProto(n) {
				return bad("a port is for tcp, udp, dccp, sctp and udplite")
			}
			lo, hi, err := parseSpan(v, 65535)
			if err != nil {
				return bad(k + " " + err.Error())
			}
			if k == "dport" {
				c.Port, c.PortEnd = uint16(lo), uint16(hi)
			} else {
				c.Sport, c.SportEnd = uint16(lo), uint16(hi)
			}
		case "to":
			if v == "node" {
				c.Own = true
				break
			}
			lo, hi, err := parseAddrRange(v)
			if err != nil {
				return bad(err.Error())
			}
			c.Dst, c.DstEnd = lo, hi
			fam := FamilyIP6
			if lo.Is4() {
				fam = FamilyIP
			}
			if !slices.Contains(fams, fam) {
				return bad(fmt.Sprintf("%s is not an address of %s", v, strings.Join(fams, " or ")))
			}
			fams = []string{fam}
		default:
			return bad(fmt.Sprintf("unknown word %q", k))
		}
	}
	if len(fams) == 0 {
		return bad("the family and the protocol disagree")
	}
	var out []Class
	for _, fam := range fams {
		x := c
		x.Family = fam
		out = append(out, x)
	}
	return out, nil
}

func parseSpan(s string, max int) (int, int, error) {
	a, b, rng := strings.Cut(s, "-")
	lo, err := strconv.Atoi(a)
	hi := lo
	if err == nil && rng {
		hi, err = strconv.Atoi(b)
	}
	if err != nil || lo < 0 || hi > max || lo > hi {
		return 0, 0, fmt.Errorf("%q is not N or N-M within 0-%d", s, max)
	}
	return lo, hi, nil
}

func parseAddrRange(s string) (netip.Addr, netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked().Addr(), LastAddr(p), nil
	}
	a, b, rng := strings.Cut(s, "-")
	lo, err := netip.ParseAddr(a)
	hi := lo
	if err == nil && rng {
		hi, err = netip.ParseAddr(b)
	}
	if err != nil || lo.Is4() != hi.Is4() || lo.Compare(hi) > 0 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%q is not an address, a prefix or ADDR-ADDR", s)
	}
	return lo, hi, nil
}
