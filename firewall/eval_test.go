package firewall

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// Helpers to build rulesets by hand.

// input keeps the openings of one family at the input hook.
func input(open []Opening, fam string) []Opening {
	out := []Opening{}
	for _, o := range open {
		if o.Direction == HookInput && o.Family == fam {
			out = append(out, o)
		}
	}
	return out
}

func in4(port, end uint16, proto string) Opening {
	return Opening{Port: port, PortEnd: end, Proto: proto, Direction: HookInput, Family: FamilyIP}
}

func check(t *testing.T, got, want []Opening) {
	t.Helper()
	if len(want) == 0 {
		want = []Opening{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openings:\n got %+v\nwant %+v", got, want)
	}
}

func TestEvalJumpReturnAndGoto(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			accept(ctEstablished()),
			jump("screen"),
			accept(tcp(), dportRange(2000, 2002)),
			jump("services"),
			accept(tcp(), dport(8080)),
			goTo("last"),
			accept(tcp(), dport(3000)), // never reached: goto does not come back
		),
		regular("screen", drop(tcp(), dport(2000)), ret(), accept(tcp(), dport(2001))),
		regular("services", ret(tcp(), dport(8080)), accept(tcp(), dportRange(8000, 8100)), accept(udp(), dport(53))),
		regular("last", accept(tcp(), dport(4000))),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{
		in4(2001, 2002, "tcp"),
		in4(4000, 0, "tcp"),
		in4(8000, 8100, "tcp"),
		in4(53, 0, "udp"),
	})
	// An ip table says nothing about IPv6: no base chain there, so all open.
	check(t, input(OpenPorts(rs), FamilyIP6), []Opening{
		{Port: 0, PortEnd: 65535, Proto: "tcp", Direction: HookInput, Family: FamilyIP6},
		{Port: 0, PortEnd: 65535, Proto: "udp", Direction: HookInput, Family: FamilyIP6},
	})
}

func TestEvalEarlierBaseChainDropIsFinal(t *testing.T) {
	rs := &Ruleset{Tables: []Table{
		{Family: FamilyInet, Name: "late", Chains: []Chain{
			base("input", HookInput, 10, "drop", accept(tcp(), dport(22, 80, 443))),
		}},
		{Family: FamilyInet, Name: "early", Chains: []Chain{
			// accept here ends this base chain only; the later one still runs
			base("input", HookInput, -10, "accept", drop(tcp(), dport(80)), accept(tcp(), dport(22, 5000))),
		}},
		{Family: FamilyIP, Name: "same", Chains: []Chain{
			base("input", HookInput, 10, "accept", reject(tcp(), dport(443))),
		}},
	}}
	open := OpenPorts(rs)
	check(t, input(open, FamilyIP), []Opening{in4(22, 0, "tcp")})
	check(t, input(open, FamilyIP6), []Opening{
		{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP6},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP6},
	})
}

func TestEvalSetsRangesAndMerging(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyInet, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			accept(tcp(), Cond{Kind: CondDport, Ports: []PortRange{{100, 199}, {200, 200}, {300, 310}}}),
			accept(udp(), Cond{Kind: CondDport, Ports: []PortRange{{1, 65535}}}),
			drop(udp(), dport(53)), // shadowed: the accept above wins
			accept(tcp(), Cond{Kind: CondDport, Negate: true, Ports: []PortRange{{0, 1023}}}, Cond{Kind: CondDport, Ports: []PortRange{{1000, 2000}}}),
		),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{
		in4(100, 200, "tcp"),
		in4(300, 310, "tcp"),
		in4(1024, 2000, "tcp"),
		in4(1, 65535, "udp"),
	})
}

