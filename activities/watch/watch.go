// Package watch is the node agent's own watch of an adopted node: its loop
// reasserts the marked rules and looks for drift on the node's intervals,
// Temporal or not, and the Watch activity (activity.go) returns to the
// workflow only when what the loop found changed. What the loop acts on was
// registered by a Watch request the node authorized (its own file derives
// the plan, the request comes from the workflow it serves), and each check
// authorizes again against the file as it is now; the node's own records
// (adopted, converged, a flip under way, a module rolled back) veto it.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/nodestate"
)

// Checks are the node's checks: the activities' own Reconcile, CheckDrift
// and CheckControl (each authorizes against the node's file before it
// acts).
type Checks interface {
	Reconcile(ctx context.Context, in activities.ReconcileInput) (*activities.RulesResult, error)
	CheckDrift(ctx context.Context, in activities.DriftInput) (*activities.DriftResult, error)
	CheckControl(ctx context.Context, in activities.DriftInput) (*activities.ControlResult, error)
}

// Records are the node's own records the loop obeys (nodestate.Dir).
type Records interface {
	Adopted() (nodestate.Marker, bool, error)
	Converged() (bool, error)
	Flip() (*nodestate.FlipRecord, error)
	Cutovers() (map[string]nodestate.CutoverRecord, error)
	Owner() (nodestate.Owner, bool, error)
}

// Input is nodewire.Input.
type Input = nodewire.Input

// Findings is nodewire.Findings.
type Findings = nodewire.Findings

// ControlDigest is nodewire.ControlDigest.
func ControlDigest(ds []activities.ControlDaemon) string { return nodewire.ControlDigest(ds) }

// Result is nodewire.Result.
type Result = nodewire.Result

// Loop is the agent's own loop. Run it once per agent; Watch activities
// register what it watches and wait on it.
type Loop struct {
	Checks  Checks
	Records Records
	Log     io.Writer
	// Local is the node's own authority, read now (the agent's file): the
	// plan a request names by hash, whose intervals the loop keeps.
	Local func() (*authority.Authority, error)
	// Store keeps the watched request across the agent's restarts
	// (store.go); nil keeps it in memory only.
	Store Store
	// Tick is the loop's clock between checks (tests shorten it).
	Tick time.Duration

	// serving is held shared while the agent serves another activity
	// (gate.go), and by a check alone.
	serving sync.RWMutex

	mu        sync.Mutex
	job       *job
	find      Findings
	found     bool
	restored  []marks.MarkedRule
	present   int
	reconAt   time.Time
	nextRecon time.Time
	nextDrift time.Time
	changed   chan struct{} // closed (and replaced) at each change
	// wake cuts the loop's sleep short when a watch is installed: an
	// agent that slept its idle tick with no watch runs the new one's
	// round at once, not a tick later.
	wake chan struct{}
	// gen numbers the watches: only the newest may take the findings. A
	// watch the workflow cancelled learns it at its next heartbeat, and
	// must not take a repair meant for the one that replaced it.
	gen uint64
}

// enter makes a new watch the newest, waking the older ones to leave.
func (l *Loop) enter() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.signal()
	return l.gen
}

// job is a registered watch: its input, the workflow that asked, and the
// intervals of the node's own plan that input names.
type job struct {
	in       Input
	workflow string
	every    Intervals
}

// Intervals are how often the loop reasserts the marks and looks for
// drift (the plan's reconcile_interval and drift_interval).
type Intervals struct {
	Reconcile time.Duration `json:"reconcile"`
	Drift     time.Duration `json:"drift"`
}

// own is the node's own plan, read from its file now, if it is the plan
// ref names; else the refusal the activities give a request under another
// plan.
func (l *Loop) own(ref config.PlanRef) (config.Plan, error) {
	if l.Local == nil {
		return config.Plan{}, temporal.NewNonRetryableApplicationError(
			"the node's agent has no local configuration to check a watch against; start adopt-worker with --config", authority.ErrLocalConfig, nil)
	}
	auth, err := l.Local()
	if err != nil {
		return config.Plan{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"node %s's own configuration cannot be read, so no watch is served: %v; fix the file on the node", ref.Node, err), authority.ErrLocalConfig, nil)
	}
	if err := authority.CheckDigestKind(auth, ref); err != nil {
		return config.Plan{}, err
	}
	if err := authority.CheckPlan(auth, ref); err != nil {
		return config.Plan{}, err
	}
	return auth.Plan, nil
}

// signal wakes every waiter; l.mu held.
func (l *Loop) signal() {
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}

// waitCh is the channel closed at the next change; l.mu held.
func (l *Loop) waitCh() chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// same reports whether j asks what the loop already watches, for the same
// workflow (what it knows and its bound aside).
func (l *Loop) same(j *job) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.job != nil && l.job.workflow == j.workflow && l.job.key() == j.key()
}

