package eval

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// routedNode has an uplink bridge br-wan (the NIC enslaved), libvirt's
// virbr0 and a Docker network's custom-named bridge behind it.
func routedNode() firewall.Node {
	return firewall.Node{Interfaces: []firewall.Interface{
		{Name: "lo", Loopback: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: "eth0", Master: "br-wan"},
		{Name: "br-wan", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("203.0.113.5/24")}},
		{Name: "virbr0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("192.168.122.1/24")}},
		{Name: "appnet0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.30.0.1/16")}},
	}, Forwarding: map[string]bool{firewall.FamilyIP: true, firewall.FamilyIP6: false}}
}

// Routed forwarding on a known node: each network behind it (not the
// uplink bridge) gets its openings, and a destination prefix the ruleset
// names is a region of its own.
func TestRoutedOnAKnownNode(t *testing.T) {
	fwd := fwtest.Base("forward", firewall.HookForward, 0, "drop",
		fwtest.Accept(fwtest.Tcp(), fwtest.Dport(5432, 6379)),
		fwtest.Accept(fwtest.Tcp(), fwtest.Dport(80), fwtest.Daddr("172.30.0.10/32")),
	)
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "filter", Chains: []firewall.Chain{fwd}}}}
	open := OpenPortsOn(rs, routedNode())
	got := map[string]bool{}
	for _, o := range open {
		if o.Direction != firewall.HookForward {
			continue
		}
		if !o.Routed() || o.Uncertain {
			t.Errorf("forward opening %+v: want routed and sure", o)
		}
		got[o.Via+" "+o.Proto+" "+portRange(o)] = true
	}
	for _, w := range []string{"192.168.122.0/24 tcp 5432", "192.168.122.0/24 tcp 6379", "172.30.0.0/16 tcp 5432", "172.30.0.0/16 tcp 6379",
		"172.30.0.10/32 tcp 80", "172.30.0.10/32 tcp 5432"} {
		if !got[w] {
			t.Errorf("no routed opening %q in %v", w, got)
		}
	}
	for k := range got {
		if k == "172.30.0.0/16 tcp 80" || k[:4] == "203." {
			t.Errorf("routed opening %q: to the uplink's network, or port 80 beyond 172.30.0.10", k)
		}
	}
	// Forwarding off: nothing routed.
	off := routedNode()
	off.Forwarding[firewall.FamilyIP] = false
	for _, o := range OpenPortsOn(rs, off) {
		if o.Direction == firewall.HookForward {
			t.Errorf("routed opening %+v on a node that does not forward", o)
		}
	}
}

func portRange(o firewall.Opening) string {
	if o.PortEnd != 0 && o.PortEnd != o.Port {
		return fmt.Sprintf("%d-%d", o.Port, o.PortEnd)
	}
	return fmt.Sprint(o.Port)
}

// EgressFrom: the bridges the found forward hook lets out (Docker's
// "-i docker0 ! -o docker0", libvirt's from its own network), and not one
// it lets out to its own bridge only.
func TestEgressFrom(t *testing.T) {
	iif := func(n string, neg bool) firewall.Cond {
		return firewall.Cond{Kind: firewall.CondIifname, Names: []string{n}, Negate: neg}
	}
	oif := func(n string, neg bool) firewall.Cond {
		return firewall.Cond{Kind: firewall.CondOifname, Names: []string{n}, Negate: neg}
	}
	fwd := fwtest.Base("FORWARD", firewall.HookForward, 0, "drop",
		fwtest.Accept(iif("docker0", false), oif("docker0", true)),
		fwtest.Accept(fwtest.Saddr("192.168.122.0/24"), iif("virbr0", false)),
		fwtest.Accept(iif("br-abc", false), oif("br-abc", false)),
	)
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{fwd}}}}
	got := EgressFrom(rs, firewall.FamilyIP)
	if len(got) != 2 || got[0] != "docker0" || got[1] != "virbr0" {
		t.Errorf("EgressFrom = %v, want [docker0 virbr0]", got)
	}
	// No ip6 chain: nothing decides, every interface named lets out.
	if got := EgressFrom(rs, firewall.FamilyIP6); len(got) != 3 {
		t.Errorf("EgressFrom ip6 = %v, want [br-abc docker0 virbr0]", got)
	}
}

