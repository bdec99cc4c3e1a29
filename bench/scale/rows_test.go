package scale

// Tests of the pieces of the scale section that need no server: the order
// flips take nodes in, the pairing of a run's rows with the earlier
// orchestrator's, and the waves resolved from the flags.

import (
	"slices"
	"strings"
	"testing"

	"adoption/bench/report"
)

// spread is a permutation with the control node last, and its first 50
// of 1,000 take nodes from every tenth of the fleet.
func TestSpread(t *testing.T) {
	order := spread(1000)
	if len(order) != 1000 || order[len(order)-1] != 0 {
		t.Fatalf("spread(1000): %d entries, last %d; want 1000, last 0", len(order), order[len(order)-1])
	}
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	for i, v := range sorted {
		if v != i {
			t.Fatalf("spread(1000) is not a permutation: sorted[%d] = %d", i, v)
		}
	}
	tenths := map[int]bool{}
	for _, i := range order[:50] {
		tenths[i/100] = true
	}
	if len(tenths) != 10 {
		t.Fatalf("the first 50 flips fall in %d tenths of the fleet, want all 10: %v", len(tenths), order[:50])
	}
}

// pair gives each row of ours the earlier run's figure as its peer, so the
// ratio is before / ours; a figure the earlier run lacks stays absolute.
func TestPair(t *testing.T) {
	ours := []report.Row{
		report.Absolute("scale", "idle events", 10, "events/day", "this tree", "SIM; ours", 0),
		report.Absolute("scale", "new figure", 3, "s", "this tree", "SIM; ours", 0),
	}
	before := []report.Row{report.Absolute("scale", "idle events", 40, "events/day", "/old", "SIM; theirs", 0)}
	got := pair(ours, before, "/old")
	if len(got) != 2 {
		t.Fatalf("pair: %d rows, want 2", len(got))
	}
	if got[0].Peer == nil || *got[0].Peer != 40 || got[0].Ratio == nil || *got[0].Ratio != 4 {
		t.Fatalf("paired row: peer %v ratio %v, want 40 and 4 (before / ours)", got[0].Peer, got[0].Ratio)
	}
	if !strings.Contains(got[0].Note, "before: theirs") || !strings.Contains(got[0].PeerIs, "/old") {
		t.Fatalf("paired row's note %q / peer %q: want the earlier note and tree", got[0].Note, got[0].PeerIs)
	}
	if got[1].Peer != nil || !strings.Contains(got[1].Note, "no figure") {
		t.Fatalf("unpaired row: peer %v note %q, want none and said so", got[1].Peer, got[1].Note)
	}
	if got := pair(nil, before, "/old"); len(got) != 1 || got[0].Ours != 40 {
		t.Fatalf("pair without rows of ours: %+v, want the earlier rows", got)
	}
}

// The flags' waves resolve as the fleet file's do, the control node first.
func TestResolveWavesFlags(t *testing.T) {
	w, sizes, err := resolveWaves(Options{Waves: "1, 5, 10%, 100%", MaxFailed: "20%"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{1, 1, 5, 100, 893}) || !slices.Equal(w.Budgets, []int{0, 1, 20, 178}) {
		t.Fatalf("sizes %v budgets %v, want [1 1 5 100 893] and [0 1 20 178]", sizes, w.Budgets)
	}
	if _, _, err := resolveWaves(Options{Waves: "1,5"}, 1000); err == nil || !strings.Contains(err.Error(), "100%") {
		t.Fatalf("waves that leave nodes out: %v, want the fleet file's refusal", err)
	}
}