// key is the job's request without what the workflow knows and its bound.
func (j *job) key() string {
	in := j.in
	in.Known, in.Bound = "", 0
	b, _ := json.Marshal(in)
	return string(b)
}

// install makes j what the loop watches, its checks next due at the
// times given, and its watch the newest.
func (l *Loop) install(j *job, recon, drift time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.signal()
	l.job = j
	l.nextRecon, l.nextDrift = recon, drift
	select {
	case l.wakeCh() <- struct{}{}:
	default:
	}
	// Findings are of the watch that asked for them: a new one starts
	// with none, so nothing of an earlier request's checks is reported.
	l.find, l.found = Findings{}, false
	return l.gen
}

// Run runs the loop until ctx ends: every Tick, the checks that are due.
func (l *Loop) Run(ctx context.Context) {
	tick := l.Tick
	if tick <= 0 {
		tick = 10 * time.Second
	}
	for {
		l.Cycle(context.WithoutCancel(ctx), time.Now())
		l.mu.Lock()
		wake := l.wakeCh()
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-time.After(l.sleep(tick)):
		}
	}
}

// wakeCh is the channel install wakes the loop with; l.mu held.
func (l *Loop) wakeCh() chan struct{} {
	if l.wake == nil {
		l.wake = make(chan struct{}, 1)
	}
	return l.wake
}

// sleep is how long the loop waits for its next cycle: tick, or the
// watched plan's shortest interval when that is shorter.
func (l *Loop) sleep(tick time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.job == nil {
		return tick
	}
	for _, d := range []time.Duration{l.job.every.Reconcile, l.job.every.Drift} {
		if d > 0 && d < tick {
			tick = d
		}
	}
	return tick
}

