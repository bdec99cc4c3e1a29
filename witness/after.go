// The witness of a flip in one round trip starts beside the node's flip
// activity and waits until that activity's heartbeat says the flip is
// applied: the workflow's execution is described (as the fleet's relay
// describes its nodes and the CLI reads pending activities) and the
// pending activity's heartbeat details are decoded.
package witness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
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

// progress is the part of the node's heartbeat the witness reads.
type progress struct {
	ID      string `json:"id"`
	Applied bool   `json:"applied"`
}

// awaitApplied returns once the flip activity's heartbeat says applied, or
// ErrFlipEnded once no such activity is pending.
func (w *Witness) awaitApplied(ctx context.Context, in After) error {
	if w.Describe == nil || w.Converter == nil {
		return errors.New("this witness cannot read the node's flip activity (no client)")
	}
	every := w.Every
	if every == 0 {
		every = 200 * time.Millisecond
	}
	for {
		applied, pending, err := w.applied(ctx, in)
		switch {
		case err != nil:
			// Read again: the server may be busy; the activity's own
			// timeout bounds the wait.
		case applied:
			return nil
		case !pending:
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's activity ended before it reported the flip applied: nothing to witness", in.FlipID), ErrFlipEnded, nil)
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, "waiting for flip "+in.FlipID+" to be applied")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// applied reads the run once: whether the flip activity is pending, and
// whether its last heartbeat says the flip is applied.
func (w *Witness) applied(ctx context.Context, in After) (applied, pending bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := w.Describe.DescribeWorkflowExecution(dctx, in.WorkflowID, in.RunID)
	if err != nil {
		return false, false, err
	}
	for _, pa := range resp.GetPendingActivities() {
		if pa.GetActivityType().GetName() != in.Activity {
			continue
		}
		pending = true
		if pa.GetHeartbeatDetails() == nil {
			continue
		}
		var p progress
		if err := w.Converter.FromPayloads(pa.GetHeartbeatDetails(), &p); err != nil {
			continue // a step's plain heartbeat, not the flip's progress
		}
		if p.ID == in.FlipID && p.Applied {
			return true, true, nil
		}
	}
	return false, pending, nil
}
