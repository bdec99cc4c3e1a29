package eval_test

// This file holds the check that a ruleset compiled once and shared (a
// Compiled, a Pair) gives every comparison the answer a fresh compile per
// question gives, asked in any order, again, and from several goroutines
// at once; and that the routed openings evaluated alone (Routed) are
// those OpenPorts gives, with the shortcuts and without.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	fw "adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// sharedAnswers are the comparisons a flip's preview makes of before and
// after on node, each as the package function gives it (compiling both
// anew), or (pair set) from one compiled pair, in reverse order.
func sharedAnswers(before, after *fw.Ruleset, node fw.Node, pair *eval.Pair, cb, ca *eval.Compiled) []any {
	bridges := eval.HostBridges(node, before, after)
	if len(bridges) == 0 {
		// Judged as a node known by its ruleset judges them.
		bridges = eval.HostBridges(fw.Node{}, before, after)
	}
	type ask struct {
		name          string
		fresh, shared func() any
	}
	asks := []ask{
		{"OpenPortsOn before", func() any { return eval.OpenPortsOn(before, node) }, func() any { return cb.OpenPortsOn(node) }},
		{"OpenPortsOn after", func() any { return eval.OpenPortsOn(after, node) }, func() any { return ca.OpenPortsOn(node) }},
		{"Widened", func() any { return eval.Widened(before, after, node) }, func() any { return pair.Widened(node) }},
		{"CompareClasses", func() any { return eval.CompareClasses(before, after, node, nil) }, func() any { return pair.CompareClasses(node, nil) }},
		{"CompareBridgeInput", func() any { return eval.CompareBridgeInput(before, after, node, bridges) }, func() any { return pair.CompareBridgeInput(node, bridges) }},
		{"EgressFrom ip", func() any { return eval.EgressFrom(before, fw.FamilyIP) }, func() any { return cb.EgressFrom(fw.FamilyIP) }},
		{"EgressFrom ip6", func() any { return eval.EgressFrom(before, fw.FamilyIP6) }, func() any { return cb.EgressFrom(fw.FamilyIP6) }},
	}
	for _, b := range bridges {
		asks = append(asks, ask{"CompareClassesIn " + b,
			func() any { return eval.CompareClassesIn(before, after, node, b, nil) }, func() any { return pair.CompareClassesIn(node, b, nil) }})
	}
	out := make([]any, len(asks))
	if pair == nil {
		for i, a := range asks {
			out[i] = []any{a.name, a.fresh()}
		}
		return out
	}
	for i := len(asks) - 1; i >= 0; i-- {
		out[i] = []any{asks[i].name, asks[i].shared()}
	}
	return out
}

func sameShared(t *testing.T, name string, before, after *fw.Ruleset, node fw.Node) {
	t.Helper()
	fresh := sharedAnswers(before, after, node, nil, nil, nil)
	cb, ca := eval.Compile(before), eval.Compile(after)
	pair := eval.NewPair(cb, ca)
	runs := make([][]any, 4)
	runs[0] = sharedAnswers(before, after, node, pair, cb, ca)
	runs[1] = sharedAnswers(before, after, node, pair, cb, ca) // again, on what the first left
	var wg sync.WaitGroup
	for i := 2; i < len(runs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = sharedAnswers(before, after, node, pair, cb, ca)
		}()
	}
	wg.Wait()
	for r, got := range runs {
		for i := range fresh {
			// Widened orders the openings of one port and source by
			// nothing else: each answer is compared as a set.
			if !slices.Equal(elements(got[i]), elements(fresh[i])) {
				t.Errorf("%s: run %d: %v differs compiled once from compiled per question:\nshared %.600s\nfresh  %.600s", name, r, fresh[i].([]any)[0], mustJSON(got[i]), mustJSON(fresh[i]))
			}
		}
	}
	if len(fresh) < 7 {
		t.Fatalf("%s: only %d comparisons made", name, len(fresh))
	}
}

func TestCompiledOnceChangesNoAnswer(t *testing.T) {
	names := []string{"ufw-docker", "control-node", "docker28", "reference-node"}
	for i, name := range names {
		rs, node := fwtest.LoadFixture(t, name)
		other, _ := fwtest.LoadFixture(t, names[(i+1)%len(names)])
		sameShared(t, name, rs, other, node)
		sameShared(t, name+" back", other, rs, node)
		sameShared(t, name+" on no node", rs, other, fw.Node{})
	}
	data := goldenData(100)
	for i := range 100 {
		rs, other := goldenRuleset(data[i]), goldenRuleset(data[(i+1)%100])
		sameShared(t, fmt.Sprintf("random %d", i), withNAT(rs), other, goldenNode)
		if t.Failed() {
			t.Fatalf("random ruleset %d: %s", i, mustJSON(rs))
		}
	}
}

// elements are the JSON of each element of answer ([name, list]), sorted.
func elements(answer any) []string {
	var pair []json.RawMessage
	if err := json.Unmarshal(mustJSON(answer), &pair); err != nil || len(pair) != 2 {
		panic(fmt.Sprintf("not a named answer: %s", mustJSON(answer)))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(pair[1], &elems); err != nil {
		elems = []json.RawMessage{pair[1]}
	}
	out := []string{string(pair[0])}
	for _, e := range elems {
		out = append(out, string(e))
	}
	slices.Sort(out[1:])
	return out
}

// routedOf are the routed openings of OpenPortsOn, in its order.
func routedOf(open []fw.Opening) []fw.Opening {
	out := []fw.Opening{}
	for _, o := range open {
		if o.Routed() {
			out = append(out, o)
		}
	}
	return out
}

func sameRouted(t *testing.T, name string, rs *fw.Ruleset) int {
	t.Helper()
	want := routedOf(eval.OpenPorts(rs))
	c := eval.Compile(rs)
	got := append([]fw.Opening{}, c.Routed()...)
	var without []fw.Opening
	eval.WithoutShortcuts(func() { without = append([]fw.Opening{}, c.Routed()...) })
	if !slices.Equal(got, want) {
		t.Errorf("%s: Routed gives\n%s\nOpenPorts' routed openings are\n%s", name, mustJSON(got), mustJSON(want))
	}
	if !slices.Equal(without, want) {
		t.Errorf("%s: Routed without the shortcuts gives\n%s\nOpenPorts' routed openings are\n%s", name, mustJSON(without), mustJSON(want))
	}
	return len(want)
}

func TestRoutedIsOpenPortsRouted(t *testing.T) {
	routed := 0
	for _, name := range []string{"ufw-docker", "control-node", "docker28", "reference-node"} {
		rs, _ := fwtest.LoadFixture(t, name)
		routed += sameRouted(t, name, rs)
	}
	data := goldenData(300)
	for i := range 300 {
		rs := goldenRuleset(data[i])
		routed += sameRouted(t, fmt.Sprintf("random %d", i), rs)
		routed += sameRouted(t, fmt.Sprintf("random %d with NAT", i), withNAT(rs))
		if t.Failed() {
			t.Fatalf("random ruleset %d: %s", i, mustJSON(rs))
		}
	}
	if routed == 0 {
		t.Fatal("no routed opening in any ruleset: the comparison compared nothing")
	}
}
