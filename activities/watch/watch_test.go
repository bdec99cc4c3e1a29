package watch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/config"
	"adoption/firewall/marks"
	"adoption/nodestate"
)

// fakeChecks answers as the node's checks would, from what a test sets.
type fakeChecks struct {
	mu         sync.Mutex
	drift      []activities.DriftItem
	vanished   int   // marks to report put back at the next reconcile
	flapping   bool  // every reconcile puts one back (a node that keeps losing it)
	refuse     error // every check refuses with it
	reconciles []activities.ReconcileInput
	drifts     int
	control    []activities.ControlDaemon
}

func (f *fakeChecks) CheckControl(context.Context, activities.DriftInput) (*activities.ControlResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &activities.ControlResult{Running: append([]activities.ControlDaemon{}, f.control...)}, nil
}

func (f *fakeChecks) Reconcile(_ context.Context, in activities.ReconcileInput) (*activities.RulesResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reconciles = append(f.reconciles, in)
	if f.refuse != nil {
		return nil, f.refuse
	}
	res := &activities.RulesResult{Present: []marks.MarkedRule{{Chain: "ufw-user-input"}}}
	if f.flapping {
		res.Added = append(res.Added, marks.MarkedRule{Chain: "ufw-user-input"})
	}
	for ; f.vanished > 0; f.vanished-- {
		res.Added = append(res.Added, marks.MarkedRule{Chain: "ufw-user-input"})
	}
	return res, nil
}

func (f *fakeChecks) CheckDrift(context.Context, activities.DriftInput) (*activities.DriftResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drifts++
	if f.refuse != nil {
		return nil, f.refuse
	}
	return &activities.DriftResult{Items: append([]activities.DriftItem{}, f.drift...)}, nil
}

func (f *fakeChecks) set(fn func(*fakeChecks)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeChecks) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reconciles), f.drifts
}

// fakeRecords is an adopted node's records (released: no longer; owner:
// the workflow it serves, none when empty).
type fakeRecords struct {
	converged bool
	released  bool
	owner     string
	flip      *nodestate.FlipRecord
	cutovers  map[string]nodestate.CutoverRecord
}

func (r *fakeRecords) Adopted() (nodestate.Marker, bool, error) {
	return nodestate.Marker{Node: "n1"}, !r.released, nil
}
func (r *fakeRecords) Converged() (bool, error)             { return r.converged, nil }
func (r *fakeRecords) Flip() (*nodestate.FlipRecord, error) { return r.flip, nil }
func (r *fakeRecords) Owner() (nodestate.Owner, bool, error) {
	return nodestate.Owner{Namespace: "default", Workflow: r.owner}, r.owner != "", nil
}
func (r *fakeRecords) Cutovers() (map[string]nodestate.CutoverRecord, error) {
	return r.cutovers, nil
}

// watchedPlan is the node's own plan: its file derives it (local), and a
// watch names it by hash.
var watchedPlan = config.Plan{Node: "n1", ReconcileInterval: time.Minute, DriftInterval: 5 * time.Minute}

var local = authority.Fixed(watchedPlan, nil, 0)

func watchInput(known string, bound time.Duration) Input {
	return Input{
		Plan:      watchedPlan.Ref(),
		Owners:    map[string][]config.Port{"foundation": {{Num: 7946, Proto: "tcp"}}, "web": {{Num: 8080, Proto: "tcp"}}},
		Reconcile: true, Drift: true, Known: known, Bound: bound,
	}
}

// installed makes in what l watches, as an authorized request would, its
// checks due an interval after now.
func installed(l *Loop, in Input, now time.Time) {
	j := &job{in: in, every: Intervals{Reconcile: watchedPlan.ReconcileInterval, Drift: watchedPlan.DriftInterval}}
	l.install(j, now.Add(j.every.Reconcile), now.Add(j.every.Drift))
}

// start runs a Watch in the background; its answer comes on the channel.
func start(w *Watcher, in Input) chan struct {
	r   *Result
	err error
} {
	out := make(chan struct {
		r   *Result
		err error
	}, 1)
	go func() {
		r, err := w.Watch(context.Background(), in)
		out <- struct {
			r   *Result
			err error
		}{r, err}
	}()
	return out
}

var quiet = Findings{}.Digest()

