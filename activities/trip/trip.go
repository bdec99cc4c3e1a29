// Package trip is the node's side of the flip in one round trip's two
// proofs (the FlipTrip activity): the way out, a heartbeat the server
// acknowledged through the agent's own client once the flip is applied,
// and the way in, the orchestrator's witness's verdict, read from the
// witness's heartbeat on the node's own workflow or by the workflow's
// query, and taken only signed by a key the node's file lists. The
// progress it heartbeats (Progress) is what the witness reads.
package trip

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
	"adoption/witness"
)

// Client is what the flip in one round trip needs of the agent's
// Temporal client (client.Client has both).
type Client interface {
	// RecordActivityHeartbeat returns once the server has the heartbeat.
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// Progress is the heartbeat of the flip in one round trip. The witness
// reads it from the pending activity and dials only once Applied is set
// for its flip. Reads announces that this node reads the witness's verdict
// from the witness's own heartbeat (so the witness tells it there and
// stays pending until Read says the node has it); an agent without it is
// answered by its workflow's query alone.
type Progress struct {
	ID      string `json:"id"`
	Applied bool   `json:"applied,omitempty"`
	Step    string `json:"step,omitempty"`
	Reads   bool   `json:"reads_verdict,omitempty"`
	Read    bool   `json:"verdict_read,omitempty"`
}

type progressKey struct{}

// WithProgress is ctx carrying p: every heartbeat of a step run under it
// is p with the step (ProgressOf), so a step's heartbeat never hides that
// the flip is applied.
func WithProgress(ctx context.Context, p *Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressOf is the progress ctx carries, if any.
func ProgressOf(ctx context.Context) (*Progress, bool) {
	p, ok := ctx.Value(progressKey{}).(*Progress)
	return p, ok
}

// How often the node reads the witness's verdict, how long one
// acknowledged heartbeat may take, and how often the node heartbeats while
// it waits (the activity's heartbeat timeout is 10 s; the server keeps the
// last details, Applied included, in between).
const (
	verdictEvery = 100 * time.Millisecond
	wayOutWithin = 10 * time.Second
	waitBeat     = 3 * time.Second
)

// WitnessKeys are the keys the node takes the witness's verdict signed by
// (flip.witness.key). A node whose flips are witnessed refuses, before
// anything is applied, a request that says otherwise, and a flip it could
// not authenticate a verdict for (no key listed).
func WitnessKeys(w *config.Witness, witnessed bool) ([]ssh.PublicKey, error) {
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
			"Set flip.witness.key in the node's file to the public key the orchestrator's witness signs with (adopt-worker orchestrate --witness-key), or flip.witness.disabled: true to confirm from the node alone", nodewire.ErrFlipRefused, nil)
	}
	return keys, nil
}

// Proofs reads and writes the two proofs through the agent's client.
type Proofs struct {
	Temporal Client
	// Converter decodes the witness's verdict heartbeat; nil: the verdict
	// is only asked of the workflow by query.
	Converter converter.DataConverter
}

// WayOut records p as a heartbeat through the agent's client, which
// returns only once the server acknowledged it: the node still reaches
// Temporal through the ruleset now in force.
func (t Proofs) WayOut(ctx context.Context, p Progress) error {
	if t.Temporal == nil {
		return errors.New("this agent has no Temporal client to heartbeat through")
	}
	hctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	p.Step = "flip: applied; the way out"
	return t.Temporal.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, p)
}

// AwaitWitness reads the witness's verdict on want's flip until it has
// one or until passes, heartbeating p through the client now and then (the
// activity's heartbeat timeout). It returns the verdict and why the flip
// must revert, or "" when the witness answered. An answer counts only
// signed by one of keys for want (witness/signed.go); a locked-out verdict
// is taken as it comes, since reverting is always safe. A verdict read from
// the witness's heartbeat is acknowledged (p.Read), so the witness
// completes.
func (t Proofs) AwaitWitness(ctx context.Context, keys []ssh.PublicKey, want witness.Want, until time.Time, p *Progress) (nodewire.WitnessVerdict, string) {
	wf := activity.GetInfo(ctx).WorkflowExecution
	last := "no answer yet"
	beat := time.Now()
	for {
		v, told, err := t.verdict(ctx, wf.ID, wf.RunID, want.ID)
		var forged error
		if err == nil && v.State == nodewire.WitnessAnswered {
			forged = v.Authentic(keys, want, time.Now())
		}
		if told && v.State != "" && forged == nil {
			p.Read, p.Step = true, "flip: the witness's verdict read"
			t.beat(ctx, *p)
		}
		switch {
		case err != nil:
			last = err.Error()
		case forged != nil:
			last = "an answer not taken: " + forged.Error()
		case v.State == nodewire.WitnessAnswered:
			return v, ""
		case v.State == nodewire.WitnessLockedOut:
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
			t.beat(ctx, *p)
		}
	}
}

// beat records p through the client, acknowledged; a failure is left to
// the activity's heartbeat timeout.
func (t Proofs) beat(ctx context.Context, p Progress) {
	hctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	_ = t.Temporal.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, p)
}

// verdict reads the witness's verdict on flip id once: from the pending
// witness's heartbeat when this agent reads verdicts by describe (told),
// else, or once no witness is pending (an older orchestrator's witness
// completes at once, or the describe failed), by the workflow's query.
func (t Proofs) verdict(ctx context.Context, workflowID, runID, id string) (v nodewire.WitnessVerdict, told bool, err error) {
	if t.Converter != nil {
		v, pending, err := witness.ReadVerdict(ctx, t.Temporal, t.Converter, workflowID, runID, id)
		if err == nil && pending {
			return v, true, nil
		}
	}
	v, err = t.query(ctx, workflowID, runID, id)
	return v, false, err
}

// query is one query of the witness's verdict on flip id.
func (t Proofs) query(ctx context.Context, workflowID, runID, id string) (nodewire.WitnessVerdict, error) {
	qctx, cancel := context.WithTimeout(ctx, wayOutWithin)
	defer cancel()
	var v nodewire.WitnessVerdict
	val, err := t.Temporal.QueryWorkflow(qctx, workflowID, runID, nodewire.QueryFlipWitness, id)
	if err != nil {
		return v, err
	}
	if err := val.Get(&v); err != nil {
		return v, err
	}
	if v.ID != id {
		return nodewire.WitnessVerdict{}, nil
	}
	return v, nil
}
