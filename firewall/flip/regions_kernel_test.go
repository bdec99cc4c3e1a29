package flip

// The regions of packets a fixed list of classes missed, judged by the
// comparison over the header space and checked against the kernel: real
// packets from a peer namespace, before and after a flip through the
// product's path.

import (
	"testing"

	"adoption/internal/fwtest"
)

// missedRegions are what a review found closing without a fate when the
// preview judged a list of classes: SSDP to its IPv4 and IPv6 groups
// (ufw's before-rules), an IPv6 router solicitation to ff02::2, a node
// information query (139), an unsolicited echo reply (129, which ufw6
// lets in before its INVALID drop), ICMP timestamp (13) and an
// unsolicited IPv4 echo reply (0).
var missedRegions = []string{
	"ip udp to 239.255.255.250 dport 1900", "ip6 udp to ff02::f dport 1900",
	"ip6 icmpv6 type 133 to ff02::2", "ip6 icmpv6 type 139 to node", "ip6 icmpv6 type 129 to node",
	"ip icmp type 13 to node", "ip icmp type 0 to node",
}

// On a ufw node, SSDP and the ICMPv6 types ufw6's before-rules accept
// pass before the flip and are kept after it (carried by the mesh's
// table: the echo reply before its invalid drop); what ufw drops (a node
// information query, ICMP timestamp) stays dropped; every fate agrees
// with the kernel.
func TestKernelUfwFlipKeepsMissedRegions(t *testing.T) {
	n := narrowNet(t)
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8080/udp")...)}
	spec.Drop = fwtest.Ports("9999/tcp")
	probes := fwtest.RegionProbes(missedRegions, []string{fwtest.PeerV4a, fwtest.PeerV6a})
	regionDifferential(t, n, probes, spec, "ufw node, regions a class list missed", []classWant{
		{"ip udp to 239.255.255.250 dport 1900", fwtest.PeerV4a, true}, {"ip6 udp to ff02::f dport 1900", fwtest.PeerV6a, true},
		{"ip6 icmpv6 type 133 to ff02::2", fwtest.PeerV6a, true}, {"ip6 icmpv6 type 129 to node", fwtest.PeerV6a, true},
		{"ip6 icmpv6 type 139 to node", fwtest.PeerV6a, false}, {"ip icmp type 13 to node", fwtest.PeerV4a, false}},
		func(after map[fwtest.ClassProbe]bool) {
			for pr, a := range after {
				if pr.Name == "ip udp to 239.255.255.250 dport 1900" && !a {
					t.Errorf("SSDP does not pass after the flip: %v", pr)
				}
			}
		})
}

// regionsFound is a native nftables node that accepts every ICMP packet
// by protocol, before its invalid drop, and ssh.
const regionsFound = `table inet found {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		meta l4proto icmp accept
		ct state invalid drop
		tcp dport 22 accept
	}
}
`

// Under a native "meta l4proto icmp accept", ICMP timestamp and an
// unsolicited echo reply pass before the flip and after it: the region
// is every ICMP type, carried whole; IPv6's ICMP, dropped before, stays
// dropped.
func TestKernelFlipKeepsICMPByProtocol(t *testing.T) {
	n := fwtest.NewNamedNet(t, "rg-", "rg", "1d")
	n.Nft(t, regionsFound)
	probes := fwtest.RegionProbes([]string{"ip udp to 239.255.255.250 dport 1900", "ip icmp type 13 to node", "ip icmp type 0 to node", "ip icmp type 8 to node", "ip6 icmpv6 type 129 to node"},
		[]string{fwtest.PeerV4a, fwtest.PeerV6a})
	regionDifferential(t, n, probes, MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}, "native node accepting ICMP by protocol", []classWant{
		{"ip icmp type 13 to node", fwtest.PeerV4a, true}, {"ip icmp type 0 to node", fwtest.PeerV4a, true},
		{"ip6 icmpv6 type 129 to node", fwtest.PeerV6a, false}},
		func(after map[fwtest.ClassProbe]bool) {
			for pr, a := range after {
				if (pr.Name == "ip icmp type 13 to node" || pr.Name == "ip icmp type 0 to node") && !a {
					t.Errorf("%v does not pass after the flip", pr)
				}
			}
		})
}
