package eval_test

// Fuzz targets for the open-port evaluator.
//
//	go test -run '^$' -fuzz '^FuzzOpenPorts$'       -fuzztime 60s ./firewall/eval
//	go test -run '^$' -fuzz '^FuzzOpenPortsSimple$' -fuzztime 60s ./firewall/eval
//
// Without -fuzz, `go test` runs each target over its seeds (f.Add below and
// testdata/fuzz/<Target>/) as ordinary unit tests.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"testing"
	"time"

	fw "adoption/firewall"
	"adoption/firewall/eval"
)

// ---------------------------------------------------------------------------
// Checks shared by the targets.

// evalTimeout bounds one OpenPorts: the fuzzer has no per-input timeout of its
// own, and a loop in the evaluator would otherwise only show as 0 execs/sec.
const evalTimeout = 10 * time.Second

func openPortsWithin(t *testing.T, rs *fw.Ruleset) []fw.Opening {
	t.Helper()
	done := make(chan []fw.Opening, 1)
	go func() { done <- eval.OpenPorts(rs) }()
	select {
	case out := <-done:
		return out
	case <-time.After(evalTimeout):
		b, _ := json.Marshal(rs)
		t.Fatalf("OpenPorts did not return within %s on %s", evalTimeout, b)
		return nil
	}
}

var (
	fzDirOrder   = map[string]int{fw.HookInput: 0, fw.HookForward: 1}
	fzFamOrder   = map[string]int{fw.FamilyIP: 0, fw.FamilyIP6: 1}
	fzProtoOrder = map[string]int{"tcp": 0, "udp": 1}
)

// checkWellFormed: every opening names a hook, a family and a protocol the
// evaluator runs, a valid port range and a source of its family; openings
// come sorted as documented, and the ranges of one (direction, family, proto,
// source) are disjoint and maximal.
func checkWellFormed(t *testing.T, ops []fw.Opening) {
	t.Helper()
	type key struct{ dir, fam, proto, from string }
	spans := map[key][][2]int{}
	for i, o := range ops {
		if _, ok := fzDirOrder[o.Direction]; !ok {
			t.Fatalf("opening %d: direction %q", i, o.Direction)
		}
		if _, ok := fzFamOrder[o.Family]; !ok {
			t.Fatalf("opening %d: family %q", i, o.Family)
		}
		if _, ok := fzProtoOrder[o.Proto]; !ok {
			t.Fatalf("opening %d: proto %q", i, o.Proto)
		}
		if o.PortEnd != 0 && o.PortEnd <= o.Port {
			t.Fatalf("opening %d: port range %d-%d", i, o.Port, o.PortEnd)
		}
		if o.From != "" {
			p, err := netip.ParsePrefix(o.From)
			if err != nil || p.Masked() != p || p.Addr().Is4() != (o.Family == fw.FamilyIP) {
				t.Fatalf("opening %d: source %q in family %s (%v)", i, o.From, o.Family, err)
			}
		}
		if i > 0 {
			a := ops[i-1]
			ka := []int{fzDirOrder[a.Direction], fzFamOrder[a.Family], fzProtoOrder[a.Proto], int(a.Port)}
			kb := []int{fzDirOrder[o.Direction], fzFamOrder[o.Family], fzProtoOrder[o.Proto], int(o.Port)}
			if cmp := compareInts(ka, kb); cmp > 0 {
				t.Fatalf("openings not sorted at %d: %+v before %+v", i, a, o)
			}
		}
		k := key{o.Direction, o.Family, o.Proto, o.From}
		spans[k] = append(spans[k], [2]int{int(o.Port), portEnd(o)})
	}
	for k, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i][0] < ss[j][0] })
		for i := 1; i < len(ss); i++ {
			if ss[i][0] <= ss[i-1][1] {
				t.Fatalf("%+v: overlapping ranges %v and %v", k, ss[i-1], ss[i])
			}
		}
	}
}