// Cycle runs the registered watch's checks that are due at now, under the
// agent's own context. The control daemons are looked for first, on every
// cycle: the first one after the agent starts checks them before anything
// else.
func (l *Loop) Cycle(ctx context.Context, now time.Time) {
	l.control(ctx)
	l.mu.Lock()
	j := l.job
	recon := j != nil && j.in.Reconcile && j.every.Reconcile > 0 && !now.Before(l.nextRecon)
	drift := j != nil && j.in.Drift && j.every.Drift > 0 && !now.Before(l.nextDrift)
	if recon {
		l.nextRecon = now.Add(j.every.Reconcile)
	}
	if drift {
		l.nextDrift = now.Add(j.every.Drift)
	}
	if (recon || drift) && !l.serving.TryLock() {
		// A request is being served: these checks wait for the next tick.
		l.nextRecon, l.nextDrift = time.Time{}, time.Time{}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	if !recon && !drift {
		return
	}
	defer l.serving.Unlock()
	if c := l.check(ctx, j, recon, drift); c != nil {
		l.record(j, now, c)
	}
}

// control looks for the predecessor's control daemons for the registered
// watch, unless the node's records veto it, and wakes the watchers when
// what runs changed. It only reads, so it needs no gate.
func (l *Loop) control(ctx context.Context) {
	l.mu.Lock()
	j := l.job
	l.mu.Unlock()
	if j == nil {
		return
	}
	if why, err := l.vetoed(j); err != nil || why != "" {
		return
	}
	res, err := l.Checks.CheckControl(ctx, activities.DriftInput{Plan: j.in.Plan})
	if err != nil {
		l.logf("watch: node %s: control daemons: %s", j.in.Plan.Node, errText(err))
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.job != j {
		return
	}
	next := l.find
	next.Control = res.Running
	if next.Digest() != l.find.Digest() {
		for _, d := range res.Running {
			l.logf("watch: node %s: the predecessor's control daemon runs: %s", j.in.Plan.Node, d)
		}
		l.find = next
		l.signal()
	}
}

// checked is what one pass of the checks found.
type checked struct {
	recon, drift bool
	res          *activities.RulesResult
	items        []activities.DriftItem
	rerr, derr   error
}

// check runs the checks asked of j, unless the node's records veto them
// (nil then).
func (l *Loop) check(ctx context.Context, j *job, recon, drift bool) *checked {
	if !recon && !drift {
		return nil
	}
	if why, err := l.vetoed(j); err != nil || why != "" {
		if err != nil {
			l.logf("watch: read the node's records: %v", err)
		} else if final(why) {
			l.forget(why)
		}
		return nil
	}
	c := &checked{recon: recon, drift: drift}
	if recon {
		owners, forward := l.allowed(j.in)
		c.res, c.rerr = l.Checks.Reconcile(ctx, activities.ReconcileInput{Plan: j.in.Plan, Owners: owners, Forward: forward})
	}
	if drift {
		var dr *activities.DriftResult
		dr, c.derr = l.Checks.CheckDrift(ctx, activities.DriftInput{Plan: j.in.Plan, Custody: j.in.Custody, Firewall: j.in.Firewall})
		if c.derr == nil {
			c.items = dr.Items
		}
	}
	return c
}

// record takes what the checks of j found at now into the loop's findings,
// and wakes the watchers when they changed or a repair was made.
func (l *Loop) record(j *job, now time.Time, c *checked) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.job != j { // replaced while the checks ran: theirs is older
		return
	}
	next := l.find
	repaired := false
	for _, err := range []error{c.rerr, c.derr} {
		if err != nil {
			l.logf("watch: node %s: %s", j.in.Plan.Node, errText(err))
		}
	}
	if c.recon {
		next.ReconcileError = errText(c.rerr)
		if c.rerr == nil {
			l.reconAt, l.present = now, len(c.res.Present)
			if len(c.res.Added) > 0 {
				repaired = true
				l.restored = append(l.restored, c.res.Added...)
				l.logf("watch: %d marked rule(s) of node %s had vanished and were put back", len(c.res.Added), j.in.Plan.Node)
			}
		}
	}
	if c.drift {
		next.DriftError = errText(c.derr)
		if c.derr == nil {
			next.Drift = c.items
		}
	}
	if next.Digest() != l.find.Digest() || !l.found || repaired {
		l.find, l.found = next, true
		l.signal()
	}
}

// vetoed says why the node's own records stop the checks now: not adopted
// (released), converged (the mesh guard keeps its table), a flip under way
// or confirmed, or a workflow serving the node other than the one that
// registered the watch.
func (l *Loop) vetoed(j *job) (string, error) {
	if l.Records == nil {
		return "", nil
	}
	if _, ok, err := l.Records.Adopted(); err != nil || !ok {
		return vetoNotAdopted, err
	}
	if conv, err := l.Records.Converged(); err != nil || conv {
		return vetoConverged, err
	}
	if r, err := l.Records.Flip(); err != nil || r.Pending() || (r != nil && r.State == nodestate.FlipConfirmed) {
		return vetoFlip, err
	}
	if o, ok, err := l.Records.Owner(); err != nil || (ok && j.workflow != "" && o.Workflow != j.workflow) {
		return vetoOtherWorkflow, err
	}
	return "", nil
}

// The node's records that veto the checks. A flip under way may be
// reverted, and the watch goes on; the others end it for good.
const (
	vetoNotAdopted    = "node not adopted"
	vetoConverged     = "node converged"
	vetoFlip          = "flip under way"
	vetoOtherWorkflow = "served by another workflow"
)

// final reports whether a veto ends the watch for good (released,
// converged, another workflow's node): nothing is kept for a restart.
func final(why string) bool { return why != "" && why != vetoFlip }

// allowed is the owners whose marks the loop keeps: the ones registered,
// less a module whose cutover the node rolled back (its marks were closed
// by that rollback).
func (l *Loop) allowed(in Input) (owners, forward map[string][]config.Port) {
	var recs map[string]nodestate.CutoverRecord
	if l.Records != nil {
		recs, _ = l.Records.Cutovers()
	}
	keep := func(o string) bool {
		r, ok := recs[o]
		return o == flip.OwnerFoundation || !ok || r.State != nodestate.CutoverRolledBack
	}
	owners, forward = map[string][]config.Port{}, map[string][]config.Port{}
	for _, o := range sortedKeys(in.Owners) {
		if keep(o) {
			owners[o] = in.Owners[o]
		}
	}
	for _, o := range sortedKeys(in.Forward) {
		if keep(o) {
			forward[o] = in.Forward[o]
		}
	}
	return owners, forward
}

// take is the loop's findings as a result, and the repairs since the last
// one (handed over: the next result does not repeat them).
func (l *Loop) take() *Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := &Result{Findings: l.find, Digest: l.find.Digest(), Checked: l.found, Restored: l.restored, Present: l.present, Reconciled: l.reconAt}
	l.restored = nil
	return r
}

// peek is the loop's findings as a result, handing nothing over.
func (l *Loop) peek() Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Result{Findings: l.find, Digest: l.find.Digest(), Present: l.present, Reconciled: l.reconAt}
}

// pending reports whether the loop has something for watch gen, which
// knows known, whether gen is still the newest, and the channel closed at
// the next change.
func (l *Loop) pending(gen uint64, known string) (ok, newest bool, changed chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	control := l.job != nil && ControlDigest(l.find.Control) != l.job.in.KnownControl
	return (l.found && (l.find.Digest() != known || len(l.restored) > 0)) || control, l.gen == gen, l.waitCh()
}

func (l *Loop) logf(format string, args ...any) {
	if l.Log != nil {
		fmt.Fprintf(l.Log, format+"\n", args...)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

func sortedKeys(m map[string][]config.Port) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