// A rule whose jump can only come back (ufw's rate-limited logging) is no
// reason a packet's fate is undecided; a condition before a jump to a
// chain that may accept, or before a reject, is.
func TestUndecidedLeavesOutInertRules(t *testing.T) {
	cond := func(why string) firewall.Cond { return firewall.Cond{Kind: firewall.CondUndecidable, Reason: why} }
	logLimit := cond("limit rate 3/60s")
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Jump("not-local"),
			fwtest.Jump("user-limit", fwtest.Tcp(), fwtest.Dport(2222), cond("xt match recent rev 0")),
			fwtest.Jump("allow", fwtest.Udp(), cond("limit rate 5/second"))),
		fwtest.Regular("not-local", fwtest.Jump("logging-deny", logLimit), fwtest.Drop(cond("addrtype"))),
		fwtest.Regular("logging-deny", fwtest.Ret(logLimit), fwtest.Log(logLimit)),
		fwtest.Regular("user-limit", fwtest.Jump("logging-deny", logLimit), fwtest.Log(logLimit), fwtest.Reject()),
		fwtest.Regular("allow", fwtest.Accept()),
	}}}}
	for _, c := range []struct {
		proto string
		port  uint16
		want  string
	}{{"tcp", 80, "addrtype"}, {"tcp", 2222, "xt match recent rev 0; addrtype"}, {"udp", 53, "limit rate 5/second; addrtype"}} {
		if why := strings.Join(Undecided(rs, firewall.HookInput, firewall.FamilyIP, c.proto, c.port), "; "); why != c.want {
			t.Errorf("%d/%s: undecided %q, want %q", c.port, c.proto, why, c.want)
		}
	}
}

// A client from outside a node with two uplinks comes in by one of them:
// rules that tell the uplinks apart are read together, so a port the one
// accepts on every interface but the LAN's and the other on the LAN's is
// open surely, and one open on the LAN's alone only maybe.
func TestUplinksReadTogether(t *testing.T) {
	node := firewall.Node{Interfaces: []firewall.Interface{
		{Name: "lo", Loopback: true, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("203.0.113.5/24")}},
		{Name: "lan0", Addrs: []netip.Prefix{netip.MustParsePrefix("192.168.77.1/24")}},
	}, Forwarding: map[string]bool{firewall.FamilyIP: true}}
	iif := func(n string, neg bool) firewall.Cond {
		return firewall.Cond{Kind: firewall.CondIifname, Names: []string{n}, Negate: neg}
	}
	in := fwtest.Base("input", firewall.HookInput, 0, "drop",
		fwtest.Accept(iif("lan0", true), fwtest.Udp(), fwtest.Dport(6379)),
		fwtest.Accept(iif("lan0", false), fwtest.Udp(), fwtest.Dport(6379)),
		fwtest.Accept(iif("lan0", false), fwtest.Udp(), fwtest.Dport(443)),
	)
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{in}}}}
	got := map[uint16]firewall.Opening{}
	for _, o := range OpenPortsOn(rs, node) {
		if o.Direction == firewall.HookInput && o.Proto == "udp" && o.In == "" {
			got[o.Port] = o
		}
	}
	if o, ok := got[6379]; !ok || o.Uncertain || o.From != "" {
		t.Errorf("6379/udp, accepted on lan0 and on every other interface: %+v (found %v), want open to any source, surely", o, ok)
	}
	if o, ok := got[443]; !ok || !o.Uncertain {
		t.Errorf("443/udp, accepted on lan0 only: %+v (found %v), want open only maybe", o, ok)
	}
}

// An uplink a rule names as an input interface ("-i eth0 -o docker0
// -j ACCEPT") is no bridge whose egress the mesh carries, even where the
// forward hook lets everything out: its accept would open the networks
// behind the node to it.
func TestEgressFromIsNoUplink(t *testing.T) {
	iif := firewall.Cond{Kind: firewall.CondIifname, Names: []string{"eth0"}}
	oif := firewall.Cond{Kind: firewall.CondOifname, Names: []string{"docker0"}}
	br := firewall.Cond{Kind: firewall.CondIifname, Names: []string{"docker0"}}
	fwd := fwtest.Base("forward", firewall.HookForward, 0, "accept",
		fwtest.Accept(iif, oif, fwtest.Tcp(), fwtest.Dport(80)),
		fwtest.Accept(br),
	)
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{fwd}}}}
	if got := EgressFrom(rs, firewall.FamilyIP); fmt.Sprint(got) != "[docker0]" {
		t.Errorf("EgressFrom = %v, want [docker0]", got)
	}
}