func compareInts(a, b []int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func portEnd(o fw.Opening) int {
	if o.PortEnd == 0 {
		return int(o.Port)
	}
	return int(o.PortEnd)
}

// firstInputBase finds the first input base chain (in listing order) of a
// table the evaluator runs.
func firstInputBase(rs *fw.Ruleset) (ti, ci int, ok bool) {
	for ti := range rs.Tables {
		switch rs.Tables[ti].Family {
		case fw.FamilyIP, fw.FamilyIP6, fw.FamilyInet:
		default:
			continue
		}
		for ci := range rs.Tables[ti].Chains {
			if rs.Tables[ti].Chains[ci].Hook == fw.HookInput {
				return ti, ci, true
			}
		}
	}
	return 0, 0, false
}

// unknownRule is a rule the evaluator cannot decide and whose action it
// does not know: a packet may or may not match it, and if it does, anything
// may happen to it.
var unknownRule = fw.Rule{
	Handle:  1 << 40,
	Conds:   []fw.Cond{{Kind: fw.CondUndecidable, Reason: "fuzz: a match the evaluator does not know"}},
	Verdict: fw.Verdict{Kind: fw.VerdictUnknown},
	Unknown: []string{"fuzz: unknown target"},
}

// withUnknownFirst returns a copy of rs (rs itself is not changed) with
// unknownRule inserted first in chain ci of table ti.
func withUnknownFirst(rs *fw.Ruleset, ti, ci int) *fw.Ruleset {
	out := &fw.Ruleset{Tables: append([]fw.Table(nil), rs.Tables...)}
	t := &out.Tables[ti]
	t.Chains = append([]fw.Chain(nil), t.Chains...)
	ch := &t.Chains[ci]
	ch.Rules = append([]fw.Rule{unknownRule}, ch.Rules...)
	return out
}

func families(tableFamily string) []string {
	if tableFamily == fw.FamilyInet {
		return []string{fw.FamilyIP, fw.FamilyIP6}
	}
	return []string{tableFamily}
}

func filterOpenings(ops []fw.Opening, keep func(o fw.Opening) bool) []fw.Opening {
	out := []fw.Opening{}
	for _, o := range ops {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// covered reports whether the openings in after (same direction, family and
// proto) reach port p from every source of from ("" is any source).
func covered(after []fw.Opening, p int, from string) bool {
	var prefixes []netip.Prefix
	for _, o := range after {
		if int(o.Port) > p || portEnd(o) < p {
			continue
		}
		if o.From == "" {
			return true
		}
		prefixes = append(prefixes, netip.MustParsePrefix(o.From))
	}
	if from == "" {
		return false
	}
	return prefixCovered(netip.MustParsePrefix(from), prefixes)
}

// prefixCovered reports whether x lies inside the union of ps.
func prefixCovered(x netip.Prefix, ps []netip.Prefix) bool {
	inside := false
	for _, p := range ps {
		if p.Addr().Is4() != x.Addr().Is4() {
			continue
		}
		if p.Bits() <= x.Bits() && p.Contains(x.Addr()) {
			return true
		}
		if x.Bits() < p.Bits() && x.Contains(p.Addr()) {
			inside = true
		}
	}
	if !inside || x.Bits() == x.Addr().BitLen() {
		return false
	}
	// Split x in halves: each must be covered.
	lo, _ := x.Addr().Prefix(x.Bits() + 1)
	hiAddr := lo.Addr().AsSlice()
	bit := x.Bits()
	hiAddr[bit/8] |= 0x80 >> (bit % 8)
	a, _ := netip.AddrFromSlice(hiAddr)
	hi, _ := a.Prefix(x.Bits() + 1)
	return prefixCovered(lo, ps) && prefixCovered(hi, ps)
}

// checkMonotone: every (port, source) before reaches is reached by after too.
// after's openings are constant between their bounds, so each opening of
// before is checked at its start and at every bound of after inside it.
func checkMonotone(t *testing.T, before, after []fw.Opening, what string) {
	t.Helper()
	for _, o := range before {
		var same []fw.Opening
		points := []int{int(o.Port)}
		for _, a := range after {
			if a.Direction != o.Direction || a.Family != o.Family || a.Proto != o.Proto {
				continue
			}
			same = append(same, a)
			for _, q := range []int{int(a.Port), portEnd(a) + 1} {
				if q > int(o.Port) && q <= portEnd(o) {
					points = append(points, q)
				}
			}
		}
		for _, p := range points {
			if !covered(same, p, o.From) {
				t.Fatalf("%s: %s %s %s port %d from %q was open before and is not after:\nbefore %+v\nafter  %+v",
					what, o.Direction, o.Family, o.Proto, p, o.From, before, after)
			}
		}
	}
}

// ---------------------------------------------------------------------------

// FuzzOpenPorts decodes the input into a ruleset, evaluates it, and checks
// the evaluator never panics, returns, and reports well-formed openings. It
// then inserts, first in the first input base chain, a rule with an
// undecidable condition and an unknown verdict, and checks:
//
//   - every input opening of that chain's families is Uncertain: a packet
//     that reaches the end of every base chain (which an opening means) also
//     passed the unknown rule, which might have dropped it;
//   - nothing that was open before is closed after: the new rule only adds
//     possible outcomes;
//   - when that chain is the family's only input base chain, every port of
//     both protocols is reported, from any source, as Uncertain (the unknown
//     rule might accept anything; nothing after it can close a port for
//     sure);
//   - other families and, unless a rule jumps to that chain by name, the
//     forward hook are unchanged.
func FuzzOpenPorts(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1},
		[]byte("input chain with a policy drop and some accepts"),
		[]byte("\x00\x01\x00\x00\x01\x01\x02\x00\x08\x01\x02\x02\x00\x16\x00\x00\x00\x00\x01\x00"),
		[]byte("\x02\x00\x00\x04\x00\x01\x00\x00\x07\x02\x06\x02\x03\x01\x03\x02\x05\x03\x03\x02\x00\x01\x00\x03\x01\x00"),
		func() []byte {
			b := make([]byte, 256)
			for i := range b {
				b[i] = byte(i)
			}
			return b
		}(),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs := fzRuleset(data)
		listing, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		before := openPortsWithin(t, rs)
		checkWellFormed(t, before)
		if again, _ := json.Marshal(rs); string(again) != string(listing) {
			t.Fatalf("OpenPorts changed the ruleset:\nbefore %s\nafter  %s", listing, again)
		}

		ti, ci, ok := firstInputBase(rs)
		if !ok {
			return
		}
		rs2 := withUnknownFirst(rs, ti, ci)
		after := openPortsWithin(t, rs2)
		checkWellFormed(t, after)
		if again, _ := json.Marshal(rs); string(again) != string(listing) {
			t.Fatal("inserting the unknown rule changed the original ruleset")
		}
		checkUnknownRule(t, rs, ti, ci, before, after)
	})
}

