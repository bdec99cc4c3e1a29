package firewall

import (
	"net/netip"
	"testing"

	"adoption/vocab"
)

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
		p, _ := vocab.ParseRegion(probe)
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
