// The flip, in one round trip to the node: one activity on the node
// previews, applies, proves the way out, confirms and commits; the
// orchestrator's witness runs beside it, and the node learns its verdict
// from the witness's heartbeat (witness/verdict.go) or, an older agent or
// orchestrator, by the QueryFlipWitness query. docs/flip.md tells the
// sequence.
package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/firewall/flipwire"
	"adoption/witness"
)

// flipTripActivity is the node activity's registered name, which the
// witness looks for among the run's pending activities.
const flipTripActivity = "FlipTrip"

// registerFlipTrip answers the node's question of the witness's verdict on
// a flip: read-only, so it adds nothing to the history.
func (n *node) registerFlipTrip(ctx workflow.Context) error {
	return workflow.SetQueryHandler(ctx, nodewire.QueryFlipWitness, func(id string) (nodewire.WitnessVerdict, error) {
		if n.verdict.ID != id {
			return nodewire.WitnessVerdict{ID: id}, nil
		}
		return n.verdict, nil
	})
}

// errNotRegistered is the error type of an activity the node's agent does
// not know: an agent older than FlipTrip.
const errNotRegistered = "ActivityNotRegisteredError"

// flipTrip is the flip in one round trip to the node. The fleet is not told
// of the flipping phase (nothing it acts on changes): only of the node
// converged, or back as it was. again says this is the one more try after
// a stale refusal, which is not tried again.
func (n *node) flipTrip(ctx workflow.Context, spec flipwire.MeshSpec, refused func(*flipwire.Preview), again bool) {
	n.s.LastError = ""
	prev, prevPhase := n.s.Flip, n.s.Phase
	n.quiet = true
	defer func() { n.quiet = false }()
	n.setPhase(ctx, PhaseFlipping)
	n.s.FlipAttempts++
	id := fmt.Sprintf("%s-%d", n.s.Node, n.s.FlipAttempts)
	n.s.Flip = &FlipStatus{ID: id, State: FlipStateFlipping}
	back := func(outcome, why string) {
		n.s.Flip.State, n.s.Flip.Error = outcome, why
		n.s.LastError = "flip " + id + " " + outcome + ": " + why
		n.event(ctx, n.s.LastError)
		n.quiet = false
		n.setPhase(ctx, PhaseAdopted)
	}
	in := nodewire.FlipTripInput{FlipInput: nodewire.FlipInput{Plan: n.s.Plan.Ref(), Spec: spec, ID: id, ConfirmTimeout: n.s.Plan.ConfirmTimeout,
		Intent: n.intent, Decisions: n.nodeFileDecisions(true), Preview: true}}
	// The witness starts now and dials once the node reports the flip
	// applied; its verdict is kept for the node's query.
	wctx, stopWitness := workflow.WithCancel(ctx)
	defer stopWitness()
	ended, witnessed := n.witnessTrip(wctx, id)
	if in.Witness = witnessed; in.Witness {
		n.event(ctx, "flip "+id+": witnessed from outside the node once applied")
	}
	var fr nodewire.FlipResult
	err := n.exec(ctx, "flip: preview, apply, prove the way out and in, confirm and commit, in one round trip", a.FlipTrip, in, &fr)
	if fr.Preview != nil {
		n.s.LastPreview = fr.Preview
	}
	if err == nil && fr.State == nodewire.FlipPreviewRefused {
		// Nothing was recorded or changed on the node: as if never tried.
		n.s.Flip, n.s.FlipAttempts = prev, n.s.FlipAttempts-1
		n.quiet = false
		n.setPhase(ctx, prevPhase)
		if fr.Preview == nil {
			fr.Preview = &flipwire.Preview{Reasons: []string{"the node refused without saying why"}}
		}
		refused(fr.Preview)
		return
	}
	if err == nil && fr.State == FlipStateCommitted {
		switch {
		case !in.Witness:
		case fr.Witness != nil && fr.Witness.ID == id && fr.Witness.State == nodewire.WitnessAnswered:
			// The node committed on the witness's answer and says which:
			// the flip goes on in this task. The witness ends on its own
			// (its verdict, when it completes, is the same).
			n.verdict = *fr.Witness
		default:
			// A node that read the verdict from the witness's heartbeat
			// may finish before the witness completes (or in the same
			// workflow task): the witness completes once the node's
			// activity has ended, and its verdict is recorded as always.
			// A node that asked by query found the verdict already here.
			_ = workflow.Await(ctx, func() bool { return n.verdict.ID == id || *ended })
		}
		n.s.Flip.Deadline = fr.Deadline
		n.event(ctx, "flipped ("+id+"): applied, reached Temporal, "+n.witnessed()+"confirmed and committed on the node")
		n.s.Flip.State = FlipStateConfirmed
		n.quiet = false
		n.committed(ctx, fr)
		return
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == errNotRegistered {
		n.s.Flip, n.s.FlipAttempts = prev, n.s.FlipAttempts-1
		n.quiet = false
		n.setPhase(ctx, prevPhase)
		n.s.LastError = "flip " + id + " not tried: node " + n.s.Node + "'s agent predates the flip in one round trip (" + errorMessage(err) + "); nothing changed on the node: upgrade adopt-worker on it to this release, then flip again"
		n.event(ctx, n.s.LastError)
		return
	}
	if errors.As(err, &ae) && (ae.Type() == nodewire.ErrStalePreview || ae.Type() == nodewire.ErrFlipNotApplied) {
		if ae.Type() == nodewire.ErrStalePreview && !again {
			// Still flipping until the preview apart has said why.
			n.s.Flip.State, n.s.Flip.Error = FlipStateNotApplied, errorMessage(err)
			n.quiet = false
			n.staleAgain(ctx, spec, refused, prevPhase)
			return
		}
		back(FlipStateNotApplied, errorMessage(err)+" (nothing was changed on the node)")
		return
	}
	if err == nil {
		err = fmt.Errorf("the node answered %q, not committed", fr.State)
	}
	// Whatever the error says, the node's record decides.
	n.quiet = false
	switch n.revertFlip(ctx, id) {
	case FlipStateConfirmed:
		n.event(ctx, "flip "+id+": the node reports it confirmed ("+errorMessage(err)+"); committing it")
		n.commit(ctx)
	case FlipStateNotApplied:
		back(FlipStateNotApplied, errorMessage(err)+" (nothing was changed on the node)")
	default:
		back(FlipStateReverted, errorMessage(err))
	}
}

// staleAgain follows a flip the node refused as stale (its firewall moved
// between its own preview and the transaction): previewed apart once, so
// the operator sees what moved; flipped once more only if that preview
// approves.
func (n *node) staleAgain(ctx workflow.Context, spec flipwire.MeshSpec, refused func(*flipwire.Preview), prevPhase Phase) {
	n.event(ctx, "flip "+n.s.Flip.ID+" not applied: the found firewall moved during the flip; previewing apart, then flipping again if it approves")
	if n.previewApart(ctx, spec, refused, prevPhase) != nil {
		n.flipTrip(ctx, spec, refused, true)
	}
}

// witnessed is how the event says the witness answered, or "" unwitnessed.
func (n *node) witnessed() string {
	if n.verdict.State == nodewire.WitnessAnswered {
		return "witnessed from outside (" + n.verdict.Why + "), "
	}
	return ""
}

// witnessTrip starts the orchestrator's witness of flip id beside the
// node's activity, unless flip.witness.disabled is set, and records its
// verdict when it ends. It reports whether it started, and whether it has
// ended.
func (n *node) witnessTrip(ctx workflow.Context, id string) (*bool, bool) {
	ended := new(bool)
	in, ok := n.witnessInput(ctx)
	if !ok {
		return ended, false
	}
	info := workflow.GetInfo(ctx).WorkflowExecution
	in.After = &witness.After{WorkflowID: info.ID, RunID: info.RunID, Activity: flipTripActivity, FlipID: id}
	wait := max(n.s.Plan.ConfirmTimeout/2, time.Minute)
	wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              TaskQueue,
		StartToCloseTimeout:    wait,
		ScheduleToCloseTimeout: wait,
		Summary:                "flip: witness from outside the node once it is applied (a management port answers)",
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 2 * time.Second, MaximumAttempts: 3, NonRetryableErrorTypes: []string{witness.ErrLockedOut, witness.ErrFlipEnded}},
	})
	var w *witness.Witness
	f := workflow.ExecuteActivity(wctx, w.Witness, in)
	workflow.Go(ctx, func(gctx workflow.Context) {
		var res witness.Result
		err := f.Get(gctx, &res)
		*ended = true
		var ae *temporal.ApplicationError
		switch {
		case err == nil && res.Verdict != nil && res.Verdict.ID == id:
			// Signed by the witness: the node's query is answered with it.
			n.verdict = *res.Verdict
		case err == nil:
			n.verdict = nodewire.WitnessVerdict{ID: id, State: nodewire.WitnessAnswered, Why: strings.Join(res.Answered, ", ")}
		case errors.As(err, &ae) && ae.Type() == witness.ErrFlipEnded, temporal.IsCanceledError(err):
			// The node's activity ended first: no verdict is asked for.
		default:
			n.verdict = nodewire.WitnessVerdict{ID: id, State: nodewire.WitnessLockedOut, Why: errorMessage(err)}
		}
	})
	return ended, true
}