func checkUnknownRule(t *testing.T, rs *fw.Ruleset, ti, ci int, before, after []fw.Opening) {
	t.Helper()
	table := &rs.Tables[ti]
	chain := &table.Chains[ci]
	affected := map[string]bool{}
	for _, fam := range families(table.Family) {
		affected[fam] = true
	}
	for _, o := range after {
		if o.Direction == fw.HookInput && affected[o.Family] && !o.Uncertain {
			t.Fatalf("input opening %+v is certain although every packet reaching it passed a rule that might drop it", o)
		}
	}
	checkMonotone(t, before, after, "unknown rule added")

	// The family's only input base chain, and no prerouting base chain
	// before it (the evaluator follows a packet through prerouting too, and
	// a prerouting drop is final): everything is possible.
	for fam := range affected {
		n, pre := 0, 0
		for _, tb := range rs.Tables {
			if tb.Family != fam && tb.Family != fw.FamilyInet {
				continue
			}
			for _, ch := range tb.Chains {
				switch ch.Hook {
				case fw.HookInput:
					n++
				case fw.HookPrerouting:
					pre++
				}
			}
		}
		if n != 1 || pre != 0 {
			continue
		}
		got := filterOpenings(after, func(o fw.Opening) bool { return o.Direction == fw.HookInput && o.Family == fam })
		want := []fw.Opening{
			{Port: 0, PortEnd: 65535, Proto: "tcp", Direction: fw.HookInput, Family: fam, Uncertain: true},
			{Port: 0, PortEnd: 65535, Proto: "udp", Direction: fw.HookInput, Family: fam, Uncertain: true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the only input base chain starts with a rule that may accept anything, yet:\n got %+v\nwant %+v", fam, got, want)
		}
	}

	// What the new rule cannot reach is unchanged.
	jumpedTo := false
	for _, ch := range table.Chains {
		for _, r := range ch.Rules {
			if r.Verdict.Target == chain.Name {
				jumpedTo = true
			}
			for _, en := range r.VMap {
				if en.Verdict.Target == chain.Name {
					jumpedTo = true
				}
			}
		}
	}
	unaffected := func(o fw.Opening) bool {
		if o.Direction == fw.HookInput {
			return !affected[o.Family]
		}
		return !jumpedTo || !affected[o.Family]
	}
	if b, a := filterOpenings(before, unaffected), filterOpenings(after, unaffected); !reflect.DeepEqual(b, a) {
		t.Fatalf("openings the unknown rule cannot reach changed:\nbefore %+v\nafter  %+v", b, a)
	}
}

// ---------------------------------------------------------------------------

// FuzzOpenPortsSimple compares OpenPorts with a brute-force reference on
// rulesets of decidable conditions: one table, one input base chain (the
// simple case; now and then a second one at another priority, and
// up to three regular chains reached by jump and goto without loops), rules
// of accept, drop, reject, continue, return, jump or goto on an optional
// protocol, an optional (possibly negated) set of port ranges and an optional
// conntrack state. The reference follows one packet per port and protocol
// through the chains: the first rule that matches and has a verdict decides,
// else the policy. No forward chain: every forward port is open.
func FuzzOpenPortsSimple(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 22, 0, 0})
	f.Add([]byte("\x00\x03\x00\x01\x00\x02\x00\x50\x00\x50\x01\x00\x00\x02\x01\xbb\x01\xbb\x03\x01\x00\x03\x00\x00\xff\xff"))
	f.Add([]byte("policy accept, drop ranges and a negated set"))
	f.Add([]byte("\x01\x00\x03\x05\x02\x05\x03\x01\x00\x00\x00\x16\x06\x01\x00\x02\x00\x01\x04\x00\x00\x00\x50\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, fam := simpleRuleset(data)
		ops := openPortsWithin(t, rs)
		checkWellFormed(t, ops)
		for _, o := range ops {
			if o.Uncertain || o.From != "" {
				t.Fatalf("a ruleset of decidable conditions on ports gave %+v", o)
			}
		}
		ref := map[string]*[65536]bool{}
		for _, proto := range []string{"tcp", "udp"} {
			open := referenceOpen(&rs.Tables[0], proto)
			ref[proto] = &open
		}
		for _, fm := range []string{fw.FamilyIP, fw.FamilyIP6} {
			for _, proto := range []string{"tcp", "udp"} {
				fwd := filterOpenings(ops, func(o fw.Opening) bool {
					return o.Direction == fw.HookForward && o.Family == fm && o.Proto == proto
				})
				if len(fwd) != 1 || fwd[0].Port != 0 || fwd[0].PortEnd != 65535 {
					t.Fatalf("%s %s: no forward chain, yet forward openings %+v", fm, proto, fwd)
				}
				got := expand(filterOpenings(ops, func(o fw.Opening) bool {
					return o.Direction == fw.HookInput && o.Family == fm && o.Proto == proto
				}))
				var want [65536]bool
				if fam == fw.FamilyInet || fam == fm {
					want = *ref[proto]
				} else {
					for p := range want { // no input chain for this family
						want[p] = true
					}
				}
				if got != want {
					for p := range want {
						if got[p] != want[p] {
							b, _ := json.MarshalIndent(rs.Tables[0].Chains, "", " ")
							t.Fatalf("%s %s port %d: OpenPorts says open=%v, the reference %v\nchains %s", fm, proto, p, got[p], want[p], b)
						}
					}
				}
			}
		}
	})
}

