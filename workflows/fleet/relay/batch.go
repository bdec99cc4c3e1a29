// A batch of a fleet request: one activity sends up to a few hundred nodes
// their requests at once and waits until every one has served its own, so
// that a wave of thousands is a few dozen pending activities, not one per
// node (Temporal refuses a workflow task past 2,000: docs/fleet.md).
package relay

import (
	"context"
	"sync"

	"adoption/intent"
)

// Batch is a batch's nodes, each with its own request. Intent is sent to
// each node whose request carries none: the one intent an older CLI signed
// for every target goes into the batch once, not once a node.
type Batch struct {
	Intent   *intent.Signed `json:"intent,omitempty"`
	Requests []NodeRequest  `json:"requests"`
}

// Requests serves each request of in as Request does, all at once, and
// says how each went, in in's order. A fault reaching Temporal for any
// node fails the batch, once every other node has been served: its retry
// finds those served and answers them at once.
func (r *Relay) Requests(ctx context.Context, in Batch) ([]Outcome, error) {
	out := make([]Outcome, len(in.Requests))
	errs := make([]error, len(in.Requests))
	var wg sync.WaitGroup
	for i, req := range in.Requests {
		if req.Intent == nil {
			req.Intent = in.Intent
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = r.Request(ctx, req)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
