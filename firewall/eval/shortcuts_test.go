package eval_test

// This file holds the check that the evaluator's shortcuts (the port index
// of a chain, source regions left out as going the way of any other) change
// no answer: every entry point gives the same with them and without them,
// on the fixtures and on the golden tests' generated rulesets.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"

	fw "adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// answers are every answer of the evaluator about rs on node, and about the
// change from rs to other, each as the sorted JSON of its elements (Widened
// orders openings of one port and source by neither Via nor anything else).
func answers(rs, other *fw.Ruleset, node fw.Node) []string {
	var out []string
	add := func(name string, v any) {
		var elems []json.RawMessage
		if err := json.Unmarshal(mustJSON(v), &elems); err != nil {
			elems = []json.RawMessage{mustJSON(v)}
		}
		var s []string
		for _, e := range elems {
			s = append(s, string(e))
		}
		sort.Strings(s)
		for _, e := range s {
			out = append(out, name+" "+e)
		}
	}
	add("OpenPorts", eval.OpenPorts(rs))
	add("OpenPortsOn", eval.OpenPortsOn(rs, node))
	add("ClassOpenings", eval.ClassOpenings(rs, node))
	add("Widened", eval.Widened(rs, other, node))
	add("Widened back", eval.Widened(other, rs, node))
	add("CompareClasses", eval.CompareClasses(rs, other, node, nil))
	add("EgressFrom ip", eval.EgressFrom(rs, fw.FamilyIP))
	add("EgressFrom ip6", eval.EgressFrom(rs, fw.FamilyIP6))
	x := eval.NewReacher(rs, node)
	for _, dir := range []string{fw.HookInput, fw.HookForward, eval.DirRouted} {
		for _, port := range []uint16{22, 80, 443, 8080, 20010, 31000} {
			add(fmt.Sprintf("At %s %d", dir, port), []any{x.At(dir, fw.FamilyIP, "tcp", port)})
		}
	}
	return out
}

func sameWithoutShortcuts(t *testing.T, name string, rs, other *fw.Ruleset, node fw.Node) {
	t.Helper()
	with := answers(rs, other, node)
	var without []string
	eval.WithoutShortcuts(func() { without = answers(rs, other, node) })
	if !slices.Equal(with, without) {
		for i := range max(len(with), len(without)) {
			var w, g string
			if i < len(without) {
				w = without[i]
			}
			if i < len(with) {
				g = with[i]
			}
			if w != g {
				t.Errorf("%s: the answers differ with the shortcuts (%d and %d answers), first at %d:\nwithout %.400s\nwith    %.400s", name, len(without), len(with), i, w, g)
				return
			}
		}
	}
}

func TestShortcutsChangeNoAnswer(t *testing.T) {
	names := []string{"ufw-docker", "control-node", "docker28", "reference-node"}
	for i, name := range names {
		rs, node := fwtest.LoadFixture(t, name)
		other, _ := fwtest.LoadFixture(t, names[(i+1)%len(names)])
		sameWithoutShortcuts(t, name, rs, other, node)
	}
	data := goldenData(300)
	for i := range 300 {
		rs, other := goldenRuleset(data[i]), goldenRuleset(data[(i+1)%300])
		sameWithoutShortcuts(t, "random", rs, other, goldenNode)
		sameWithoutShortcuts(t, "random with NAT", withNAT(rs), other, goldenNode)
		if t.Failed() {
			t.Fatalf("random ruleset %d: %s", i, mustJSON(rs))
		}
	}
	for i := range 100 {
		sameWithoutShortcuts(t, "sources", sourcesRuleset(i), sourcesRuleset(i+100), goldenNode)
		if t.Failed() {
			t.Fatalf("sources ruleset %d", i)
		}
	}
}