// simpleRuleset decodes data into one table: the input base chain of up to
// 12 rules, perhaps a second input base chain, and up to three regular
// chains r0..r2; a chain only jumps to regular chains after it, so there is
// no loop.
func simpleRuleset(data []byte) (*fw.Ruleset, string) {
	r := &fzReader{b: data}
	fam := []string{fw.FamilyIP, fw.FamilyInet, fw.FamilyIP6}[r.n(3)]
	nbase := 1
	if r.n(4) == 3 {
		nbase = 2
	}
	nreg := r.n(4)
	var chains []fw.Chain
	for i := range nbase + nreg {
		ch := fw.Chain{Name: fmt.Sprintf("r%d", i-nbase)}
		if i < nbase {
			ch = fw.Chain{Name: fmt.Sprintf("input%d", i), Hook: fw.HookInput, Type: "filter",
				Priority: int(int8(r.byte())), Policy: []string{"drop", "accept"}[r.n(2)]}
		}
		firstTarget := max(nbase, i+1) // regular chains after this one
		for j := range r.n(13) {
			ru := fw.Rule{Handle: uint64(100*i + j + 1)}
			kinds := []fw.VerdictKind{fw.VerdictAccept, fw.VerdictDrop, fw.VerdictReject, fw.VerdictContinue,
				fw.VerdictAccept, fw.VerdictReturn, fw.VerdictJump, fw.VerdictGoto}
			ru.Verdict.Kind = kinds[r.n(len(kinds))]
			if ru.Verdict.Kind == fw.VerdictJump || ru.Verdict.Kind == fw.VerdictGoto {
				if firstTarget >= nbase+nreg {
					ru.Verdict.Kind = fw.VerdictDrop
				} else {
					ru.Verdict.Target = fmt.Sprintf("r%d", firstTarget+r.n(nbase+nreg-firstTarget)-nbase)
				}
			}
			switch r.n(4) {
			case 1:
				ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondL4Proto, Protos: []int{6}})
			case 2:
				ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondL4Proto, Protos: []int{17}})
			case 3:
				ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondL4Proto, Protos: []int{6, 17}, Negate: r.n(4) == 3})
			}
			if r.n(5) != 0 {
				ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondDport, Ports: r.ranges(), Negate: r.n(5) == 4})
			}
			if r.n(6) == 5 {
				ru.Conds = append(ru.Conds, fw.Cond{Kind: fw.CondCtState, Bits: uint32(r.byte()) & 0x4f, Negate: r.n(4) == 3})
			}
			ch.Rules = append(ch.Rules, ru)
		}
		chains = append(chains, ch)
	}
	return &fw.Ruleset{Tables: []fw.Table{{Family: fam, Name: "filter", Chains: chains}}}, fam
}

