package eval

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
)

// Helpers to build rulesets by hand.

// input keeps the openings of one family at the input hook.
func input(open []firewall.Opening, fam string) []firewall.Opening {
	out := []firewall.Opening{}
	for _, o := range open {
		if o.Direction == firewall.HookInput && o.Family == fam {
			out = append(out, o)
		}
	}
	return out
}

func in4(port, end uint16, proto string) firewall.Opening {
	return firewall.Opening{Port: port, PortEnd: end, Proto: proto, Direction: firewall.HookInput, Family: firewall.FamilyIP}
}

func check(t *testing.T, got, want []firewall.Opening) {
	t.Helper()
	if len(want) == 0 {
		want = []firewall.Opening{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openings:\n got %+v\nwant %+v", got, want)
	}
}

func TestEvalJumpReturnAndGoto(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.CtEstablished()),
			fwtest.Jump("screen"),
			fwtest.Accept(fwtest.Tcp(), fwtest.DportRange(2000, 2002)),
			fwtest.Jump("services"),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(8080)),
			fwtest.GoTo("last"),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(3000)), // never reached: goto does not come back
		),
		fwtest.Regular("screen", fwtest.Drop(fwtest.Tcp(), fwtest.Dport(2000)), fwtest.Ret(), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(2001))),
		fwtest.Regular("services", fwtest.Ret(fwtest.Tcp(), fwtest.Dport(8080)), fwtest.Accept(fwtest.Tcp(), fwtest.DportRange(8000, 8100)), fwtest.Accept(fwtest.Udp(), fwtest.Dport(53))),
		fwtest.Regular("last", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(4000))),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{
		in4(2001, 2002, "tcp"),
		in4(4000, 0, "tcp"),
		in4(8000, 8100, "tcp"),
		in4(53, 0, "udp"),
	})
	// An ip table says nothing about IPv6: no base chain there, so all open.
	check(t, input(OpenPorts(rs), firewall.FamilyIP6), []firewall.Opening{
		{Port: 0, PortEnd: 65535, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6},
		{Port: 0, PortEnd: 65535, Proto: "udp", Direction: firewall.HookInput, Family: firewall.FamilyIP6},
	})
}

func TestEvalEarlierBaseChainDropIsFinal(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{
		{Family: firewall.FamilyInet, Name: "late", Chains: []firewall.Chain{
			fwtest.Base("input", firewall.HookInput, 10, "drop", fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22, 80, 443))),
		}},
		{Family: firewall.FamilyInet, Name: "early", Chains: []firewall.Chain{
			// accept here ends this base chain only; the later one still runs
			fwtest.Base("input", firewall.HookInput, -10, "accept", fwtest.Drop(fwtest.Tcp(), fwtest.Dport(80)), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22, 5000))),
		}},
		{Family: firewall.FamilyIP, Name: "same", Chains: []firewall.Chain{
			fwtest.Base("input", firewall.HookInput, 10, "accept", fwtest.Reject(fwtest.Tcp(), fwtest.Dport(443))),
		}},
	}}
	open := OpenPorts(rs)
	check(t, input(open, firewall.FamilyIP), []firewall.Opening{in4(22, 0, "tcp")})
	check(t, input(open, firewall.FamilyIP6), []firewall.Opening{
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6},
	})
}

func TestEvalSetsRangesAndMerging(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.Tcp(), firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 100, To: 199}, {From: 200, To: 200}, {From: 300, To: 310}}}),
			fwtest.Accept(fwtest.Udp(), firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 1, To: 65535}}}),
			fwtest.Drop(fwtest.Udp(), fwtest.Dport(53)), // shadowed: the accept above wins
			fwtest.Accept(fwtest.Tcp(), firewall.Cond{Kind: firewall.CondDport, Negate: true, Ports: []firewall.PortRange{{From: 0, To: 1023}}}, firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 1000, To: 2000}}}),
		),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{
		in4(100, 200, "tcp"),
		in4(300, 310, "tcp"),
		in4(1024, 2000, "tcp"),
		in4(1, 65535, "udp"),
	})
}

