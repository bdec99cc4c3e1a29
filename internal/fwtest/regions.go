// This file holds the probes of regions of packets (firewall.Class): one
// packet of a region, spelled as flip.drop spells it, from each source,
// and whether an opening of the preview or the probe holds it.

package fwtest

import (
	"fmt"
	"net/netip"

	"adoption/firewall"
	"adoption/vocab"
)

// ProbeRegions are the regions the kernel tests send one packet of (its
// first type, destination and port): what a host needs, tunnels and
// failover, broadcast and multicast services.
var ProbeRegions = []string{
	"ip icmp type 8 to node", "ip udp to 255.255.255.255 dport 67", "ip udp to 224.0.0.251 dport 5353", "ip vrrp to 224.0.0.18",
	"ip6 icmpv6 type 128 to node", "ip6 icmpv6 type 134 to ff02::1", "ip6 icmpv6 type 135 to node", "ip6 icmpv6 type 136 to node",
	"ip6 icmpv6 type 130 to ff02::1", "ip6 udp to ff02::1:2 dport 547", "ip6 udp to ff02::fb dport 5353", "ip6 vrrp to ff02::12",
	"ip esp to node", "ip gre to node", "ip sctp to node", "ip6 esp to node", "ip6 gre to node", "ip6 sctp to node",
}

// RegionProbes are one probe of each region spelled in regions (one
// family each) from each source of its family.
func RegionProbes(regions, sources []string) []ClassProbe {
	var out []ClassProbe
	for _, r := range regions {
		cs, err := vocab.ParseRegion(r)
		if err != nil || len(cs) != 1 {
			panic(fmt.Sprintf("fwtest: region %q: %v (want one of one family)", r, err))
		}
		c := cs[0]
		for _, s := range sources {
			if netip.MustParseAddr(s).Is4() != (c.Family == firewall.FamilyIP) {
				continue
			}
			p := ClassProbe{Name: r, Src: s, Proto: c.Num, Type: c.Type, Port: c.Port, HopLimit: c.HopLimit()}
			if c.Dst.IsValid() {
				p.Dst = c.Dst.String()
			}
			out = append(out, p)
		}
	}
	return out
}

// Holds reports whether opening o's region (its Class spelling) and
// source region hold probe pr.
func Holds(o firewall.Opening, pr ClassProbe) bool {
	if o.Class == "" {
		return false
	}
	pc, _ := vocab.ClassByName(o.Family, pr.Name)
	oc, ok := vocab.ClassByName(o.Family, o.Class)
	if !ok || pc.Family != o.Family || !pc.Within(oc) {
		return false
	}
	if o.From == "" {
		return true
	}
	pfx, err := netip.ParsePrefix(o.From)
	return err == nil && pfx.Contains(netip.MustParseAddr(pr.Src))
}
