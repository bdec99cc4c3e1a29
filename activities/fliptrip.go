// The flip in one round trip: one activity on the node previews, applies,
// proves the way out (a heartbeat the server acknowledged), waits for the
// way in (the orchestrator's witness: its verdict heartbeat, read from the
// node's own workflow, or the workflow's verdict by query), checks health,
// confirms and commits. Resumable by flip ID from the node's record.
package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/nodewire"
	"adoption/activities/trip"
	"adoption/nodestate"
	"adoption/witness"
)

// TripClient is trip.Client: what the flip in one round trip needs of the
// agent's Temporal client.
type TripClient = trip.Client

// FlipProgress is trip.Progress, the heartbeat of the flip in one round
// trip.
type FlipProgress = trip.Progress

// QueryFlipWitness is nodewire.QueryFlipWitness.
const QueryFlipWitness = nodewire.QueryFlipWitness

// Witness verdicts. Pending is "": the witness has not answered yet.
const (
	WitnessAnswered  = nodewire.WitnessAnswered
	WitnessLockedOut = nodewire.WitnessLockedOut
)

// WitnessVerdict is nodewire.WitnessVerdict.
type WitnessVerdict = nodewire.WitnessVerdict

// FlipTripInput is nodewire.FlipTripInput.
type FlipTripInput = nodewire.FlipTripInput

// FlipTrip is the flip in one round trip. A new flip is previewed on the
// node and applied only if that preview approves (flip.go); then a
// heartbeat must reach Temporal and be acknowledged (the way out), the
// witness's verdict must say answered when the workflow witnesses (the way
// in), and only then is the flip confirmed (confirm.go) and committed.
// Either proof failing reverts the flip. A retried attempt with the same
// ID resumes from the node's record and never applies twice: an applying
// record is reverted, a flipped one is proven again, a confirmed one is
// committed.
func (a *Activities) FlipTrip(ctx context.Context, in FlipTripInput) (*FlipResult, error) {
	auth, v, err := a.authorizeFlip(ctx, in.Plan, in.Intent)
	if err != nil {
		return nil, err
	}
	keys, err := trip.WitnessKeys(auth.Plan.Witness, in.Witness)
	if err != nil {
		return nil, err
	}
	p := &FlipProgress{ID: in.ID, Reads: a.Converter != nil}
	ctx = trip.WithProgress(ctx, p)
	res, err := a.flip(ctx, auth, in.FlipInput)
	if err != nil || res.State == FlipPreviewRefused {
		return res, err
	}
	pv, deadline := res.Preview, res.Deadline
	var seen *WitnessVerdict
	if res.State == nodestate.FlipFlipped {
		p.Applied = true
		if err := a.proofs().WayOut(ctx, *p); err != nil {
			return nil, a.revertTrip(in.ID, "the way out: no heartbeat reached Temporal after the flip ("+err.Error()+")")
		}
		if in.Witness {
			until := deadline.Add(-auth.Plan.ConfirmTimeout / 4)
			want := witness.Want{Node: auth.Plan.Node, ID: in.ID, Plan: auth.Plan.Hash(), Since: deadline.Add(-auth.Plan.ConfirmTimeout)}
			v, why := a.proofs().AwaitWitness(ctx, keys, want, until, p)
			if why != "" {
				return nil, a.revertTrip(in.ID, "the way in: "+why)
			}
			seen = &v
		}
		if _, err := a.confirm(ctx, auth, in.ID); err != nil {
			return nil, err
		}
	}
	cm, err := a.commit(ctx, auth, in.ID)
	if err != nil {
		return nil, fmt.Errorf("flip %s is confirmed; its commit failed: %w", in.ID, err)
	}
	a.spendIntent(ctx, auth, in.Intent, v)
	cm.Deadline, cm.Preview, cm.Witness = deadline, pv, seen
	return cm, nil
}

// proofs are the flip's two proofs through the agent's own client.
func (a *Activities) proofs() trip.Proofs {
	return trip.Proofs{Temporal: a.Temporal, Converter: a.Converter}
}

// revertTrip reverts flip id for why and says so: ErrFlipReverted when the
// node is back as it was, ErrFlipOutcomeUnknown when the revert failed
// (the workflow asks again; the watchdog reverts at the deadline).
func (a *Activities) revertTrip(id, why string) error {
	state, err := a.revert(id, "not confirmed: "+why)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s not confirmed (%s), and reverting it failed: %v; it counts as in force until reverted", id, why, err), ErrFlipOutcomeUnknown, err)
	}
	if state == nodestate.FlipNotApplied {
		return temporal.NewNonRetryableApplicationError("flip "+id+" was not applied: "+why, ErrFlipNotApplied, nil)
	}
	return temporal.NewNonRetryableApplicationError("flip reverted: not confirmed: "+why, ErrFlipReverted, nil)
}
