package eval

import (
	"slices"
	"testing"

	"adoption/firewall"
)

// PortCuts joins the rulesets' starts with the extra cuts (one past 65535
// left out); PortRuns walks the intervals they cut, the last to 65535.
func TestPortCutsAndRuns(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyInet, Name: "f", Chains: []firewall.Chain{{
		Name: "input", Hook: firewall.HookInput, Policy: "drop",
		Rules: []firewall.Rule{{
			Conds:   []firewall.Cond{{Kind: firewall.CondL4Proto, Protos: []int{6}}, {Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 80, To: 89}}}},
			Verdict: firewall.Verdict{Kind: firewall.VerdictAccept},
		}},
	}}}}}
	cuts := PortCuts(firewall.FamilyIP, "tcp", []*firewall.Ruleset{rs}, 443, 444, 65536)
	if want := []int{0, 80, 90, 443, 444}; !slices.Equal(cuts, want) {
		t.Fatalf("PortCuts = %v, want %v", cuts, want)
	}
	var runs [][2]int
	for start, end := range PortRuns(cuts[1:]) {
		runs = append(runs, [2]int{start, end})
	}
	if want := [][2]int{{80, 89}, {90, 442}, {443, 443}, {444, 65535}}; !slices.Equal(runs, want) {
		t.Fatalf("PortRuns = %v, want %v", runs, want)
	}
}