// registered waits until the loop watches what a Watch registered.
func registered(l *Loop) {
	for {
		l.mu.Lock()
		ok := l.job != nil && l.found
		l.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestIdleNodeAnswersOnlyAtTheBound(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	done := start(w, watchInput(quiet, 300*time.Millisecond))
	registered(l)
	now := time.Now()
	for i := 1; i <= 30; i++ { // half an hour of the node's own loop, nothing changing
		l.Cycle(context.Background(), now.Add(time.Duration(i)*time.Minute))
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if !got.r.Bound || len(got.r.Drift) != 0 || len(got.r.Restored) != 0 || got.r.Digest != quiet {
		t.Fatalf("an idle node answered %+v; want only the bound, nothing found", got.r)
	}
	recs, drifts := f.counts()
	if recs < 2 || drifts < 2 {
		t.Fatalf("the loop checked %d reconcile(s), %d drift(s) in half an hour of cycles; want them on their intervals", recs, drifts)
	}
}

func TestDriftFoundByTheLoopIsReported(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	done := start(w, watchInput(quiet, time.Hour))
	registered(l)
	item := activities.DriftItem{Kind: "file", Path: "/etc/hosts", Recorded: "d1", Now: "d2", What: "/etc/hosts changed since adoption"}
	f.set(func(f *fakeChecks) { f.drift = []activities.DriftItem{item} })
	now := time.Now()
	l.Cycle(context.Background(), now.Add(time.Minute)) // reconcile only: drift not due
	l.Cycle(context.Background(), now.Add(6*time.Minute))
	got := <-done
	if got.err != nil || got.r.Bound || len(got.r.Drift) != 1 || got.r.Drift[0] != item {
		t.Fatalf("watch = %+v, %v; want the drift the loop found", got.r, got.err)
	}
	// The workflow now knows it: a watch with its digest waits again.
	again := start(w, watchInput(got.r.Digest, 100*time.Millisecond))
	if r := <-again; r.err != nil || !r.r.Bound {
		t.Fatalf("watch knowing the drift = %+v, %v; want the bound", r.r, r.err)
	}
}

func TestRepairIsReportedOnce(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	f.set(func(f *fakeChecks) { f.vanished = 2 })
	got := <-start(w, watchInput(quiet, time.Hour))
	if got.err != nil || got.r.Bound || len(got.r.Restored) != 2 || got.r.Present != 1 || got.r.Reconciled.IsZero() {
		t.Fatalf("watch = %+v, %v; want 2 marks put back", got.r, got.err)
	}
	next := <-start(w, watchInput(got.r.Digest, 100*time.Millisecond))
	if next.err != nil || !next.r.Bound || len(next.r.Restored) != 0 {
		t.Fatalf("next watch = %+v, %v; want the repair not repeated", next.r, next.err)
	}
}

func TestReconcileFailureIsReported(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	done := start(w, watchInput(quiet, time.Hour))
	registered(l)
	// A transient fault (the kernel's listing failed): the watch answers.
	f.set(func(f *fakeChecks) {
		f.refuse = temporal.NewApplicationError("list the ruleset: netlink busy", "Netlink")
	})
	l.Cycle(context.Background(), time.Now().Add(2*time.Minute))
	got := <-done
	if got.err != nil || got.r.ReconcileError != "list the ruleset: netlink busy" {
		t.Fatalf("watch = %+v, %v; want the reconcile failure", got.r, got.err)
	}
}

func TestRefusedWatchRegistersNothing(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	if r := <-start(w, watchInput(quiet, 50*time.Millisecond)); r.err != nil {
		t.Fatal(r.err)
	}
	before := l.job
	refusal := temporal.NewNonRetryableApplicationError("plan mismatch", "PlanMismatch", nil)
	f.set(func(f *fakeChecks) { f.refuse = refusal })
	other := watchInput(quiet, time.Hour)
	other.Owners = map[string][]config.Port{"web": {{Num: 9999, Proto: "tcp"}}}
	r := <-start(w, other)
	if r.err == nil || r.err.Error() != refusal.Error() {
		t.Fatalf("refused watch = %+v, %v; want the refusal", r.r, r.err)
	}
	if l.job != before {
		t.Fatal("a refused watch replaced what the loop watches")
	}
}

func TestNodeRecordsVetoTheLoop(t *testing.T) {
	for name, recs := range map[string]*fakeRecords{
		"converged":    {converged: true},
		"flip pending": {flip: &nodestate.FlipRecord{ID: "f1", State: nodestate.FlipFlipped}},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeChecks{}
			l := &Loop{Checks: f, Records: recs, Local: local}
			installed(l, watchInput(quiet, time.Hour), time.Now())
			l.Cycle(context.Background(), time.Now().Add(time.Hour))
			if r, d := f.counts(); r != 0 || d != 0 {
				t.Fatalf("%s: the loop ran %d reconcile(s) and %d drift check(s); want none", name, r, d)
			}
		})
	}
}

func TestRolledBackModuleIsNotReasserted(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{cutovers: map[string]nodestate.CutoverRecord{"web": {Module: "web", State: nodestate.CutoverRolledBack}}}, Local: local}
	installed(l, watchInput(quiet, time.Hour), time.Now())
	l.Cycle(context.Background(), time.Now().Add(time.Minute))
	if len(f.reconciles) != 1 {
		t.Fatalf("reconciles = %d, want 1", len(f.reconciles))
	}
	if _, ok := f.reconciles[0].Owners["web"]; ok || len(f.reconciles[0].Owners["foundation"]) != 1 {
		t.Fatalf("reconciled owners %v; want the foundation only (web rolled back on the node)", f.reconciles[0].Owners)
	}
}

