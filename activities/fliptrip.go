// The flip in one round trip: one activity on the node previews, applies,
// proves the way out (a heartbeat the server acknowledged), waits for the
// way in (the orchestrator's witness, by its workflow's verdict), checks
// health, confirms and commits. Resumable by flip ID from the node's record.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/nodestate"
)

// TripClient is what the flip in one round trip needs of the agent's
// Temporal client (client.Client has both).
type TripClient interface {
	// RecordActivityHeartbeat returns once the server has the heartbeat.
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// FlipProgress is the heartbeat of the flip in one round trip. The witness
// reads it from the pending activity and dials only once Applied is set
// for its flip.
type FlipProgress struct {
	ID      string `json:"id"`
	Applied bool   `json:"applied,omitempty"`
	Step    string `json:"step,omitempty"`
}

type progressKey struct{}

// QueryFlipWitness is the node workflow's query of the witness's verdict
// on a flip (its argument the flip ID): a WitnessVerdict.
const QueryFlipWitness = "flip-witness"

// Witness verdicts. Pending is "": the witness has not answered yet.
const (
	WitnessAnswered  = "answered"
	WitnessLockedOut = "locked-out"
)

// WitnessVerdict is what the workflow knows of the witness of flip ID.
type WitnessVerdict struct {
	ID    string `json:"id"`
	State string `json:"state,omitempty"`
	Why   string `json:"why,omitempty"`
}

// FlipTripInput is a flip in one round trip.
type FlipTripInput struct {
	FlipInput
	// Witness says the workflow witnesses the flip from outside the node:
	// the node confirms only once the verdict says a management port
	// answered after the flip was applied.
	Witness bool `json:"witness,omitempty"`
}

// How often the node asks for the witness's verdict, and how long one
// acknowledged heartbeat may take.
const (
	verdictEvery = 250 * time.Millisecond
	wayOutWithin = 10 * time.Second
)

// FlipTrip is the flip in one round trip. A new flip is previewed on the
// node and applied only if that preview approves (as Flip with Preview);
// then a heartbeat must reach Temporal and be acknowledged (the way out),
// the witness's verdict must say answered when the workflow witnesses (the
// way in), and only then is the flip confirmed (ConfirmFlip's checks) and
// committed. Either proof failing reverts the flip. A retried attempt with
// the same ID resumes from the node's record and never applies twice: an
// applying record is reverted (Flip's resume), a flipped one is proven
// again, a confirmed one is committed.
func (a *Activities) FlipTrip(ctx context.Context, in FlipTripInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, authority.FlipIntent(auth.Plan, false))
	if err != nil {
		return nil, err
	}
	p := &FlipProgress{ID: in.ID}
	ctx = context.WithValue(ctx, progressKey{}, p)
	in.Preview = true
	res, err := a.flip(ctx, auth, in.FlipInput)
	if err != nil || res.State == FlipPreviewRefused {
		return res, err
	}
	pv, deadline := res.Preview, res.Deadline
	if res.State == nodestate.FlipFlipped {
		p.Applied = true
		if err := a.wayOut(ctx, *p); err != nil {
			return nil, a.revertTrip(in.ID, "the way out: no heartbeat reached Temporal after the flip ("+err.Error()+")")
		}
		if in.Witness {
			until := deadline.Add(-auth.Plan.ConfirmTimeout / 4)
			if why := a.awaitWitness(ctx, in.ID, until, *p); why != "" {
				return nil, a.revertTrip(in.ID, "the way in: "+why)
			}
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
	cm.Deadline, cm.Preview = deadline, pv
	return cm, nil
}

// wayOut records p as a heartbeat through the agent's client, which
// returns only once the server acknowledged it: the node still reaches
// Temporal through the ruleset now in force.
func (a *Activities) wayOut(ctx context.Context, p FlipProgress) error {
	if a.Temporal == nil {
		return errors.New("this agent has no Temporal client to heartbeat through")
	}
	hctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	p.Step = "flip: applied; the way out"
	return a.Temporal.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, p)
}

// awaitWitness asks this activity's workflow for the witness's verdict on
// flip id until it has one or until passes, heartbeating p through the
// client meanwhile (so the witness keeps reading Applied). It returns why
// the flip must revert, or "" when the witness answered.
func (a *Activities) awaitWitness(ctx context.Context, id string, until time.Time, p FlipProgress) string {
	wf := activity.GetInfo(ctx).WorkflowExecution
	last := "no answer yet"
	for {
		v, err := a.verdict(ctx, wf.ID, wf.RunID, id)
		switch {
		case err != nil:
			last = err.Error()
		case v.State == WitnessAnswered:
			return ""
		case v.State == WitnessLockedOut:
			return "locked out: " + v.Why
		}
		if !time.Now().Before(until) {
			return fmt.Sprintf("the witness gave no verdict by %s (%s)", until.Format(time.RFC3339), last)
		}
		select {
		case <-ctx.Done():
			return "the activity ended while waiting for the witness: " + ctx.Err().Error()
		case <-time.After(verdictEvery):
		}
		p.Step = "flip: waiting for the witness"
		hctx, cancel := context.WithTimeout(ctx, wayOutWithin)
		_ = a.Temporal.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, p)
		cancel()
	}
}

// verdict is one query of the witness's verdict on flip id.
func (a *Activities) verdict(ctx context.Context, workflowID, runID, id string) (WitnessVerdict, error) {
	qctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	var v WitnessVerdict
	val, err := a.Temporal.QueryWorkflow(qctx, workflowID, runID, QueryFlipWitness, id)
	if err != nil {
		return v, err
	}
	if err := val.Get(&v); err != nil {
		return v, err
	}
	if v.ID != id {
		return WitnessVerdict{}, nil
	}
	return v, nil
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
