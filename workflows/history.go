// Bounded histories: a node's workflow lives for weeks, so what it writes to
// its history while nothing happens must be nothing. Waiting for a down
// agent adds no event (the activity waits in its queue, where status finds
// it); search attributes are written
// when they change; a wait's timer is cancelled when the wait ends early;
// only activities that heartbeat get a heartbeat timeout; requests still
// queued when the workflow ends are answered in its state, not dropped.
package workflows

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
)

// interactiveTimeout bounds an activity an operator waits for (the preview
// Update): the agent down must answer the CLI, not hang it, nor hold the
// Update open and with it the workflow's continue-as-new.
const interactiveTimeout = time.Minute

// quickEnough bounds one attempt of an activity that does not heartbeat.
const quickEnough = 30 * time.Second

// heartbeatTimeout is how long a heartbeating activity may go silent
// before its attempt counts as lost (its agent died).
const heartbeatTimeout = 10 * time.Second

// heartbeating are the activities that record heartbeats: only they get a
// heartbeat timeout (on the others it would only kill long, healthy runs).
var heartbeating = map[string]bool{
	"Probe": true, "Adopt": true, "FlipTrip": true, "CommitFlip": true, "ConvergeFiles": true,
	"CutoverPreflight": true, "CutoverCreate": true, "CutoverSwap": true, "CutoverWaitHealthy": true, "CutoverRollback": true,
	"RaiseFoundation": true,
}

// refusals are error types that can never succeed on a retry; activities
// raise them non-retryable already, this keeps them so if one forgets.
var refusals = []string{
	nodewire.ErrWrongNode, nodewire.ErrControlRunning, nodewire.ErrUnsupportedFW, nodewire.ErrBadPath,
	nodewire.ErrBadModule, nodewire.ErrCutoverRefused, nodewire.ErrMissingContent,
	nodewire.ErrPortCollision, authority.ErrBadOwner, nodewire.ErrNotAdopted, nodewire.ErrStalePreview,
	nodewire.ErrFlipReverted,
}

type interactiveKey struct{}

// interactive marks ctx as serving an operator who waits for the answer.
func interactive(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, interactiveKey{}, true)
}

// activityName is the registered name of an activity method value.
func activityName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	name = strings.TrimSuffix(name, "-fm")
	return name[strings.LastIndex(name, ".")+1:]
}

// exec runs a node activity on the node's own queue. While the node's agent
// is down the activity simply waits in its queue, where status finds it
// (the CLI's and the Web UI's pending activities). A refusal comes back at
// once; a transient failure is retried.
func (n *node) exec(ctx workflow.Context, summary string, fn, in, out any) error {
	opts := workflow.ActivityOptions{
		TaskQueue:           NodeQueue(n.s.Node),
		StartToCloseTimeout: 10 * time.Minute,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        10,
			NonRetryableErrorTypes: refusals,
		},
	}
	if heartbeating[activityName(fn)] {
		opts.HeartbeatTimeout = heartbeatTimeout
	} else {
		// No heartbeat tells a dead agent from a slow one: these steps are
		// short (a netlink batch, a query), so an attempt whose agent died
		// is given up after quickEnough and retried by the agent that
		// comes back, instead of after ten minutes.
		opts.StartToCloseTimeout = quickEnough
	}
	if v, _ := ctx.Value(interactiveKey{}).(bool); v {
		opts.ScheduleToCloseTimeout = interactiveTimeout
	}
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), fn, in)
	err := n.signHint(ctx, n.answered(f.Get(ctx, out), opts))
	if n.s.Waiting != "" { // the agent answered: not silent (watch.go)
		n.s.Waiting = ""
		n.publish(ctx)
	}
	return err
}

// answered is the error of an activity run with opts: an interactive one
// that timed out says the agent did not answer.
func (n *node) answered(err error, opts workflow.ActivityOptions) error {
	var te *temporal.TimeoutError
	if errors.As(err, &te) && opts.ScheduleToCloseTimeout > 0 {
		return fmt.Errorf("node %s's agent did not answer within %s (is adopt-worker running on it?)", n.s.Node, interactiveTimeout)
	}
	return err
}

// awaitWithTimeout is workflow.AwaitWithTimeout with its timer cancelled
// when the condition comes first (the SDK leaves it running by default,
// and it fires later as one more event and workflow task).
func (n *node) awaitWithTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (bool, error) {
	if cond() {
		return true, nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, d)
	if err := workflow.Await(ctx, func() bool { return timer.IsReady() || cond() }); err != nil {
		cancel()
		return false, err
	}
	if cond() {
		if !timer.IsReady() {
			cancel()
		}
		return true, nil
	}
	return false, nil
}

// finish answers what is left when the workflow ends: signals delivered
// but not yet taken are refused by the validator (the phase is final),
// Updates in flight finish, and requests still queued are answered in the
// state with the reason they were not served; the fleet, if any, has been
// told the end.
func (n *node) finish(ctx workflow.Context) {
	n.drainSignals(ctx)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	for _, r := range n.s.Queue {
		why := fmt.Sprintf("not served: %s: node %s is %s and its workflow has ended", describe(r.Kind, r.Module), n.s.Node, n.s.Phase)
		n.event(ctx, why)
		workflow.GetLogger(ctx).Warn("request not served", "kind", r.Kind, "module", r.Module, "phase", n.s.Phase)
	}
	n.s.Queue = nil
	workflow.SetCurrentDetails(ctx, Details(&n.s))
	// The fleet learns the end from the last progress signal (after its
	// continue-as-new it has no other way): a signal sent in the workflow
	// task that completes the workflow is not delivered, so wait for it.
	// An error (the fleet has ended) changes nothing here.
	if n.toldSent != nil {
		_ = n.toldSent.Get(ctx, nil)
	}
}

// takeSignals takes the requests' signals as they come, waiting on the
// channels' lengths rather than in a Selector: a Selector takes a value out
// of its channel when it arrives and holds it until its coroutine runs, so
// a continue-as-new decided in between (drainSignals finds the channel
// empty) would lose it. Left in the channel, drainSignals finds it. Within
// one workflow task, requests are queued by kind (migrate, retry,
// flip, release, prune, drift-accept), not by arrival.
func (n *node) takeSignals(ctx workflow.Context) {
	var chans []workflow.ReceiveChannel
	for _, kind := range []string{SignalMigrate, SignalRetry, SignalFlip, SignalRelease, SignalPrune, SignalDriftAccept} {
		chans = append(chans, workflow.GetSignalChannel(ctx, kind))
	}
	for {
		_ = workflow.Await(ctx, func() bool {
			for _, c := range chans {
				if c.Len() > 0 {
					return true
				}
			}
			return false
		})
		n.drainSignals(ctx)
	}
}