func TestLoopWaitsWhileARequestIsServed(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	now := time.Now()
	installed(l, watchInput(quiet, time.Hour), now)
	l.serving.RLock() // what the gate holds while another activity runs
	l.Cycle(context.Background(), now.Add(time.Hour))
	if r, d := f.counts(); r != 0 || d != 0 {
		t.Fatalf("the loop checked while a request was served (%d, %d)", r, d)
	}
	l.serving.RUnlock()
	l.Cycle(context.Background(), now.Add(time.Hour+time.Second))
	if r, d := f.counts(); r != 1 || d != 1 {
		t.Fatalf("after the request, checks = %d, %d; want both", r, d)
	}
}

// A node that keeps losing a mark: the workflow's next watch (the same
// request) does not check anew, so repairs come once a reconcile interval,
// never in a loop of watches.
func TestFlappingMarkIsReportedOnceAnInterval(t *testing.T) {
	f := &fakeChecks{flapping: true}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	got := <-start(w, watchInput(quiet, time.Hour))
	if got.err != nil || len(got.r.Restored) != 1 {
		t.Fatalf("first watch = %+v, %v; want the repair", got.r, got.err)
	}
	next := <-start(w, watchInput(got.r.Digest, 100*time.Millisecond))
	if next.err != nil || !next.r.Bound {
		t.Fatalf("next watch = %+v, %v; want the bound: the loop reconciles once an interval", next.r, next.err)
	}
	if r, _ := f.counts(); r != 1 {
		t.Fatalf("reconciles = %d; want 1 (the same request is not checked anew)", r)
	}
}

// Two repairs in a row, each found by the loop while a watch waits: each
// is answered.
func TestEachRepairByTheLoopIsAnswered(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	done := start(w, watchInput(quiet, time.Hour))
	registered(l)
	f.set(func(f *fakeChecks) { f.vanished = 1 })
	l.Cycle(context.Background(), time.Now().Add(2*time.Minute))
	got := <-done
	if got.err != nil || len(got.r.Restored) != 1 {
		t.Fatalf("first = %+v, %v", got.r, got.err)
	}
	done = start(w, watchInput(got.r.Digest, time.Hour))
	f.set(func(f *fakeChecks) { f.vanished = 2 })
	l.Cycle(context.Background(), time.Now().Add(4*time.Minute))
	got = <-done
	if got.err != nil || len(got.r.Restored) != 2 {
		t.Fatalf("second = %+v, %v", got.r, got.err)
	}
}

// A watch the workflow cancelled, still waiting on the agent (it learns
// the cancel at its next heartbeat), leaves when a newer one comes, and
// never takes the repair meant for the newer one.
func TestStaleWatchLeavesTheRepairToTheNewest(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	stale := start(w, watchInput(quiet, time.Hour))
	registered(l)
	newest := start(w, watchInput(quiet, time.Hour))
	if r := <-stale; r.err == nil {
		t.Fatalf("the older watch answered %+v; want it superseded", r.r)
	}
	f.set(func(f *fakeChecks) { f.vanished = 2 })
	l.Cycle(context.Background(), time.Now().Add(2*time.Minute))
	if r := <-newest; r.err != nil || len(r.r.Restored) != 2 {
		t.Fatalf("newest = %+v, %v; want the repair", r.r, r.err)
	}
}

