// Package relay is the orchestrator's side of a fleet-wide request: it sends
// one node's workflow a migrate or a flip as an Update and watches the
// node's status until the request has been served, then says how it went.
// It runs in the orchestrator (its task queue), never on a node.
package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/intent"
	"adoption/workflows"
)

// Kinds of request a fleet relays.
const (
	KindMigrate = "migrate"
	KindFlip    = "flip"
)

// Temporal is what the relay needs of a Temporal client.
type Temporal interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// Relay holds the orchestrator's client.
type Relay struct {
	C Temporal
	// Every is how often the node's status is first read while its
	// request is served (0: 5 seconds); the reads then grow apart, up to
	// maxEvery, and a read that timed out is tried again as far apart.
	Every time.Duration
}

// maxEvery bounds the time between two reads of a node's status: a fleet
// migrate of a thousand nodes reads as many statuses, each a query the
// orchestrator's own worker answers, so they spread out; it stays well
// under the activity's heartbeat timeout (fleet_ops.go: a minute).
const maxEvery = 30 * time.Second

// queryTimeout bounds one status read; a read that takes longer is
// tried again later (readStatus), not the activity's failure.
const queryTimeout = 20 * time.Second

// New is a Relay on c.
func New(c Temporal) *Relay { return &Relay{C: c} }

// NodeRequest is one node's part of a fleet request.
type NodeRequest struct {
	Node   string `json:"node"`
	Kind   string `json:"kind"` // migrate or flip
	Module string `json:"module,omitempty"`
	// ID names the request; the Update's ID is derived from it, so a
	// retried activity does not queue the request twice.
	ID     string         `json:"id"`
	Intent *intent.Signed `json:"intent,omitempty"`
}

// Outcome is how the node's request went: Why is "" when it succeeded.
type Outcome struct {
	Node string `json:"node"`
	Why  string `json:"why,omitempty"`
}

// Request sends the node its request and waits, heartbeating, until the
// node has served it. A refusal (the node's validator, its preview, a
// failed cutover) is an outcome, not an error; only a fault reaching
// Temporal is retried.
func (r *Relay) Request(ctx context.Context, in NodeRequest) (Outcome, error) {
	st, err := r.readStatus(ctx, in.Node)
	if err != nil {
		return Outcome{}, err
	}
	if ok, _ := served(in, st); ok {
		return Outcome{Node: in.Node}, nil // already so: nothing to send
	}
	if !inFlight(in, st) { // else an earlier attempt's request is being served
		if out, err := r.send(ctx, in); err != nil || out.Why != "" {
			return out, err
		}
	}
	return r.watch(ctx, in)
}

// send queues the node's request: a refusal is an outcome.
func (r *Relay) send(ctx context.Context, in NodeRequest) (Outcome, error) {
	name := workflows.UpdateMigrate
	if in.Kind == KindFlip {
		name = workflows.UpdateFlip
	}
	h, err := r.C.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     in.ID + "/" + in.Node,
		WorkflowID:   workflows.WorkflowID(in.Node),
		UpdateName:   name,
		Args:         []any{workflows.RequestInput{Module: in.Module, Intent: in.Intent}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return Outcome{Node: in.Node, Why: "refused: " + ae.Message()}, nil
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("send %s to node %s: %w", name, in.Node, err)
	}
	return Outcome{Node: in.Node}, nil
}

// every is how long to wait before the first read of a status.
func (r *Relay) every() time.Duration {
	if r.Every <= 0 {
		return 5 * time.Second
	}
	return r.Every
}

// watch reads the node's status until it has served in, heartbeating;
// the reads grow apart (up to maxEvery).
func (r *Relay) watch(ctx context.Context, in NodeRequest) (Outcome, error) {
	every := r.every()
	for {
		activity.RecordHeartbeat(ctx)
		st, err := r.readStatus(ctx, in.Node)
		if err != nil {
			return Outcome{}, err
		}
		if ok, why := served(in, st); ok || why != "" {
			return Outcome{Node: in.Node, Why: why}, nil
		}
		if err := sleep(ctx, every); err != nil {
			return Outcome{}, err
		}
		every = min(every*3/2, max(maxEvery, r.every()))
	}
}

// readStatus is status, read again, further apart each time (up to
// maxEvery) and heartbeating, while the read fails for want of time or
// of a server that can answer: a thousand nodes' reads at once made the
// orchestrator's worker answer some late, and each such read failed its
// whole activity, to be retried from the start.
func (r *Relay) readStatus(ctx context.Context, node string) (workflows.State, error) {
	every := r.every()
	for {
		st, err := r.status(ctx, node)
		if err == nil || !transient(ctx, err) {
			return st, err
		}
		activity.GetLogger(ctx).Warn("reading a node's status failed; reading it again", "node", node, "in", every, "error", err)
		activity.RecordHeartbeat(ctx)
		if err := sleep(ctx, every); err != nil {
			return st, err
		}
		every = min(every*2, max(maxEvery, r.every()))
	}
}

// transient: err is a status read that ran out of time or found the
// server busy or away, while the activity itself goes on.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var deadline *serviceerror.DeadlineExceeded
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &unavailable) || errors.As(err, &exhausted)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Relay) status(ctx context.Context, node string) (workflows.State, error) {
	var st workflows.State
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	v, err := r.C.QueryWorkflow(qctx, workflows.WorkflowID(node), "", workflows.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return st, fmt.Errorf("read node %s's status: %w", node, err)
	}
	return st, nil
}

// inFlight: the node is serving a request like in already (queued, or
// running): an attempt of this activity before a retry sent it.
func inFlight(in NodeRequest, st workflows.State) bool {
	for _, q := range st.Queue {
		if q.Kind == in.Kind && q.Module == in.Module {
			return true
		}
	}
	if in.Kind == KindFlip {
		return st.Phase == workflows.PhaseFlipping
	}
	for _, m := range st.Modules {
		if m.Name == in.Module && m.State == workflows.ModuleMigrating {
			return true
		}
	}
	return false
}

// served says whether the node has done what in asks (ok), or why it
// will not (why); neither while the request is still queued or running.
func served(in NodeRequest, st workflows.State) (ok bool, why string) {
	switch st.Phase {
	case workflows.PhaseFailed, workflows.PhaseReleased:
		return false, fmt.Sprintf("node %s is %s", in.Node, st.Phase)
	}
	queued := false
	for _, q := range st.Queue {
		if q.Kind == in.Kind && q.Module == in.Module {
			queued = true
		}
	}
	if in.Kind == KindMigrate {
		for _, m := range st.Modules {
			if m.Name != in.Module {
				continue
			}
			switch {
			case m.State == workflows.ModuleMigrated:
				return true, ""
			case m.State == workflows.ModuleFailed && !queued:
				return false, fmt.Sprintf("migrate %s failed: %s", in.Module, m.LastError)
			}
			return false, ""
		}
		return false, fmt.Sprintf("node %s does not declare module %s", in.Node, in.Module)
	}
	switch {
	case st.Phase == workflows.PhaseConverged:
		return true, ""
	case queued || st.Phase == workflows.PhaseFlipping:
		return false, ""
	case st.LastError != "":
		return false, st.LastError // the flip's own words: "flip refused by the preview: ..."
	case st.LastPreview != nil && !st.LastPreview.Approved:
		return false, "preview refused: " + strings.Join(st.LastPreview.Reasons, "; ")
	}
	last := "no event"
	if len(st.Events) > 0 {
		last = st.Events[len(st.Events)-1].Text
	}
	return false, "the flip ended without converging: " + last
}
