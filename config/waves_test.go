package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Waves as written resolve to counts: percentages of the nodes after the
// control node rounded up, the last wave cut to what is left, budgets per
// wave (a percentage of the wave rounded down).
func TestFleetWavesResolve(t *testing.T) {
	for _, c := range []struct {
		waves     []any
		maxFailed any
		members   int
		want      Waves
	}{
		{[]any{1, 5, "10%", "100%"}, nil, 999, Waves{Sizes: []int{1, 5, 100, 893}, Budgets: []int{0, 0, 0, 0}}},
		{[]any{1, 2}, 1, 3, Waves{Sizes: []int{1, 2}, Budgets: []int{1, 1}}},
		{[]any{"50%", "100%"}, "50%", 5, Waves{Sizes: []int{3, 2}, Budgets: []int{1, 1}}},
		{[]any{2, "100%"}, 5, 3, Waves{Sizes: []int{2, 1}, Budgets: []int{2, 1}}},
	} {
		w, problems := ResolveWaves(c.waves, c.maxFailed, c.members)
		if len(problems) > 0 || w == nil || !reflect.DeepEqual(*w, c.want) {
			t.Errorf("waves %v max_failed %v over %d: %+v %v, want %+v", c.waves, c.maxFailed, c.members, w, problems, c.want)
			continue
		}
		if err := CheckWaves(*w, c.members); err != nil {
			t.Errorf("resolved waves %+v do not check: %v", *w, err)
		}
	}
	if w, problems := ResolveWaves(nil, nil, 3); w != nil || problems != nil {
		t.Errorf("no waves: %+v %v, want none (one node at a time)", w, problems)
	}
}

// Bad waves and budgets are refused at once, each naming its key.
func TestFleetWavesRefused(t *testing.T) {
	for _, c := range []struct {
		waves     []any
		maxFailed any
		want      string
	}{
		{[]any{1, 1}, nil, "waves: [1 1] cover 2 of the fleet's 3 node(s)"},
		{[]any{1, "150%"}, nil, "waves[1]: 150%: a percentage over 100"},
		{[]any{0, "100%"}, nil, "waves[0]: 0 is a wave of no node"},
		{[]any{"0%", "100%"}, nil, "waves[0]: 0% is a wave of no node"},
		{[]any{-1, "100%"}, nil, "waves[0]: -1: negative"},
		{[]any{"ten", "100%"}, nil, "waves[0]: ten: not a count or a percentage"},
		{[]any{1.5, "100%"}, nil, "waves[0]: 1.5: not a whole number"},
		{[]any{3, 1}, nil, "waves[1]: 1: the waves before it already cover the fleet's 3 node(s)"},
		{[]any{"100%"}, -1, "max_failed: -1: negative"},
		{[]any{"100%"}, "lots", "max_failed: lots: not a count or a percentage"},
		{[]any{"100%"}, "101%", "max_failed: 101%: a percentage over 100"},
		{nil, 1, "max_failed: 1 is a budget per wave, and the fleet has no waves"},
	} {
		w, problems := ResolveWaves(c.waves, c.maxFailed, 3)
		if w != nil || !strings.Contains(strings.Join(problems, "\n"), c.want) {
			t.Errorf("waves %v max_failed %v: %+v %q, want refused with %q", c.waves, c.maxFailed, w, problems, c.want)
		}
	}
	for _, w := range []Waves{
		{Sizes: []int{1, 1}, Budgets: []int{0, 0}},
		{Sizes: []int{1, 2}, Budgets: []int{0}},
		{Sizes: []int{0, 3}, Budgets: []int{0, 0}},
		{Sizes: []int{3}, Budgets: []int{4}},
		{Sizes: []int{3}, Budgets: []int{-1}},
	} {
		if err := CheckWaves(w, 3); err == nil {
			t.Errorf("waves %+v over 3 nodes passed the check", w)
		}
	}
}

// The fleet file's waves: and max_failed: as YAML reads them (numbers and
// strings), and a bad one refuses the whole file with the key named.
func TestFleetFileWaves(t *testing.T) {
	dir := t.TempDir()
	var nodes []string
	for i, role := range []string{"control", "member", "member", "member"} {
		p := filepath.Join(dir, fmt.Sprintf("n%d.yaml", i+1))
		body := fmt.Sprintf("node: {name: n%d, role: %s}\nauthority: {unsigned: true}\n", i+1, role)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
	}
	load := func(extra string) (*Fleet, error) {
		p := filepath.Join(dir, "fleet.yaml")
		body := "name: f1\nnodes: [" + strings.Join(nodes, ", ") + "]\n" + extra
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadFleet(p)
	}
	f, err := load("waves: [1, \"100%\"]\nmax_failed: \"50%\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Waves{Sizes: []int{1, 2}, Budgets: []int{0, 1}}); f.Waves == nil || !reflect.DeepEqual(*f.Waves, want) {
		t.Fatalf("waves %+v, want %+v", f.Waves, want)
	}
	if f, err := load(""); err != nil || f.Waves != nil {
		t.Fatalf("a fleet without waves: %+v %v, want none", f.Waves, err)
	}
	if _, err := load("waves: [1, 1]\nmax_failed: -2\n"); err == nil || !strings.Contains(err.Error(), "waves: [1 1] cover 2 of the fleet's 3") || !strings.Contains(err.Error(), "max_failed: -2: negative") {
		t.Fatalf("bad waves and budget: %v", err)
	}
}

// ask_after: a duration from a second to a day; anything else refuses the
// fleet file with the key named; left out, 0 (the fleet's hour).
func TestFleetFileAskAfter(t *testing.T) {
	dir := t.TempDir()
	var nodes []string
	for i, role := range []string{"control", "member"} {
		p := filepath.Join(dir, fmt.Sprintf("n%d.yaml", i+1))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("node: {name: n%d, role: %s}\nauthority: {unsigned: true}\n", i+1, role)), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
	}
	load := func(extra string) (*Fleet, error) {
		p := filepath.Join(dir, "fleet.yaml")
		if err := os.WriteFile(p, []byte("name: f1\nnodes: ["+strings.Join(nodes, ", ")+"]\n"+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadFleet(p)
	}
	for extra, want := range map[string]time.Duration{"": 0, "ask_after: 30s\n": 30 * time.Second, "ask_after: 24h\n": 24 * time.Hour, "ask_after: 1s\n": time.Second} {
		f, err := load(extra)
		if err != nil || f.AskAfter != want {
			t.Errorf("%q: ask_after %v %v, want %v", extra, f, err, want)
		}
	}
	for extra, want := range map[string]string{
		"ask_after: 500ms\n": "ask_after: 500ms: give a duration from 1s to 24h",
		"ask_after: 25h\n":   "ask_after: 25h0m0s: give a duration from 1s to 24h",
		"ask_after: -1m\n":   "ask_after: -1m0s: give a duration from 1s to 24h",
		"ask_after: 5\n":     "ask_after: 5 has no unit; write 5s or 5m",
		"ask_after: soon\n":  "ask_after",
	} {
		if f, err := load(extra); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %+v %v, want refused with %q", extra, f, err, want)
		}
	}
}
