package scale

// This file holds the scale section's flips: each node's flip Update sent
// and awaited, and when each flipped node recorded phase converged.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/bench/report"
	"adoption/workflows"
)

// flipSpans reads, from each flipped node's history, when the workflow
// task that set phase converged completed (its search attribute upsert is
// in that task) and where the time from the flip Update's sending to it
// went (breakdown.go).
func flipSpans(ctx context.Context, c client.Client, sent map[string]time.Time) ([]flipSpan, error) {
	type res struct {
		sp  flipSpan
		err error
	}
	out := make(chan res, len(sent))
	sem := make(chan struct{}, 8)
	for node, t0 := range sent {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			sp, err := flipSpanOf(ctx, c, workflows.WorkflowID(node), t0)
			out <- res{sp, err}
		}()
	}
	var spans []flipSpan
	for range sent {
		r := <-out
		if r.err != nil {
			return nil, r.err
		}
		spans = append(spans, r.sp)
	}
	return spans, nil
}

// errReverted: the flip was reverted (not confirmed in time); the node is
// adopted again and its workflow goes on.
var errReverted = errors.New("flip reverted")

// flipOne sends the flip Update and waits for the workflow to complete,
// which it does once phase converged is set and the fleet told; or for the
// flip to be reverted, which it reports as errReverted. The end is awaited
// by the SDK's long poll on the close event (exact, and no load on the
// server while it waits); a revert, which leaves the workflow running, is
// looked for by a status query every 2 s, which does not time anything.
func flipOne(ctx context.Context, c client.Client, node string) (time.Time, float64, error) {
	id := workflows.WorkflowID(node)
	t0 := time.Now()
	lat, err := flipWait(ctx, c, id, node, t0)
	return t0, lat, err
}

func flipWait(ctx context.Context, c client.Client, id, node string, t0 time.Time) (float64, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateFlip,
		Args: []any{workflows.RequestInput{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return 0, fmt.Errorf("flip %s: %w", node, err)
	}
	var rr workflows.RequestResult
	if err := h.Get(ctx, &rr); err != nil {
		return 0, fmt.Errorf("flip %s: %w", node, err)
	}
	type end struct {
		st  workflows.State
		lat float64
		err error
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan end, 1)
	go func() {
		var e end
		e.err = c.GetWorkflow(wctx, id, "").Get(wctx, &e.st)
		e.lat = report.MS(time.Since(t0))
		done <- e
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case e := <-done:
			if e.err != nil {
				return 0, fmt.Errorf("wait for %s to converge: %w", node, e.err)
			}
			if e.st.Phase != workflows.PhaseConverged {
				return 0, fmt.Errorf("node %s ended in phase %s, not converged: %s", node, e.st.Phase, e.st.LastError)
			}
			return e.lat, nil
		case <-tick.C:
			var st workflows.State
			if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus); err == nil && v.Get(&st) == nil &&
				st.Phase == workflows.PhaseAdopted && st.LastError != "" {
				if st.Flip != nil && st.Flip.State == workflows.FlipStateReverted {
					return 0, fmt.Errorf("node %s: %w: %s", node, errReverted, st.Flip.Error)
				}
				if st.Flip == nil || st.Flip.State != workflows.FlipStateFlipping {
					return 0, fmt.Errorf("node %s: the flip did not run: %s", node, st.LastError)
				}
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
