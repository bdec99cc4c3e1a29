// The witness of a flip in one round trip starts beside the node's flip
// activity and waits until that activity's heartbeat says the flip is
// applied: the workflow's execution is described (as the fleet's relay
// describes its nodes and the CLI reads pending activities) and the
// pending activity's heartbeat details are decoded. It heartbeats nothing
// while it waits (its activity has no heartbeat timeout): its heartbeat is
// its verdict (verdict.go), which a throttled step heartbeat sent later
// must not overwrite.
package witness

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"
)

// ErrFlipEnded is the error type of a witness whose flip activity ended
// before it reported the flip applied: there is nothing to witness.
const ErrFlipEnded = "FlipEnded"

// Describer is what the witness needs of a Temporal client to read a
// workflow's pending activities.
type Describer interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// After names the flip activity to wait for: the pending activity of type
// Activity in the run, whose heartbeat carries the flip's ID and, once the
// flip is applied, applied (activities.FlipProgress).
type After struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Activity   string `json:"activity"`
	FlipID     string `json:"flip_id"`
}

// progress is the part of the node's heartbeat the witness reads
// (activities.FlipProgress): Reads announces that the node reads the
// verdict from this activity's heartbeat, Read that it has.
type progress struct {
	ID      string `json:"id"`
	Applied bool   `json:"applied"`
	Reads   bool   `json:"reads_verdict"`
	Read    bool   `json:"verdict_read"`
}

// every is how often the node's flip activity is read.
func (w *Witness) every() time.Duration {
	if w.Every == 0 {
		return 100 * time.Millisecond
	}
	return w.Every
}

// awaitApplied returns the node's progress once the flip activity's
// heartbeat says applied, or ErrFlipEnded once no such activity is pending.
func (w *Witness) awaitApplied(ctx context.Context, in After) (progress, error) {
	if w.Describe == nil || w.Converter == nil {
		return progress{}, errors.New("this witness cannot read the node's flip activity (no client)")
	}
	for {
		p, pending, err := w.progress(ctx, in)
		switch {
		case err != nil:
			// Read again: the server may be busy; the activity's own
			// timeout bounds the wait.
		case p.Applied:
			return p, nil
		case !pending:
			return p, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's activity ended before it reported the flip applied: nothing to witness", in.FlipID), ErrFlipEnded, nil)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(w.every()):
		}
	}
}

// progress reads the run once: whether the flip activity is pending, and
// its last heartbeat's progress on this flip (zero if none).
func (w *Witness) progress(ctx context.Context, in After) (p progress, pending bool, err error) {
	pending, err = readPending(ctx, w.Describe, in.WorkflowID, in.RunID, in.Activity, func(hb *commonpb.Payloads) bool {
		var got progress
		// A step's plain heartbeat does not decode: not the flip's progress.
		if w.Converter.FromPayloads(hb, &got) == nil && got.ID == in.FlipID {
			p = got
			return true
		}
		return false
	})
	return p, pending, err
}

// readPending describes the run once and hands each pending activity of
// type activity's last heartbeat to found until it says it found what it
// looked for; it reports whether such an activity is pending at all. The
// witness reads the node's flip activity this way, and the node the
// witness's verdict (ReadVerdict).
func readPending(ctx context.Context, d Describer, workflowID, runID, activity string, found func(*commonpb.Payloads) bool) (pending bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := d.DescribeWorkflowExecution(dctx, workflowID, runID)
	if err != nil {
		return false, err
	}
	for _, pa := range resp.GetPendingActivities() {
		if pa.GetActivityType().GetName() != activity {
			continue
		}
		pending = true
		if hb := pa.GetHeartbeatDetails(); hb != nil && found(hb) {
			return true, nil
		}
	}
	return pending, nil
}