func TestEvalSourceRestriction(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			accept(saddr("10.0.0.0/8"), tcp(), dport(22)),
			drop(saddr("192.0.2.0/24"), tcp(), dport(80)),
			accept(tcp(), dport(80)),
			accept(saddr("127.0.0.0/8"), tcp(), dport(9)), // loopback is never an outside source
			drop(saddr("10.1.0.0/16")),
			accept(saddr("10.0.0.0/8"), tcp(), dport(443)),
		),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{
		{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.0.0.0/8"},
		// Any other source reaches 80; From is only set when the rest of the world does not.
		in4(80, 0, "tcp"),
		// 10.0.0.0/8 minus 10.1.0.0/16, exactly.
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.0.0.0/16"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.2.0.0/15"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.4.0.0/14"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.8.0.0/13"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.16.0.0/12"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.32.0.0/11"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.64.0.0/10"},
		{Port: 443, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "10.128.0.0/9"},
	})
}

func TestEvalUndecidable(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			// a rate-limited log changes no verdict
			log(limit()),
			jump("logdeny", limit()),
			accept(tcp(), dport(22)),
			// a rate limit in front of a drop makes the port uncertain
			drop(tcp(), dport(2222), limit()),
			accept(tcp(), dport(2222)),
			// a limit before an accept of a port the policy drops: uncertain
			accept(tcp(), dport(3000), limit()),
			// a limit in front of a drop of a port the policy drops anyway: not uncertain
			drop(tcp(), dport(4000), limit()),
			// the same verdict on both branches
			accept(tcp(), dport(5000), limit()),
			accept(tcp(), dport(5000)),
		),
		regular("logdeny", log(limit()), ret()),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{
		in4(22, 0, "tcp"),
		{Port: 2222, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		{Port: 3000, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		in4(5000, 0, "tcp"),
	})
}

func TestEvalRtMatchNeverDecides(t *testing.T) {
	rt := Cond{Kind: CondNever, Reason: "xt rt match: the packet has no routing header"}
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP6, Name: "filter", Chains: []Chain{
		base("INPUT", HookInput, 0, "drop", jump("ufw6-before-input")),
		regular("ufw6-before-input",
			drop(rt),
			// negated, it still never matches: the match fails before inversion
			drop(Cond{Kind: CondNever, Negate: true}),
			accept(tcp(), dport(22)),
		),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP6), []Opening{
		{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP6},
	})
}

func TestEvalConditions(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyInet, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			accept(Cond{Kind: CondIifname, Names: []string{"lo"}}),
			accept(Cond{Kind: CondOifname, Names: []string{"eth0"}, Negate: true}), // no oif at input
			accept(Cond{Kind: CondAddrType, Addr: "daddr", Bits: 1 << rtnMulticast}),
			drop(Cond{Kind: CondAddrType, Addr: "daddr", Bits: 1 << rtnLocal, Negate: true}),
			drop(Cond{Kind: CondCtState, Bits: ctStateInvalid}),
			accept(Cond{Kind: CondNFProto, Family: FamilyIP6}, tcp(), dport(10)),
			accept(Cond{Kind: CondDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("224.0.0.251/32")}}, udp(), dport(5353)),
			accept(Cond{Kind: CondTCPFlags, Mask: 0x17, Value: 0x02}, tcp(), dport(11)),
			accept(Cond{Kind: CondCtState, Bits: ctStateNew}, tcp(), dport(12)),
			accept(Cond{Kind: CondIifname, Names: []string{"eth*"}}, tcp(), dport(13)),
			accept(Cond{Kind: CondPktType, Bits: 1 << packetHost}, tcp(), dport(14)),
		),
	}}}}
	open := OpenPorts(rs)
	check(t, input(open, FamilyIP), []Opening{
		in4(11, 12, "tcp"),
		{Port: 13, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		in4(14, 0, "tcp"),
	})
	check(t, input(open, FamilyIP6)[:1], []Opening{{Port: 10, PortEnd: 12, Proto: "tcp", Direction: HookInput, Family: FamilyIP6}})
}