func TestEvalSourceRestriction(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(fwtest.Saddr("10.0.0.0/8"), fwtest.Tcp(), fwtest.Dport(22)),
			fwtest.Drop(fwtest.Saddr("192.0.2.0/24"), fwtest.Tcp(), fwtest.Dport(80)),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(80)),
			fwtest.Accept(fwtest.Saddr("127.0.0.0/8"), fwtest.Tcp(), fwtest.Dport(9)), // loopback is never an outside source
			fwtest.Drop(fwtest.Saddr("10.1.0.0/16")),
			fwtest.Accept(fwtest.Saddr("10.0.0.0/8"), fwtest.Tcp(), fwtest.Dport(443)),
		),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.0.0.0/8"},
		// Any other source reaches 80; From is only set when the rest of the world does not.
		in4(80, 0, "tcp"),
		// 10.0.0.0/8 minus 10.1.0.0/16, exactly.
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.0.0.0/16"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.2.0.0/15"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.4.0.0/14"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.8.0.0/13"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.16.0.0/12"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.32.0.0/11"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.64.0.0/10"},
		{Port: 443, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "10.128.0.0/9"},
	})
}

func TestEvalUndecidable(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			// a rate-limited log changes no verdict
			fwtest.Log(fwtest.Limit()),
			fwtest.Jump("logdeny", fwtest.Limit()),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
			// a rate limit in front of a drop makes the port uncertain
			fwtest.Drop(fwtest.Tcp(), fwtest.Dport(2222), fwtest.Limit()),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(2222)),
			// a limit before an accept of a port the policy drops: uncertain
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(3000), fwtest.Limit()),
			// a limit in front of a drop of a port the policy drops anyway: not uncertain
			fwtest.Drop(fwtest.Tcp(), fwtest.Dport(4000), fwtest.Limit()),
			// the same verdict on both branches
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(5000), fwtest.Limit()),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(5000)),
		),
		fwtest.Regular("logdeny", fwtest.Log(fwtest.Limit()), fwtest.Ret()),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{
		in4(22, 0, "tcp"),
		{Port: 2222, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		{Port: 3000, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		in4(5000, 0, "tcp"),
	})
}

func TestEvalRtMatchNeverDecides(t *testing.T) {
	rt := firewall.Cond{Kind: firewall.CondNever, Reason: "xt rt match: the packet has no routing header"}
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP6, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Jump("ufw6-before-input")),
		fwtest.Regular("ufw6-before-input",
			fwtest.Drop(rt),
			// negated, it still never matches: the match fails before inversion
			fwtest.Drop(firewall.Cond{Kind: firewall.CondNever, Negate: true}),
			fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22)),
		),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP6), []firewall.Opening{
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6},
	})
}

func TestEvalConditions(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			fwtest.Accept(firewall.Cond{Kind: firewall.CondIifname, Names: []string{"lo"}}),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondOifname, Names: []string{"eth0"}, Negate: true}), // no oif at input
			fwtest.Accept(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnMulticast}),
			fwtest.Drop(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnLocal, Negate: true}),
			fwtest.Drop(firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateInvalid}),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondNFProto, Family: firewall.FamilyIP6}, fwtest.Tcp(), fwtest.Dport(10)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("224.0.0.251/32")}}, fwtest.Udp(), fwtest.Dport(5353)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondTCPFlags, Mask: 0x17, Value: 0x02}, fwtest.Tcp(), fwtest.Dport(11)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateNew}, fwtest.Tcp(), fwtest.Dport(12)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondIifname, Names: []string{"eth*"}}, fwtest.Tcp(), fwtest.Dport(13)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondPktType, Bits: 1 << firewall.PacketHost}, fwtest.Tcp(), fwtest.Dport(14)),
		),
	}}}}
	open := OpenPorts(rs)
	check(t, input(open, firewall.FamilyIP), []firewall.Opening{
		in4(11, 12, "tcp"),
		{Port: 13, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		in4(14, 0, "tcp"),
	})
	check(t, input(open, firewall.FamilyIP6)[:1], []firewall.Opening{{Port: 10, PortEnd: 12, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6}})
}

