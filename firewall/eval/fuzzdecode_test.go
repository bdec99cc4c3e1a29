package eval_test

// The fuzz targets' decoder: a byte stream into a small Ruleset.

import (
	"fmt"
	"net/netip"

	fw "adoption/firewall"
)

// ---------------------------------------------------------------------------
// A small deterministic decoder of a byte stream into a Ruleset. Every byte
// read past the end is 0, and every count is bounded, so any input decodes
// into a small ruleset. Chain and set names come from small pools so that
// jumps hit existing chains, missing chains, duplicate names and loops.

type fzReader struct {
	b []byte
	i int
}

func (r *fzReader) byte() byte {
	if r.i >= len(r.b) {
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

// n returns a number in [0, max).
func (r *fzReader) n(max int) int { return int(r.byte()) % max }

func (r *fzReader) bit() bool { return r.byte()&1 == 1 }

func (r *fzReader) u16() uint16 { return uint16(r.byte())<<8 | uint16(r.byte()) }

var (
	fzFamilies   = []string{fw.FamilyIP, fw.FamilyInet, fw.FamilyIP6, fw.FamilyInet, fw.FamilyIP, "arp"}
	fzChainNames = []string{"input", "forward", "c0", "c1", "c2", "c3"}
	fzHooks      = []string{"", fw.HookInput, "", fw.HookForward, fw.HookInput, "output", "", "prerouting"}
	fzPolicies   = []string{"drop", "accept", ""}
	fzVerdicts   = []fw.VerdictKind{
		fw.VerdictAccept, fw.VerdictDrop, fw.VerdictReject, fw.VerdictJump, fw.VerdictGoto,
		fw.VerdictReturn, fw.VerdictContinue, fw.VerdictUnknown, fw.VerdictAccept, fw.VerdictJump, "bogus",
	}
	fzCondKinds = []fw.CondKind{
		fw.CondNFProto, fw.CondL4Proto, fw.CondDport, fw.CondDport, fw.CondDport, fw.CondSport,
		fw.CondSaddr, fw.CondSaddr, fw.CondDaddr, fw.CondIifname, fw.CondOifname, fw.CondCtState,
		fw.CondAddrType, fw.CondPktType, fw.CondTCPFlags, fw.CondNever, fw.CondUndecidable, "bogus",
	}
	fzPorts = []uint16{0, 1, 21, 22, 25, 53, 80, 443, 1023, 1024, 8080, 65534, 65535}
	fzV4    = []netip.Addr{
		netip.MustParseAddr("10.0.0.0"), netip.MustParseAddr("10.1.0.0"), netip.MustParseAddr("10.1.2.3"),
		netip.MustParseAddr("192.168.1.0"), netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("127.0.0.1"),
		netip.MustParseAddr("224.0.0.1"), netip.MustParseAddr("169.254.1.1"), netip.MustParseAddr("203.0.113.7"),
	}
	fzV6 = []netip.Addr{
		netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8:1::"), netip.MustParseAddr("::"),
		netip.MustParseAddr("::1"), netip.MustParseAddr("fe80::1"), netip.MustParseAddr("ff02::1"),
	}
	fzIfnames = []string{"lo", "eth0", "l*", "*", "e*", "wg0", ""}
)

func (r *fzReader) port() uint16 {
	if r.n(3) == 2 {
		return r.u16()
	}
	return fzPorts[r.n(len(fzPorts))]
}

func (r *fzReader) ranges() []fw.PortRange {
	n := 1 + r.n(3)
	if r.n(8) == 7 {
		n += 5 // a set of a few elements
	}
	out := make([]fw.PortRange, 0, n)
	for range n {
		a := r.port()
		b := a
		switch r.n(4) {
		case 0:
			b = r.port()
			if a > b && r.n(8) != 0 { // a reversed range only now and then
				a, b = b, a
			}
		case 1:
			b = a + uint16(r.n(16))
			if b < a {
				b = 65535
			}
		}
		out = append(out, fw.PortRange{From: a, To: b})
	}
	return out
}

func (r *fzReader) prefix() netip.Prefix {
	var a netip.Addr
	if r.n(3) == 2 {
		a = fzV6[r.n(len(fzV6))]
	} else {
		a = fzV4[r.n(len(fzV4))]
	}
	if r.n(4) == 3 { // perturb the low bytes
		s := a.AsSlice()
		s[len(s)-1] ^= r.byte()
		s[len(s)-2] ^= r.byte() & 0x0f
		a, _ = netip.AddrFromSlice(s)
	}
	bitsChoice := []int{0, 8, 16, 24, 32, 30, 12}
	bits := bitsChoice[r.n(len(bitsChoice))]
	if a.Is6() {
		bits = []int{0, 32, 48, 64, 128, 10, 8}[r.n(7)]
	}
	p, err := a.Prefix(bits)
	if err != nil {
		panic(err) // bits are always within the address' length
	}
	return p
}

func (r *fzReader) cond() fw.Cond {
	c := fw.Cond{Kind: fzCondKinds[r.n(len(fzCondKinds))], Negate: r.n(5) == 4}
	switch c.Kind {
	case fw.CondNFProto:
		c.Family = []string{fw.FamilyIP, fw.FamilyIP6, fw.FamilyInet, "arp"}[r.n(4)]
	case fw.CondL4Proto:
		for range 1 + r.n(2) {
			c.Protos = append(c.Protos, []int{6, 17, 1, 58, 132, int(r.byte())}[r.n(6)])
		}
	case fw.CondDport, fw.CondSport:
		c.Ports = r.ranges()
		if c.Kind == fw.CondSport && r.n(4) == 3 {
			c.Ports = []fw.PortRange{{From: 0, To: 65535}}
		}
	case fw.CondSaddr, fw.CondDaddr:
		for range 1 + r.n(3) {
			c.Prefixes = append(c.Prefixes, r.prefix())
		}
	case fw.CondIifname, fw.CondOifname:
		for range 1 + r.n(2) {
			c.Names = append(c.Names, fzIfnames[r.n(len(fzIfnames))])
		}
	case fw.CondCtState:
		c.Bits = uint32(r.byte()) & 0x4f
	case fw.CondAddrType:
		c.Bits = uint32(r.u16())
		c.Addr = []string{"saddr", "daddr"}[r.n(2)]
	case fw.CondPktType:
		c.Bits = uint32(r.byte()) & 0x0f
	case fw.CondTCPFlags:
		c.Mask, c.Value = r.byte(), r.byte()
	case fw.CondNever, fw.CondUndecidable:
		c.Reason = "fuzz"
	}
	return c
}

func (r *fzReader) verdict(noJumps bool) fw.Verdict {
	v := fw.Verdict{Kind: fzVerdicts[r.n(len(fzVerdicts))]}
	if v.Kind == fw.VerdictJump || v.Kind == fw.VerdictGoto {
		if noJumps {
			v.Kind = fw.VerdictAccept
		} else {
			v.Target = append(fzChainNames, "missing")[r.n(len(fzChainNames)+1)]
		}
	}
	return v
}

func (r *fzReader) rule(handle uint64) fw.Rule {
	ru := fw.Rule{Handle: handle}
	for range r.n(4) {
		ru.Conds = append(ru.Conds, r.cond())
	}
	if r.n(6) == 5 {
		for range 1 + r.n(3) {
			en := fw.VMapEntry{Verdict: r.verdict(false)}
			if r.n(3) == 2 {
				en.Cond = r.cond()
			} else {
				en.Cond = fw.Cond{Kind: fw.CondDport, Ports: r.ranges()}
			}
			ru.VMap = append(ru.VMap, en)
		}
	} else {
		ru.Verdict = r.verdict(false)
	}
	if r.n(10) == 9 {
		ru.Unknown = []string{"fuzz: part not decoded"}
	}
	return ru
}

// fzRuleset decodes data into a ruleset of 1-3 tables, each of 1-5 chains of
// 0-8 rules. Rare features (unknown chains, verdict maps, negations, IPv6
// prefixes) are chosen by the highest value of their byte, so zero bytes
// (and the end of the input) give plain rules.
func fzRuleset(data []byte) *fw.Ruleset {
	r := &fzReader{b: data}
	rs := &fw.Ruleset{}
	handle := uint64(1)
	for ti := range 1 + r.n(3) {
		t := fw.Table{Family: fzFamilies[r.n(len(fzFamilies))], Name: fmt.Sprintf("t%d", ti)}
		if r.n(8) == 7 {
			t.Unknown = []string{"sets not listed: fuzz"}
		}
		for si := range r.n(3) {
			s := fw.Set{Name: fmt.Sprintf("s%d", si), Anonymous: r.bit(), Interval: r.bit(), KeyLen: 2}
			for range r.n(5) {
				s.Elements = append(s.Elements, fw.SetElement{Key: []byte{r.byte(), r.byte()}, IntervalEnd: r.n(4) == 0})
			}
			t.Sets = append(t.Sets, s)
		}
		for range 1 + r.n(5) {
			ch := fw.Chain{Name: fzChainNames[r.n(len(fzChainNames))], Hook: fzHooks[r.n(len(fzHooks))]}
			if ch.Hook != "" {
				ch.Type = "filter"
				ch.Priority = int(int8(r.byte()))
				ch.Policy = fzPolicies[r.n(len(fzPolicies))]
			}
			if r.n(16) == 15 {
				ch.Unknown = "rules not listed: fuzz"
			}
			for range r.n(9) {
				ch.Rules = append(ch.Rules, r.rule(handle))
				handle++
			}
			t.Chains = append(t.Chains, ch)
		}
		rs.Tables = append(rs.Tables, t)
	}
	return rs
}
