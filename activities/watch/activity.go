package watch

// This file holds the Watch activity: the workflow's one long request to an
// adopted node, answered only when the node's findings change.

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/caller"
	"adoption/activities/nodewire"
)

// ErrSuperseded is the error type of a watch a newer one replaced.
const ErrSuperseded = "Superseded"

// DefaultBound is how long a watch lasts with nothing changed, when the
// request names no bound.
const DefaultBound = 6 * time.Hour

// Watcher serves Watch activities from the agent's loop.
type Watcher struct {
	Loop *Loop
	// Beat is how often a waiting watch heartbeats: when zero, a third of
	// the activity's heartbeat timeout (tests shorten it).
	Beat time.Duration
}

// Heartbeat is what a waiting watch heartbeats: when the marks were last
// reasserted and the findings' digest (status reads it from the pending
// activity; it never enters the history).
type Heartbeat struct {
	Reconciled time.Time `json:"reconciled,omitzero"`
	Digest     string    `json:"digest"`
}

// Watch runs both checks at once under the request's own context (so a
// workflow the node does not serve, or a plan its file does not derive, is
// refused and nothing is registered), registers the request with the
// agent's loop, and returns when the loop's findings differ from in.Known
// or it repaired something, or after in.Bound with nothing changed. It
// heartbeats while it waits: an agent that dies is seen by its heartbeat
// timeout.
func (w *Watcher) Watch(ctx context.Context, in Input) (*Result, error) {
	bound := in.Bound
	if bound <= 0 {
		bound = DefaultBound
	}
	c, _ := caller.Of(ctx)
	j := &job{in: in, workflow: c.Workflow}
	var gen uint64
	if w.Loop.same(j) {
		gen = w.Loop.enter()
	} else {
		var err error
		if gen, err = w.first(ctx, j); err != nil {
			return nil, err
		}
	}
	return w.wait(ctx, gen, in.Known, bound)
}

// first checks a new request at once under its own context, and installs
// it unless refused. The same request again (the workflow's next watch,
// knowing the last answer) is not checked anew: the loop keeps its
// schedule, so a node that keeps losing a mark reports it once an interval.
func (w *Watcher) first(ctx context.Context, j *job) (uint64, error) {
	now := time.Now()
	w.Loop.serving.Lock()
	first := w.Loop.check(ctx, j, j.in.Reconcile, j.in.Drift)
	w.Loop.serving.Unlock()
	if first != nil {
		for _, err := range []error{first.rerr, first.derr} {
			if refused(err) {
				return 0, err
			}
		}
	}
	// The request names the plan by hash: the node's own file must derive
	// it, and its intervals are the loop's.
	plan, err := w.Loop.own(j.in.Plan)
	if err != nil {
		return 0, err
	}
	j.every = Intervals{Reconcile: plan.ReconcileInterval, Drift: plan.DriftInterval}
	gen := w.Loop.install(j, now.Add(j.every.Reconcile), now.Add(j.every.Drift))
	if first != nil {
		w.Loop.record(j, now, first)
	}
	// The control daemons too, before the watch waits: install starts it
	// with no findings, and a watch that knows a daemon runs would
	// otherwise answer at once that none does, then that one does at the
	// next cycle, and so on.
	w.Loop.control(ctx)
	w.Loop.keep(j)
	return gen, nil
}

// wait returns the loop's findings once they differ from known or carry a
// repair, or at bound; it heartbeats meanwhile.
func (w *Watcher) wait(ctx context.Context, gen uint64, known string, bound time.Duration) (*Result, error) {
	var timeout time.Duration
	if activity.IsActivity(ctx) {
		timeout = activity.GetInfo(ctx).HeartbeatTimeout
	}
	beat := beatEvery(w.Beat, timeout)
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	end := time.NewTimer(bound)
	defer end.Stop()
	for {
		ok, newest, changed := w.Loop.pending(gen, known)
		if !newest {
			// A newer watch came: the workflow cancelled this one.
			return nil, temporal.NewApplicationError("superseded by a newer watch of the same node", ErrSuperseded)
		}
		if ok {
			return w.Loop.take(), nil
		}
		select {
		case <-changed:
		case <-end.C:
			r := w.Loop.take()
			r.Bound = true
			return r, nil
		case <-ctx.Done():
			// Cancelled by the workflow: a request comes, which the
			// gate keeps the loop away from. The loop keeps what it
			// watches (the node watches itself, Temporal or not).
			return nil, ctx.Err()
		case <-ticker.C:
			if activity.IsActivity(ctx) {
				r := w.Loop.peek()
				activity.RecordHeartbeat(ctx, Heartbeat{Reconciled: r.Reconciled, Digest: r.Digest})
			}
		}
	}
}

// BeatEvery is nodewire.BeatEvery.
func BeatEvery(timeout time.Duration) time.Duration { return nodewire.BeatEvery(timeout) }

// beatEvery is nodewire.HeartbeatEvery.
func beatEvery(configured, timeout time.Duration) time.Duration {
	return nodewire.HeartbeatEvery(configured, timeout)
}

// refused reports a refusal: an error no retry changes (the node's file,
// the workflow it serves, a request it does not declare).
func refused(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.NonRetryable()
}
