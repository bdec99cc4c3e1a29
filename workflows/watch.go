// The watch: while a node is adopted and idle, the workflow waits on one
// Watch activity on the node's queue. The node's agent reasserts the marks
// and looks for drift in its own loop, and the activity answers only when
// what it found changed (drift, a repair, a failed check) or after its
// bound; an agent that dies is seen by the activity's heartbeat timeout,
// with no timer in the workflow.
package workflows

import (
	"errors"
	"fmt"
	"time"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// watcher is called through a nil pointer, like a.
var watcher *nodewire.Watcher

const (
	// watchBound is how long a watch lasts with nothing changed.
	watchBound = 6 * time.Hour
	// watchHeartbeat is how long a watch may go silent before its
	// attempt counts as lost (the agent died); it waits in its queue for
	// the agent that comes back. Each heartbeat is a write on the server,
	// the main cost of an idle node: the agent beats at a third of this,
	// 3 an hour, so an idle node is at most idleWritesPerHour writes a
	// node-hour (docs/workflows.md). Whether an agent is alive, status
	// reads from its queue's pollers (which cost no write), not from this.
	watchHeartbeat = time.Hour
	// idleWritesPerHour is what an idle adopted node may cost the server
	// in writes an hour (docs/operations.md): watchIdleWrites holds it.
	idleWritesPerHour = 6
	// watchBackoff is how long a refused watch waits before it is asked
	// again (a request wakes it at once).
	watchBackoff = 30 * time.Minute
	// watchRetry is how long a watch that failed otherwise (not refused,
	// not silent) waits before it is asked again (its one attempt is not
	// retried by the server).
	watchRetry = 30 * time.Second
)

// watchCycleWrites are the server's writes of one watch that answers at
// its bound: the activity's completion, the workflow task it wakes
// (scheduled, started, completed with the next watch scheduled).
const watchCycleWrites = 3

// watchIdleWrites are an idle adopted node's writes an hour: the watch's
// heartbeats (the agent's beat, nodewire.BeatEvery), and a watch answering at
// its bound every watchBound.
func watchIdleWrites() float64 {
	return float64(time.Hour)/float64(nodewire.BeatEvery(watchHeartbeat)) + watchCycleWrites*float64(time.Hour)/float64(watchBound)
}

func (n *node) watchDue() bool { return n.reconcileDue() || n.driftDue() }

// known is the digest of the findings the workflow holds.
func (n *node) known() string {
	f := nodewire.Findings{Drift: n.s.Drift, DriftError: n.s.DriftError, Control: n.s.Control}
	if n.s.LastReconcile != nil {
		f.ReconcileError = n.s.LastReconcile.Error
	}
	return f.Digest()
}

// watchNode waits on the node's watch until it answers or ready holds (a
// request, a continue-as-new). It returns true when ready holds; the watch
// is then cancelled.
func (n *node) watchNode(ctx workflow.Context, ready func() bool) (bool, error) {
	in := nodewire.Input{Plan: n.s.Plan.Ref(), Owners: n.s.Opened, Forward: n.s.OpenedForward, Reconcile: n.reconcileDue(),
		Custody: n.driftBaseline(), Firewall: n.s.FirewallFingerprint, Drift: n.driftDue(), Known: n.known(), KnownControl: nodewire.ControlDigest(n.s.Control), Bound: watchBound}
	opts := workflow.ActivityOptions{
		TaskQueue:           NodeQueue(n.s.Node),
		StartToCloseTimeout: watchBound + 10*time.Minute,
		HeartbeatTimeout:    watchHeartbeat,
		Summary:             "watch: the node reasserts its marks and looks for drift; answers when something changed",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: refusals,
		},
	}
	// The workflow hears of an agent that stopped beating (one attempt,
	// the heartbeat timeout comes back): AdoptionAttention says
	// agent-silent until a watch answers again. While silent the watch
	// asks to be answered at once, so the agent's return clears it within
	// a beat.
	opts.RetryPolicy.MaximumAttempts = 1
	if n.s.Waiting != "" {
		in.Bound = time.Second
	}
	wctx, cancel := workflow.WithCancel(ctx)
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(wctx, opts), watcher.Watch, in)
	if err := workflow.Await(ctx, func() bool { return f.IsReady() || ready() }); err != nil {
		cancel()
		return false, err
	}
	if !f.IsReady() {
		cancel()
		return true, nil
	}
	var res nodewire.Result
	err := f.Get(ctx, &res)
	var te *temporal.TimeoutError
	var ae *temporal.ApplicationError
	switch {
	case err != nil && errors.As(err, &te):
		if n.s.Waiting == "" {
			n.s.Waiting = fmt.Sprintf("node %s's agent stopped answering its watch (%s): is adopt-worker running on it? The watch waits in task queue %s for it", n.s.Node, errorMessage(err), NodeQueue(n.s.Node))
			n.event(ctx, n.s.Waiting)
			n.publish(ctx)
		}
		return false, nil // asked again at once: it waits in the queue for the agent
	case err != nil && !(errors.As(err, &ae) && ae.NonRetryable()):
		// A fault the attempt's retry used to absorb: asked again soon.
		return n.awaitWithTimeout(ctx, watchRetry, ready)
	case err != nil:
		n.event(ctx, "watch refused: "+errorMessage(err))
		n.publish(ctx)
		return n.awaitWithTimeout(ctx, watchBackoff, ready)
	}
	if n.s.Waiting != "" { // nothing else runs meanwhile: it was the watch's
		n.s.Waiting = ""
		n.event(ctx, "node "+n.s.Node+"'s agent answers its watch again")
	}
	n.takeWatch(ctx, res)
	return false, nil
}