func TestEvalVMapAndUnknownChain(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop",
			Rule{Conds: []Cond{tcp()}, VMap: []VMapEntry{
				{Cond: dport(22), Verdict: Verdict{Kind: VerdictAccept}},
				{Cond: dport(23), Verdict: Verdict{Kind: VerdictJump, Target: "broken"}},
				{Cond: dportRange(80, 81), Verdict: Verdict{Kind: VerdictAccept}},
			}},
		),
		{Name: "broken", Unknown: "rules not listed"},
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{
		in4(22, 0, "tcp"),
		{Port: 23, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		in4(80, 81, "tcp"),
	})
}

func TestEvalForward(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "filter", Chains: []Chain{
		base("FORWARD", HookForward, 0, "drop",
			// for forwarding the destination is not local
			accept(Cond{Kind: CondAddrType, Addr: "daddr", Bits: 1 << rtnLocal}, tcp(), dport(1)),
			accept(Cond{Kind: CondAddrType, Addr: "daddr", Bits: 1 << rtnUnicast}, tcp(), dport(2)),
			accept(Cond{Kind: CondOifname, Names: []string{"docker0"}}, tcp(), dport(3)),
		),
	}}}}
	var fwd []Opening
	for _, o := range OpenPorts(rs) {
		if o.Direction == HookForward && o.Family == FamilyIP {
			fwd = append(fwd, o)
		}
	}
	check(t, fwd, []Opening{
		{Port: 2, Proto: "tcp", Direction: HookForward, Family: FamilyIP},
		{Port: 3, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Uncertain: true},
	})
}

func TestEvalManyPortsCheap(t *testing.T) {
	// 500 distinct single ports across chains: evaluation is per interval.
	var rules []Rule
	for p := uint16(1000); p < 2000; p += 2 {
		rules = append(rules, accept(tcp(), dport(p)))
	}
	rs := &Ruleset{Tables: []Table{{Family: FamilyInet, Name: "t", Chains: []Chain{base("input", HookInput, 0, "drop", rules...)}}}}
	open := input(OpenPorts(rs), FamilyIP)
	if len(open) != 500 {
		t.Fatalf("got %d openings, want 500", len(open))
	}
}

func TestKind(t *testing.T) {
	ufw := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "filter", Chains: []Chain{
		base("INPUT", HookInput, 0, "drop", jump("ufw-before-input")), regular("ufw-before-input"),
	}}}}
	native := &Ruleset{Tables: []Table{{Family: FamilyInet, Name: "host", Chains: []Chain{base("input", HookInput, 0, "drop")}}}}
	plain := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "filter", Chains: []Chain{base("INPUT", HookInput, 0, "accept")}}}}
	none := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "nat", Chains: []Chain{base("POSTROUTING", "postrouting", 100, "accept")}}}}
	fwd := &Ruleset{Tables: []Table{{Family: FamilyInet, Name: "firewalld"}}}
	for _, c := range []struct {
		rs     *Ruleset
		legacy []string
		want   string
		err    string
	}{
		{ufw, nil, KindIptablesNft, ""},
		{plain, nil, KindIptablesNft, ""},
		{native, nil, KindNftables, ""},
		{none, nil, KindNone, ""},
		{&Ruleset{}, nil, KindNone, ""},
		{fwd, nil, "", "firewalld"},
		{native, []string{"filter"}, "", "iptables-legacy"},
	} {
		got, err := Kind(c.rs, c.legacy)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("Kind error = %v, want one naming %q and saying nothing was changed", err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Kind = %q, %v; want %q", got, err, c.want)
		}
	}
}

func TestEvalBlocklistIsOneGroup(t *testing.T) {
	// Thousands of blocked prefixes in one set cost one evaluation, and the
	// openings name the exact complement only where the world is closed.
	var ps []string
	for i := 0; i < 4000; i++ {
		ps = append(ps, netip.AddrFrom4([4]byte{100, byte(64 + i/256), byte(i % 256), 0}).String()+"/24")
	}
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		base("input", HookInput, 0, "drop", drop(saddr(ps...)), accept(tcp(), dport(22))),
	}}}}
	check(t, input(OpenPorts(rs), FamilyIP), []Opening{in4(22, 0, "tcp")})
}
