package eval

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Destination conditions decided against the node's own addresses, and
// DNATs to a port range, on model rulesets.

// node28 has an uplink (203.0.113.5/24, 2001:db8::5/64) and docker0
// (172.17.0.1/16), forwarding on.
func node28() firewall.Node {
	return firewall.Node{Interfaces: []firewall.Interface{
		{Name: "lo", Loopback: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("203.0.113.5/24"), netip.MustParsePrefix("2001:db8::5/64"), netip.MustParsePrefix("fe80::1/64")}},
		{Name: "docker0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16")}},
	}, Forwarding: map[string]bool{firewall.FamilyIP: true, firewall.FamilyIP6: true}}
}

func TestDestinationAgainstOwnAddresses(t *testing.T) {
	notDocker0 := firewall.Cond{Kind: firewall.CondIifname, Names: []string{"docker0"}, Negate: true}
	raw := firewall.Chain{Name: "PREROUTING", Hook: firewall.HookPrerouting, Priority: -300, Policy: "accept", Type: "filter",
		Rules: []firewall.Rule{fwtest.Drop(fwtest.Daddr("172.17.0.2/32"), notDocker0)}}
	rs := &firewall.Ruleset{Tables: []firewall.Table{
		{Family: firewall.FamilyIP, Name: "raw", Chains: []firewall.Chain{raw}},
		{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
			// every own address of the family: decided
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(80), fwtest.Daddr("203.0.113.0/24", "172.16.0.0/12", "2001:db8::/32")),
			// one of two: reached at that one only
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(81), fwtest.Daddr("203.0.113.5/32")),
			// none: never
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(82), fwtest.Daddr("198.51.100.0/24", "2001:db8:1::/48")),
			// a native set lookup on ip daddr, decoded to the same prefixes
			fwtest.Drop(fwtest.Tcp(), fwtest.Dport(83), fwtest.Daddr("172.17.0.2/32", "10.0.0.0/8")),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(83)),
		)}},
	}}
	open := OpenPortsOn(rs, node28())
	want := map[string]string{"22 ip": "open", "22 ip6": "open", "80 ip": "open", "80 ip6": "open", "81 ip": "open at 203.0.113.5", "82 ip": "", "82 ip6": "", "83 ip": "open", "83 ip6": "open"}
	for k, w := range want {
		var port uint16
		var fam string
		parts := strings.Fields(k)
		fam = parts[1]
		for _, c := range parts[0] {
			port = port*10 + uint16(c-'0')
		}
		got := ""
		for _, o := range fwtest.Find(open, firewall.HookInput, fam, "tcp", port) {
			got = "open"
			if o.Uncertain {
				got = "uncertain"
			}
			if o.To != "" {
				got += " at " + o.To
			}
		}
		if got != w {
			t.Errorf("%s/tcp %s: %q, want %q", parts[0], fam, got, w)
		}
	}

	// Sent to the container's address directly: the raw drop.
	if open, unc, why := RoutedTo(rs, node28(), netip.MustParseAddrPort("172.17.0.2:22"), "tcp"); open || unc {
		t.Errorf("routed to the container: open=%v uncertain=%v (%s), want dropped", open, unc, why)
	}
	// The zero Node knows no address: a specific destination stays undecided.
	for _, o := range OpenPorts(rs) {
		if o.Family == firewall.FamilyIP && o.Direction == firewall.HookInput && o.Proto == "tcp" && o.Port <= 22 && 22 <= firewall.PortEnd(o) && !o.Uncertain {
			t.Errorf("zero Node: 22/tcp certain %+v; want uncertain (the raw drop's destination is not known)", o)
		}
	}
}