// takeWatch records what the node's watch found. The findings are taken
// whole, so the next watch knows exactly what this one answered.
func (n *node) takeWatch(ctx workflow.Context, res nodewire.Result) {
	if len(res.Restored) > 0 {
		n.s.Marks = mergeMarks(n.s.Marks, res.Restored)
		n.event(ctx, fmt.Sprintf("reconcile: %d marked rule(s) had vanished and were put back: %s", len(res.Restored), markList(res.Restored)))
	}
	// The control daemons are looked for on every round, before the
	// other checks have run: taken whatever Checked says.
	if nodewire.ControlDigest(res.Control) != nodewire.ControlDigest(n.s.Control) {
		if len(res.Control) == 0 {
			n.event(ctx, "the predecessor's control daemons are stopped: migrate and flip may go on")
		}
		for _, d := range res.Control {
			n.event(ctx, "the predecessor's control daemon is running (migrate and flip are refused until it stops): "+d.String())
		}
		n.s.Control = res.Control
	}
	if !res.Checked {
		n.publish(ctx)
		return
	}
	// The last reconcile in the state is the last one that changed
	// something (a repair, a failure or its end); between answers the
	// pending Watch's heartbeat says when the node last reconciled.
	prev := Reconcile{}
	if n.s.LastReconcile != nil {
		prev = *n.s.LastReconcile
	}
	if res.ReconcileError != "" && res.ReconcileError != prev.Error {
		n.event(ctx, "reconcile failed: "+res.ReconcileError)
	}
	if n.s.LastReconcile == nil || len(res.Restored) > 0 || res.ReconcileError != prev.Error {
		rec := &Reconcile{At: res.Reconciled, Restored: res.Restored, Present: res.Present, Error: res.ReconcileError}
		if rec.At.IsZero() {
			rec.At = prev.At
		}
		if !rec.At.IsZero() || rec.Error != "" {
			n.s.LastReconcile = rec
		}
	}
	if res.DriftError != "" && res.DriftError != n.s.DriftError {
		n.event(ctx, "drift check failed: "+res.DriftError)
	}
	n.s.DriftError = res.DriftError
	if res.DriftError == "" {
		n.takeDrift(ctx, res.Drift)
	}
	n.publish(ctx)
}
