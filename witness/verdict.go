// The witness's verdict as its own heartbeat: a node that announces it
// reads verdicts by describe (activities.FlipProgress) is told the verdict
// by the witness's acknowledged heartbeat, read from the node's own
// workflow's pending activities, so no workflow task stands between the
// witness's answer and the node's confirm. The witness stays pending until
// the node says it read the verdict, then completes as it always did.
package witness

import (
	"context"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// ActivityType is the witness's registered activity name, which the node
// looks for among its workflow's pending activities.
const ActivityType = "Witness"

// Verdicts. Pending is "": the witness has not answered yet.
const (
	Answered  = "answered"
	LockedOut = "locked-out"
)

// Verdict is the witness's answer on flip ID: its heartbeat, and what the
// node's workflow records when the witness completes. A witness with a key
// binds it to the node, the plan and the time, and signs it (signed.go):
// the node takes an answer only so signed.
type Verdict struct {
	ID    string    `json:"id"`
	State string    `json:"state,omitempty"`
	Why   string    `json:"why,omitempty"`
	Node  string    `json:"node,omitempty"`
	Plan  string    `json:"plan,omitempty"`
	At    time.Time `json:"at,omitzero"`
	Sig   []byte    `json:"sig,omitempty"`
}

// Heartbeater records an activity's heartbeat and returns once the server
// has it (client.Client's).
type Heartbeater interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
}

// lingerAtMost bounds how long a witness that told its verdict waits for
// the node to say it read it: then it completes, and the node asks its
// workflow instead.
const lingerAtMost = 30 * time.Second

// verdictOf is the verdict the witness's result or error says.
func verdictOf(id string, res *Result, err error) Verdict {
	if err != nil {
		why := err.Error()
		if ae, ok := err.(*temporal.ApplicationError); ok {
			why = ae.Message()
		}
		return Verdict{ID: id, State: LockedOut, Why: why}
	}
	return Verdict{ID: id, State: Answered, Why: strings.Join(res.Answered, ", ")}
}

// tell records the verdict as this activity's heartbeat and waits until
// the node's flip activity says it read it, or is no longer pending. A
// heartbeat that fails is not waited on: the node asks its workflow.
func (w *Witness) tell(ctx context.Context, in After, v Verdict) {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := w.Heartbeat.RecordActivityHeartbeat(hctx, activity.GetInfo(ctx).TaskToken, v)
	cancel()
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, lingerAtMost)
	defer cancel()
	for {
		p, pending, err := w.progress(lctx, in)
		if err == nil && (!pending || p.Read) {
			return
		}
		select {
		case <-lctx.Done():
			return
		case <-time.After(w.every()):
		}
	}
}

// ReadVerdict reads the witness's verdict on flip id from the run's pending
// activities: the verdict ("" State while the witness is pending without
// one) and whether a witness is pending at all.
func ReadVerdict(ctx context.Context, d Describer, conv converter.DataConverter, workflowID, runID, id string) (v Verdict, pending bool, err error) {
	pending, err = readPending(ctx, d, workflowID, runID, ActivityType, func(hb *commonpb.Payloads) bool {
		var got Verdict
		// An older witness's plain heartbeat does not decode.
		if conv.FromPayloads(hb, &got) == nil && got.ID == id && got.State != "" {
			v = got
			return true
		}
		return false
	})
	return v, pending, err
}
