package firewall

import (
	"net/netip"
	"slices"
	"testing"
)

// A region reads back as it is spelled, names one region per family it
// can be, and is refused with the notation when it is no region.
func TestParseRegionRoundTrips(t *testing.T) {
	for _, s := range []string{"ip udp to 239.255.255.250 dport 1900", "ip6 icmpv6 type 133 to ff02::2", "ip icmp type 13-255 to node",
		"ip udp to 224.0.0.0-224.0.0.250 sport 67 dport 68", "ip6 proto other", "ip6 icmp"} {
		cs, err := ParseRegion(s)
		if err != nil || len(cs) != 1 || cs[0].Spelling() != s {
			t.Errorf("%q: %+v, %v", s, cs, err)
		}
	}
	if cs, _ := ParseClass("echo-request"); !slices.Equal(cs, []string{"ip icmp type 8", "ip6 icmpv6 type 128"}) {
		t.Errorf("the old name echo-request: %v", cs)
	}
	for _, bad := range []string{"ping", "icmp type 300", "ip6 udp to 10.0.0.1", "esp dport 1"} {
		if _, err := ParseClass(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The regions of a ruleset are cut where its rules tell packets apart:
// SSDP's group and port, the ICMP types it names; every packet of the
// family is in exactly one region beyond TCP and UDP to the node.
func TestClassesOfCutsByRules(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "filter", Chains: []Chain{{Name: "input", Rules: []Rule{
		{Conds: []Cond{{Kind: CondL4Proto, Protos: []int{17}}, {Kind: CondDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("239.255.255.250/32")}}, {Kind: CondDport, Ports: []PortRange{{From: 1900, To: 1900}}}}},
		{Conds: []Cond{{Kind: CondL4Proto, Protos: []int{1}}, {Kind: CondICMPType, Types: []int{3}}}},
	}}}}}}
	cs := ClassesOf(FamilyIP, []*Ruleset{rs}, nil)
	want := map[string]bool{"ip udp to 239.255.255.250 dport 1900": false, "ip icmp type 3 to node": false, "ip icmp type 13 to node": false, "ip proto other to node": false}
	for _, c := range cs {
		if _, ok := want[c.Spelling()]; ok {
			want[c.Spelling()] = true
		}
	}
	for s, ok := range want {
		if !ok {
			t.Errorf("no region %q", s)
		}
	}
	// Exactly one region holds each packet.
	for _, probe := range []string{"ip udp to 239.255.255.250 dport 1900", "ip icmp type 14 to node", "ip esp to 224.0.0.1", "ip udp to 255.255.255.255 sport 5 dport 9"} {
		p, _ := ParseRegion(probe)
		n := 0
		for _, c := range cs {
			q := p[0]
			if q.Num == 50 {
				q.Other = true
				q.Num = c.Num
			}
			if q.Within(c) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is in %d regions", probe, n)
		}
	}
	if m := MergeClasses(cs); len(m) >= len(cs) {
		t.Errorf("merging %d regions left %d", len(cs), len(m))
	}
}
