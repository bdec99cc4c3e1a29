package watch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/custody"
	"adoption/nodestate"
)

const servedBy = "node-migration/n1"

// kept is a Watch of workflow servedBy, with a drift baseline, answered
// by an agent whose loop keeps it under dir; it returns the loop.
func keptWatch(t *testing.T, dir string) *Loop {
	t.Helper()
	state := nodestate.New(dir)
	l := &Loop{Checks: &fakeChecks{}, Records: &fakeRecords{owner: servedBy}, Local: local, Store: state}
	in := watchInput(quiet, 50*time.Millisecond)
	in.Custody = []custody.Record{{FileState: custody.FileState{Path: "/etc/hosts", Exists: true, Digest: "d1"}, Found: true}}
	in.Firewall = "fp-1"
	if _, err := (&Watcher{Loop: l}).Watch(activities.WithWorkflow(context.Background(), servedBy), in); err != nil {
		t.Fatal(err)
	}
	return l
}

// An agent restarted with no Temporal: the watch its loop kept under
// state_dir resumes at start, its checks due at once, for the workflow
// that asked; a mark that vanished meanwhile is put back and the drift
// found is the loop's, waiting for the workflow's next watch.
func TestKeptWatchResumesWithoutTemporal(t *testing.T) {
	dir := t.TempDir()
	keptWatch(t, dir)
	info, err := os.Stat(filepath.Join(dir, "watch.json"))
	if err != nil {
		t.Fatalf("the watch was not kept: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("watch.json is %v, want 0600", info.Mode().Perm())
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "watch.json"))
	for _, want := range []string{watchedPlan.Hash(), servedBy, `"reconcile": 60000000000`, `"fp-1"`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Fatalf("watch.json lacks %s:\n%s", want, raw)
		}
	}

	// The restart: a new loop, the same state_dir and file, no Watch.
	f := &fakeChecks{vanished: 1, drift: []activities.DriftItem{{Kind: "firewall", Recorded: "fp-1", Now: "fp-2", What: "the found firewall changed"}}}
	var log strings.Builder
	l := &Loop{Checks: f, Records: &fakeRecords{owner: servedBy}, Local: local, Store: nodestate.New(dir), Log: &log}
	now := time.Now()
	if !l.Resume(now) {
		t.Fatalf("the kept watch was not resumed:\n%s", log.String())
	}
	l.Cycle(context.Background(), now)
	if r, d := f.counts(); r != 1 || d != 1 {
		t.Fatalf("resumed: %d reconcile(s), %d drift check(s); want both at once", r, d)
	}
	if owners := f.reconciles[0].Owners; len(owners["foundation"]) != 1 || len(owners["web"]) != 1 || f.reconciles[0].Plan != watchedPlan.Ref() {
		t.Fatalf("reconciled %+v", f.reconciles[0])
	}
	res := l.take()
	if len(res.Restored) != 1 || len(res.Drift) != 1 || !res.Checked {
		t.Fatalf("the resumed loop's findings: %+v", res)
	}
	if !strings.Contains(log.String(), "resumed the watch of workflow "+servedBy) {
		t.Fatalf("the log does not say it resumed:\n%s", log.String())
	}
	// Its schedule is the plan's: the next reconcile a minute later.
	l.Cycle(context.Background(), now.Add(30*time.Second))
	l.Cycle(context.Background(), now.Add(time.Minute))
	if r, _ := f.counts(); r != 2 {
		t.Fatalf("%d reconciles after a minute; want 2", r)
	}
	// The workflow's same watch, when Temporal is back, takes the loop as
	// it is: no check anew, the findings already there.
	in := watchInput(quiet, time.Hour)
	in.Custody = []custody.Record{{FileState: custody.FileState{Path: "/etc/hosts", Exists: true, Digest: "d1"}, Found: true}}
	in.Firewall = "fp-1"
	got, err := (&Watcher{Loop: l}).Watch(activities.WithWorkflow(context.Background(), servedBy), in)
	if err != nil || len(got.Drift) != 1 {
		t.Fatalf("the workflow's watch after the restart: %+v, %v", got, err)
	}
	if r, _ := f.counts(); r != 2 {
		t.Fatalf("the same watch checked anew (%d reconciles)", r)
	}
}

// A kept watch is not resumed, and is removed, when the node's records end
// it or its own file no longer derives the plan; a flip under way only
// pauses it.
func TestKeptWatchDroppedWhenItsNodeMovedOn(t *testing.T) {
	other := watchedPlan
	other.DriftInterval = time.Hour
	cases := []struct {
		name    string
		records *fakeRecords
		local   func() (*authority.Authority, error)
		resumed bool
	}{
		{"released", &fakeRecords{released: true}, local, false},
		{"converged", &fakeRecords{converged: true, owner: servedBy}, local, false},
		{"served by another workflow", &fakeRecords{owner: "node-migration/elsewhere"}, local, false},
		{"the file derives another plan", &fakeRecords{owner: servedBy}, authority.Fixed(other, nil, 0), false},
		{"a flip under way", &fakeRecords{owner: servedBy, flip: &nodestate.FlipRecord{State: nodestate.FlipFlipped}}, local, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			keptWatch(t, dir)
			f := &fakeChecks{}
			l := &Loop{Checks: f, Records: tc.records, Local: tc.local, Store: nodestate.New(dir)}
			if got := l.Resume(time.Now()); got != tc.resumed {
				t.Fatalf("resumed = %v, want %v", got, tc.resumed)
			}
			l.Cycle(context.Background(), time.Now())
			if r, d := f.counts(); r != 0 || d != 0 {
				t.Fatalf("checked %d, %d times", r, d)
			}
			_, err := os.Stat(filepath.Join(dir, "watch.json"))
			if kept := err == nil; kept != tc.resumed {
				t.Fatalf("watch.json kept = %v, want %v", kept, tc.resumed)
			}
		})
	}
}

// A node released (or converged) while its loop runs: the loop's next
// check finds it, and the kept watch goes, so a restart does not resume it.
func TestKeptWatchDroppedWhenTheLoopFindsTheNodeReleased(t *testing.T) {
	dir := t.TempDir()
	l := keptWatch(t, dir)
	l.Records = &fakeRecords{released: true}
	l.Cycle(context.Background(), time.Now().Add(time.Hour))
	if _, err := os.Stat(filepath.Join(dir, "watch.json")); !os.IsNotExist(err) {
		t.Fatalf("watch.json still there after the release: %v", err)
	}
}