// referenceOpen follows a new connection to every port, one by one, through
// the input base chains of t: drop or reject anywhere closes the port,
// accept ends one base chain, the end of a base chain is its policy.
func referenceOpen(t *fw.Table, proto string) [65536]bool {
	pnum := 6
	if proto == "udp" {
		pnum = 17
	}
	byName := map[string]*fw.Chain{}
	var bases []*fw.Chain
	for i := range t.Chains {
		byName[t.Chains[i].Name] = &t.Chains[i]
		if t.Chains[i].Hook == fw.HookInput {
			bases = append(bases, &t.Chains[i])
		}
	}
	matches := func(ru *fw.Rule, port int) bool {
		for _, c := range ru.Conds {
			var m bool
			switch c.Kind {
			case fw.CondL4Proto:
				for _, x := range c.Protos {
					m = m || x == pnum
				}
			case fw.CondDport:
				for _, pr := range c.Ports {
					m = m || int(pr.From) <= port && port <= int(pr.To)
				}
			case fw.CondCtState:
				m = c.Bits&8 != 0 // the packet is NEW
			default:
				panic("reference: unexpected condition " + c.Kind)
			}
			if m == c.Negate {
				return false
			}
		}
		return true
	}
	// run returns accept, drop or return (the chain ended or returned).
	var run func(ch *fw.Chain, port int) fw.VerdictKind
	run = func(ch *fw.Chain, port int) fw.VerdictKind {
		for i := range ch.Rules {
			ru := &ch.Rules[i]
			if !matches(ru, port) {
				continue
			}
			switch ru.Verdict.Kind {
			case fw.VerdictAccept:
				return fw.VerdictAccept
			case fw.VerdictDrop, fw.VerdictReject:
				return fw.VerdictDrop
			case fw.VerdictReturn:
				return fw.VerdictReturn
			case fw.VerdictJump:
				if v := run(byName[ru.Verdict.Target], port); v != fw.VerdictReturn {
					return v
				}
			case fw.VerdictGoto:
				return run(byName[ru.Verdict.Target], port)
			case fw.VerdictContinue:
			default:
				panic("reference: unexpected verdict " + ru.Verdict.Kind)
			}
		}
		return fw.VerdictReturn
	}
	var open [65536]bool
	for port := range 65536 {
		open[port] = true
		for _, b := range bases {
			v := run(b, port)
			if v == fw.VerdictReturn {
				v = fw.VerdictKind(b.Policy)
			}
			if v != fw.VerdictAccept {
				open[port] = false
				break
			}
		}
	}
	return open
}

