// The flip in one round trip: one activity on the node previews, applies,
// proves the way out (a heartbeat the server acknowledged), waits for the
// way in (the orchestrator's witness: its verdict heartbeat, read from the
// node's own workflow, or the workflow's verdict by query), checks health,
// confirms and commits. Resumable by flip ID from the node's record.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/crypto/ssh"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/nodestate"
	"adoption/witness"
)

// TripClient is what the flip in one round trip needs of the agent's
// Temporal client (client.Client has both).
type TripClient interface {
	// RecordActivityHeartbeat returns once the server has the heartbeat.
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// FlipProgress is the heartbeat of the flip in one round trip. The witness
// reads it from the pending activity and dials only once Applied is set
// for its flip. Reads announces that this node reads the witness's verdict
// from the witness's own heartbeat (so the witness tells it there and
// stays pending until Read says the node has it); an agent without it is
// answered by its workflow's query alone.
type FlipProgress struct {
	ID      string `json:"id"`
	Applied bool   `json:"applied,omitempty"`
	Step    string `json:"step,omitempty"`
	Reads   bool   `json:"reads_verdict,omitempty"`
	Read    bool   `json:"verdict_read,omitempty"`
}

type progressKey struct{}

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

// How often the node reads the witness's verdict, how long one
// acknowledged heartbeat may take, and how often the node heartbeats while
// it waits (the activity's heartbeat timeout is 10 s; the server keeps the
// last details, Applied included, in between).
const (
	verdictEvery = 100 * time.Millisecond
	wayOutWithin = 10 * time.Second
	waitBeat     = 3 * time.Second
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
	auth, v, err := a.authorizeFlip(ctx, in.Plan, in.Intent)
	if err != nil {
		return nil, err
	}
	keys, err := witnessKeys(auth.Plan.Witness, in.Witness)
	if err != nil {
		return nil, err
	}
	p := &FlipProgress{ID: in.ID, Reads: a.Converter != nil}
	ctx = context.WithValue(ctx, progressKey{}, p)
	in.Preview = true
	res, err := a.flip(ctx, auth, in.FlipInput)
	if err != nil || res.State == FlipPreviewRefused {
		return res, err
	}
	pv, deadline := res.Preview, res.Deadline
	var seen *WitnessVerdict
	if res.State == nodestate.FlipFlipped {
		p.Applied = true
		if err := a.wayOut(ctx, *p); err != nil {
			return nil, a.revertTrip(in.ID, "the way out: no heartbeat reached Temporal after the flip ("+err.Error()+")")
		}
		if in.Witness {
			until := deadline.Add(-auth.Plan.ConfirmTimeout / 4)
			want := witness.Want{Node: auth.Plan.Node, ID: in.ID, Plan: auth.Plan.Hash(), Since: deadline.Add(-auth.Plan.ConfirmTimeout)}
			v, why := a.awaitWitness(ctx, keys, want, until, p)
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

// witnessKeys are the keys the node takes the witness's verdict signed by
// (flip.witness.key). A node whose flips are witnessed refuses, before
// anything is applied, a request that says otherwise, and a flip it could
// not authenticate a verdict for (no key listed).
func witnessKeys(w *config.Witness, witnessed bool) ([]ssh.PublicKey, error) {
	if !w.Witnessed() {
		return nil, nil
	}
	if !witnessed {
		return nil, temporal.NewNonRetryableApplicationError("refused: this node's flips are witnessed from outside (flip.witness.disabled is not set), and the request says the flip is not; nothing was changed", authority.ErrBadRequest, nil)
	}
	var keys []ssh.PublicKey
	var err error
	if w != nil {
		keys, err = w.Keys()
	}
	if err == nil && len(keys) == 0 {
		err = errors.New("flip.witness.key is not set")
	}
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("refused: the node cannot authenticate the witness's verdict ("+err.Error()+"); nothing was changed. "+
			"Set flip.witness.key in the node's file to the public key the orchestrator's witness signs with (adopt-worker orchestrate --witness-key), or flip.witness.disabled: true to confirm from the node alone", ErrFlipRefused, nil)
	}
	return keys, nil
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

// awaitWitness reads the witness's verdict on want's flip until it has
// one or until passes, heartbeating p through the client now and then (the
// activity's heartbeat timeout). It returns the verdict and why the flip
// must revert, or "" when the witness answered. An answer counts only
// signed by one of keys for want (witness/signed.go); a locked-out verdict
// is taken as it comes, since reverting is always safe. A verdict read from
// the witness's heartbeat is acknowledged (p.Read), so the witness
// completes.
func (a *Activities) awaitWitness(ctx context.Context, keys []ssh.PublicKey, want witness.Want, until time.Time, p *FlipProgress) (WitnessVerdict, string) {
	wf := activity.GetInfo(ctx).WorkflowExecution
	last := "no answer yet"
	beat := time.Now()
	for {
		v, told, err := a.verdict(ctx, wf.ID, wf.RunID, want.ID)
		var forged error
		if err == nil && v.State == WitnessAnswered {
			forged = v.Authentic(keys, want, time.Now())
		}
		if told && v.State != "" && forged == nil {
			p.Read, p.Step = true, "flip: the witness's verdict read"
			a.beat(ctx, *p)
		}
		switch {
		case err != nil:
			last = err.Error()
		case forged != nil:
			last = "an answer not taken: " + forged.Error()
		case v.State == WitnessAnswered:
			return v, ""
		case v.State == WitnessLockedOut:
			return v, "locked out: " + v.Why
		}
		if !time.Now().Before(until) {
			return v, fmt.Sprintf("the witness gave no verdict by %s (%s)", until.Format(time.RFC3339), last)
		}
		select {
		case <-ctx.Done():
			return v, "the activity ended while waiting for the witness: " + ctx.Err().Error()
		case <-time.After(verdictEvery):
		}
		if time.Since(beat) >= waitBeat {
			p.Step, beat = "flip: waiting for the witness", time.Now()
			a.beat(ctx, *p)
		}
	}
}

// beat records p through the client, acknowledged; a failure is left to
// the activity's heartbeat timeout.
func (a *Activities) beat(ctx context.Context, p FlipProgress) {
	hctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	_ = a.Temporal.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, p)
}

// verdict reads the witness's verdict on flip id once: from the pending
// witness's heartbeat when this agent reads verdicts by describe (told),
// else, or once no witness is pending (an older orchestrator's witness
// completes at once, or the describe failed), by the workflow's query.
func (a *Activities) verdict(ctx context.Context, workflowID, runID, id string) (v WitnessVerdict, told bool, err error) {
	if a.Converter != nil {
		v, pending, err := witness.ReadVerdict(ctx, a.Temporal, a.Converter, workflowID, runID, id)
		if err == nil && pending {
			return v, true, nil
		}
	}
	v, err = a.query(ctx, workflowID, runID, id)
	return v, false, err
}

// query is one query of the witness's verdict on flip id.
func (a *Activities) query(ctx context.Context, workflowID, runID, id string) (WitnessVerdict, error) {
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