func TestDNATPortRange(t *testing.T) {
	nat := func(t firewall.NATTarget) *firewall.Ruleset {
		return &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
			{Name: "pre", Hook: firewall.HookPrerouting, Priority: -100, Type: "nat", Policy: "accept", Rules: []firewall.Rule{
				{Conds: []firewall.Cond{fwtest.Tcp(), fwtest.DportRange(9000, 9010)}, Verdict: firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: &t}}}},
			fwtest.Base("fwd", firewall.HookForward, 0, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(8000, 9005))),
		}}}}
	}
	target := firewall.NATTarget{Addr: netip.MustParseAddr("172.17.0.2"), PortMin: 9003, PortMax: 9006}
	// Kept inside the range, the range's first outside: 9000-9003 and
	// 9007-9010 go to 9003 (dropped), 9004 and 9006 keep theirs (dropped),
	// 9005 keeps its port and is accepted.
	got := fwtest.Find(OpenPortsOn(nat(target), node28()), firewall.HookForward, firewall.FamilyIP, "tcp", 9005)
	if len(got) != 1 || got[0].Port != 9005 || firewall.PortEnd(got[0]) != 9005 || got[0].Uncertain || got[0].Via != "172.17.0.2:9005" {
		t.Errorf("9005 through a range that keeps it: %+v", got)
	}
	for _, o := range OpenPortsOn(nat(target), node28()) {
		if o.Direction == firewall.HookForward && !o.Routed() && o.Port != 9005 {
			t.Errorf("forward opening %+v; only 9005 reaches an accepted port", o)
		}
	}
	// At random: any port of 9003-9006 may be picked, 9005 is accepted and
	// the others not: every host port of the DNAT is uncertain, named.
	target.RandomPort = true
	open := fwtest.Find(OpenPortsOn(nat(target), node28()), firewall.HookForward, firewall.FamilyIP, "tcp", 9000)
	if len(open) != 1 || !open[0].Uncertain || !strings.Contains(open[0].Reason, "at random") || open[0].Via != "172.17.0.2:9003-9006" {
		t.Errorf("random port range: %+v; want uncertain, named, via the range", open)
	}
	// A forward hook that drops every port of the range (a mesh that does
	// not declare the published port): closed, so flip.drop clears it.
	rs := nat(target)
	rs.Tables[0].Chains[1].Rules = nil
	for _, o := range OpenPortsOn(rs, node28()) {
		if o.Direction == firewall.HookForward {
			t.Errorf("random port range, forward drops all: %+v open", o)
		}
	}
	// And one that accepts every port of it: surely open.
	rs.Tables[0].Chains[1].Rules = []firewall.Rule{fwtest.Accept(fwtest.Tcp(), fwtest.DportRange(9003, 9006))}
	open = fwtest.Find(OpenPortsOn(rs, node28()), firewall.HookForward, firewall.FamilyIP, "tcp", 9000)
	if len(open) != 1 || open[0].Uncertain || open[0].Port != 9000 || firewall.PortEnd(open[0]) != 9010 {
		t.Errorf("random port range, forward accepts all: %+v; want 9000-9010 open", open)
	}
}

// Docker publishing on one of the node's addresses ("-p 203.0.113.5:8080:80")
// DNATs only connections to it: the opening names that address, and the
// node's other address (docker0's) leads to its input, which drops 8080.
func TestDNATOnOneAddress(t *testing.T) {
	local := firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnLocal}
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "nat", Chains: []firewall.Chain{
		{Name: "PREROUTING", Hook: firewall.HookPrerouting, Priority: -100, Type: "nat", Policy: "accept", Rules: []firewall.Rule{fwtest.Jump("DOCKER", local)}},
		fwtest.Regular("DOCKER", firewall.Rule{Conds: []firewall.Cond{fwtest.Daddr("203.0.113.5/32"), fwtest.Tcp(), fwtest.Dport(8080)},
			Verdict: firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: &firewall.NATTarget{Addr: netip.MustParseAddr("172.17.0.2"), PortMin: 80, PortMax: 80}}}),
	}}, {Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))),
		fwtest.Base("FORWARD", firewall.HookForward, 0, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(80), fwtest.Daddr("172.17.0.2/32"))),
	}}}}
	open := OpenPortsOn(rs, node28())
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 8080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, To: "203.0.113.5", Via: "172.17.0.2:80"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP})
	for _, o := range open {
		if o.Family == firewall.FamilyIP && (o.Uncertain || o.Port <= 8080 && 8080 <= firewall.PortEnd(o) && o.To != "203.0.113.5") {
			t.Errorf("opening %+v; want 8080 only at 203.0.113.5, nothing uncertain", o)
		}
	}
}