func expand(ops []fw.Opening) [65536]bool {
	var open [65536]bool
	for _, o := range ops {
		for p := int(o.Port); p <= portEnd(o); p++ {
			open[p] = true
		}
	}
	return open
}

// TestUnknownRuleFirstMakesEveryInputPortUncertain: one input base chain, policy drop, and first a rule the evaluator
// can neither decide nor knows the action of. Every port of both protocols
// must come out uncertain; none open for sure, none closed for sure.
func TestUnknownRuleFirstMakesEveryInputPortUncertain(t *testing.T) {
	rs := &fw.Ruleset{Tables: []fw.Table{{Family: fw.FamilyInet, Name: "filter", Chains: []fw.Chain{{
		Name: "input", Hook: fw.HookInput, Type: "filter", Policy: "drop",
		Rules: []fw.Rule{
			unknownRule,
			{Conds: []fw.Cond{{Kind: fw.CondCtState, Bits: 2 | 4}}, Verdict: fw.Verdict{Kind: fw.VerdictAccept}},
			{Conds: []fw.Cond{{Kind: fw.CondL4Proto, Protos: []int{6}}, {Kind: fw.CondDport, Ports: []fw.PortRange{{From: 22, To: 22}}}},
				Verdict: fw.Verdict{Kind: fw.VerdictAccept}},
			{Conds: []fw.Cond{{Kind: fw.CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
				Verdict: fw.Verdict{Kind: fw.VerdictAccept}},
		},
	}}}}}
	got := filterOpenings(eval.OpenPorts(rs), func(o fw.Opening) bool { return o.Direction == fw.HookInput })
	var want []fw.Opening
	for _, fam := range []string{fw.FamilyIP, fw.FamilyIP6} {
		for _, proto := range []string{"tcp", "udp"} {
			want = append(want, fw.Opening{Port: 0, PortEnd: 65535, Proto: proto, Direction: fw.HookInput, Family: fam, Uncertain: true})
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("openings:\n got %+v\nwant %+v", got, want)
	}
}