func TestEvalVMapAndUnknownChain(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop",
			firewall.Rule{Conds: []firewall.Cond{fwtest.Tcp()}, VMap: []firewall.VMapEntry{
				{Cond: fwtest.Dport(22), Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}},
				{Cond: fwtest.Dport(23), Verdict: firewall.Verdict{Kind: firewall.VerdictJump, Target: "broken"}},
				{Cond: fwtest.DportRange(80, 81), Verdict: firewall.Verdict{Kind: firewall.VerdictAccept}},
			}},
		),
		{Name: "broken", Unknown: "rules not listed"},
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{
		in4(22, 0, "tcp"),
		{Port: 23, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		in4(80, 81, "tcp"),
	})
}

func TestEvalForward(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("FORWARD", firewall.HookForward, 0, "drop",
			// for forwarding the destination is not local
			fwtest.Accept(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnLocal}, fwtest.Tcp(), fwtest.Dport(1)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: 1 << firewall.RtnUnicast}, fwtest.Tcp(), fwtest.Dport(2)),
			fwtest.Accept(firewall.Cond{Kind: firewall.CondOifname, Names: []string{"docker0"}}, fwtest.Tcp(), fwtest.Dport(3)),
		),
	}}}}
	var fwd []firewall.Opening
	for _, o := range OpenPorts(rs) {
		if o.Direction == firewall.HookForward && o.Family == firewall.FamilyIP {
			fwd = append(fwd, o)
		}
	}
	check(t, fwd, []firewall.Opening{
		{Port: 2, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP},
		{Port: 3, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Uncertain: true},
	})
}

func TestEvalManyPortsCheap(t *testing.T) {
	// 500 distinct single ports across chains: evaluation is per interval.
	var rules []firewall.Rule
	for p := uint16(1000); p < 2000; p += 2 {
		rules = append(rules, fwtest.Accept(fwtest.Tcp(), fwtest.Dport(p)))
	}
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "t", Chains: []firewall.Chain{fwtest.Base("input", firewall.HookInput, 0, "drop", rules...)}}}}
	open := input(OpenPorts(rs), firewall.FamilyIP)
	if len(open) != 500 {
		t.Fatalf("got %d openings, want 500", len(open))
	}
}

func TestKind(t *testing.T) {
	ufw := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{
		fwtest.Base("INPUT", firewall.HookInput, 0, "drop", fwtest.Jump("ufw-before-input")), fwtest.Regular("ufw-before-input"),
	}}}}
	native := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "host", Chains: []firewall.Chain{fwtest.Base("input", firewall.HookInput, 0, "drop")}}}}
	plain := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "filter", Chains: []firewall.Chain{fwtest.Base("INPUT", firewall.HookInput, 0, "accept")}}}}
	none := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "nat", Chains: []firewall.Chain{fwtest.Base("POSTROUTING", "postrouting", 100, "accept")}}}}
	fwd := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "firewalld"}}}
	for _, c := range []struct {
		rs     *firewall.Ruleset
		legacy []string
		want   string
		err    string
	}{
		{ufw, nil, nft.KindIptablesNft, ""},
		{plain, nil, nft.KindIptablesNft, ""},
		{native, nil, nft.KindNftables, ""},
		{none, nil, nft.KindNone, ""},
		{&firewall.Ruleset{}, nil, nft.KindNone, ""},
		{fwd, nil, "", "firewalld"},
		{native, []string{"filter"}, "", "iptables-legacy"},
	} {
		got, err := nft.Kind(c.rs, c.legacy)
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
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		fwtest.Base("input", firewall.HookInput, 0, "drop", fwtest.Drop(fwtest.Saddr(ps...)), fwtest.Accept(fwtest.Tcp(), fwtest.Dport(22))),
	}}}}
	check(t, input(OpenPorts(rs), firewall.FamilyIP), []firewall.Opening{in4(22, 0, "tcp")})
}