// A watch names the plan by hash: one the node's file does not derive is
// refused, even with no check asked, and nothing is watched.
func TestWatchUnderAnotherPlanIsRefused(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	other := watchedPlan
	other.ReconcileInterval = time.Second
	in := watchInput(quiet, time.Hour)
	in.Plan, in.Reconcile, in.Drift = other.Ref(), false, false
	_, err := (&Watcher{Loop: l}).Watch(context.Background(), in)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != authority.ErrPlanMismatch || !ae.NonRetryable() {
		t.Fatalf("a watch under another plan: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.job != nil {
		t.Fatalf("the loop watches %+v", l.job.in)
	}
}

// A waiting watch beats at a third of the heartbeat timeout the workflow
// set (the SDK sends at most one in 0.8 of it), unless configured.
func TestBeatEvery(t *testing.T) {
	for _, c := range []struct{ configured, timeout, want time.Duration }{
		{0, 5 * time.Minute, 100 * time.Second},
		{0, time.Minute, 20 * time.Second},
		{0, 0, 20 * time.Second},
		{time.Second, 5 * time.Minute, time.Second},
	} {
		if got := beatEvery(c.configured, c.timeout); got != c.want {
			t.Errorf("beatEvery(%s, %s) = %s, want %s", c.configured, c.timeout, got, c.want)
		}
	}
}

// A control daemon started while adopted is reported at the loop's next
// cycle, with no other check due; stopped again, that is reported too.
func TestControlDaemonReportedWithinOneRound(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	done := start(w, watchInput(quiet, time.Hour))
	registered(l)
	d := activities.ControlDaemon{PID: 4242, Exe: "predecessor-sync", User: "ops", Unit: "sync.service", Stop: "systemctl --user -M ops@ disable --now sync.service; loginctl disable-linger ops"}
	f.set(func(f *fakeChecks) { f.control = []activities.ControlDaemon{d} })
	recs, drifts := f.counts()
	l.Cycle(context.Background(), time.Now().Add(time.Second)) // one round, nothing else due
	got := <-done
	if got.err != nil || got.r.Bound || len(got.r.Control) != 1 || got.r.Control[0] != d {
		t.Fatalf("watch = %+v, %v; want the control daemon", got.r, got.err)
	}
	if r2, d2 := f.counts(); r2 != recs || d2 != drifts {
		t.Fatal("the round ran checks that were not due")
	}
	in := watchInput(got.r.Digest, time.Hour)
	in.KnownControl = ControlDigest(got.r.Control)
	again := start(w, in)
	f.set(func(f *fakeChecks) { f.control = nil })
	l.Cycle(context.Background(), time.Now().Add(2*time.Second))
	if r := <-again; r.err != nil || r.r.Bound || len(r.r.Control) != 0 {
		t.Fatalf("watch after the daemon stopped = %+v, %v; want none running", r.r, r.err)
	}
}

// A new watch that knows a control daemon runs, while it still runs, does
// not answer that none does (the new watch starts with no findings): it
// waits, and answers at its bound with the daemon still listed.
func TestNewWatchKeepsTheRunningControlDaemon(t *testing.T) {
	d := activities.ControlDaemon{PID: 4242, Exe: "predecessor-sync", Stop: "kill 4242"}
	f := &fakeChecks{control: []activities.ControlDaemon{d}}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local}
	w := &Watcher{Loop: l}
	in := watchInput(Findings{Control: []activities.ControlDaemon{d}}.Digest(), 300*time.Millisecond)
	in.KnownControl = ControlDigest([]activities.ControlDaemon{d})
	got := <-start(w, in)
	if got.err != nil || !got.r.Bound || len(got.r.Control) != 1 {
		t.Fatalf("watch = %+v, %v; want an answer at the bound, the daemon still running", got.r, got.err)
	}
}

// An agent whose loop slept its idle tick with no watch runs a new watch's
// round at once, not a tick later.
func TestInstallWakesTheLoop(t *testing.T) {
	f := &fakeChecks{}
	l := &Loop{Checks: f, Records: &fakeRecords{}, Local: local, Tick: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	for { // the loop has run its first cycle, with no watch, and sleeps
		l.mu.Lock()
		asleep := l.wake != nil
		l.mu.Unlock()
		if asleep {
			break
		}
		time.Sleep(time.Millisecond)
	}
	d := activities.ControlDaemon{PID: 7, Exe: "predecessor-sync", Stop: "kill 7"}
	f.set(func(f *fakeChecks) { f.control = []activities.ControlDaemon{d} })
	installed(l, watchInput(quiet, time.Hour), time.Now())
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		n := len(l.find.Control)
		l.mu.Unlock()
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not run the new watch's round within 5 s of its install (its idle tick is an hour)")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
