// Delivering a request to a node's workflow as an Update: say within
// seconds whether it was delivered, and make what is said true (NotAfter,
// sent only while a worker polls, acceptance bounded). Why: docs/workflows.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/workflows"
)

// skew is the margin between the CLI's give-up time and the NotAfter it
// sends: it covers the network and a clock difference between this machine
// and the Temporal server of up to this much.
const skew = 2 * time.Second

// liveWithin is how recently a poller must have polled to count as alive.
// A worker long-polls for about a minute at a time, and the server keeps a
// dead worker in its poller list for minutes.
const liveWithin = 90 * time.Second

// queueHealth is what the server says about a task queue's pollers.
type queueHealth struct {
	Queue    string    `json:"queue"`
	Pollers  int       `json:"pollers"`            // pollers seen recently enough to be alive
	LastPoll time.Time `json:"last_poll,omitzero"` // the most recent poll of any poller
	Error    string    `json:"error,omitempty"`    // the server could not say
	Identity string    `json:"identity,omitempty"` // the most recent poller
}

func (q queueHealth) alive() bool { return q.Pollers > 0 }

// unknown says the server could not be asked; treated as "maybe alive":
// the acceptance deadline still bounds the wait.
func (q queueHealth) unknown() bool { return q.Error != "" }

// describe is a phrase for messages: "no worker polls task queue X (last
// poll 02:31:10, 5m ago)".
func (q queueHealth) describe(who string, z zone) string {
	switch {
	case q.unknown():
		return fmt.Sprintf("could not ask about task queue %s: %s", q.Queue, q.Error)
	case q.alive():
		return fmt.Sprintf("%s polls task queue %s", who, q.Queue)
	case q.LastPoll.IsZero():
		return fmt.Sprintf("no %s polls task queue %s (none seen in the last minutes)", who, q.Queue)
	}
	return fmt.Sprintf("no %s polls task queue %s since %s (%s ago)", who, q.Queue, z.clock(q.LastPoll), time.Since(q.LastPoll).Round(time.Second))
}

func (x *cli) queueHealth(ctx context.Context, queue string, typ enumspb.TaskQueueType) queueHealth {
	q := queueHealth{Queue: queue}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := x.c.DescribeTaskQueue(ctx, queue, typ)
	if err != nil {
		q.Error = err.Error()
		return q
	}
	for _, p := range r.GetPollers() {
		at := p.GetLastAccessTime().AsTime()
		if at.After(q.LastPoll) {
			q.LastPoll, q.Identity = at, p.GetIdentity()
		}
		if time.Since(at) < liveWithin {
			q.Pollers++
		}
	}
	return q
}

// agents is the health of both queues a node's workflow needs: the
// workflow queue (its code) and the node's own (its agent's activities).
type agents struct {
	Workflow queueHealth `json:"workflow_queue"`
	Node     queueHealth `json:"node_queue"`
}

func (x *cli) agents(ctx context.Context, node string) agents {
	var a agents
	done := make(chan struct{})
	go func() {
		a.Node = x.queueHealth(ctx, workflows.NodeQueue(node), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		close(done)
	}()
	a.Workflow = x.queueHealth(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	<-done
	return a
}

// delivery is the outcome of sending one request.
type delivery struct {
	handle client.WorkflowUpdateHandle
	agents agents
}

// send delivers one Update to the node's workflow and returns once it is
// accepted, refused, or known not to be delivered.
func (x *cli) send(ctx context.Context, node, name, module string, in workflows.RequestInput) (*delivery, error) {
	what := name
	if module != "" {
		what += " " + module
	}
	// A node with no workflow, or whose workflow ended, is said so first:
	// that, not a missing worker, is what the operator must know.
	if last, err := x.lastRun(ctx, node); err == nil && last == nil {
		return nil, fmt.Errorf("node %s has no running migration workflow; start it with `adopt start %s` and the node's configuration (--config)", node, node)
	} else if err == nil && !last.running {
		if err := x.closedRun(ctx, node); err != nil {
			return nil, err
		}
	}
	ag := x.agents(ctx, node)
	// A worker that has just started, or a server that has just restarted,
	// shows its pollers only once they poll again: ask for a few seconds
	// before saying that none polls.
	for wait := time.Now().Add(5 * time.Second); !ag.Workflow.alive() && !ag.Workflow.unknown() && time.Now().Before(wait) && ctx.Err() == nil; {
		time.Sleep(500 * time.Millisecond)
		ag = x.agents(ctx, node)
	}
	if !ag.Workflow.alive() && !ag.Workflow.unknown() {
		return nil, fmt.Errorf("not delivered: %s; nothing was sent. Start the orchestrator (adopt-worker) and send it again", ag.Workflow.describe("worker", x.zone()))
	}
	start := time.Now()
	giveUp := start.Add(x.accept)
	in.NotAfter = giveUp.Add(-skew).UTC()
	id := fmt.Sprintf("%s-%s", name, start.UTC().Format("20060102T150405.000000000"))
	opts := client.UpdateWorkflowOptions{
		UpdateID:     id,
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   name,
		Args:         []any{in},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	}
	wctx, cancel := context.WithDeadline(ctx, giveUp)
	h, err := x.c.UpdateWorkflow(wctx, opts)
	cancel()
	if err == nil {
		return &delivery{handle: h, agents: ag}, nil
	}
	if !timedOut(err) {
		return nil, x.requestError(ctx, node, what, nil, err)
	}
	// Not accepted in time, or cancelled by Ctrl-C. The Update may still
	// sit on the server; until NotAfter has passed on the server's clock,
	// a workflow task may yet accept it. Ask once more after that, by the
	// same Update ID (a deduplicated, read-only question).
	interrupted := ctx.Err() != nil
	if interrupted {
		fmt.Fprintf(x.stderr, "adopt: interrupted; waiting until %s to know whether %s had been accepted already (at most %s)\n",
			x.zone().clock(in.NotAfter.Add(skew)), what, time.Until(in.NotAfter.Add(skew)).Round(time.Second))
	}
	h, err = x.settle(ctx, opts, in.NotAfter.Add(skew))
	if err == nil {
		// A rejection comes back from Get at once; an accepted request
		// answers Get or times out (its handler may still be running).
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = h.Get(gctx, nil)
		cancel()
		if err == nil || timedOut(err) {
			return &delivery{handle: h, agents: ag}, nil
		}
		if !isLate(err) {
			return nil, x.requestError(ctx, node, what, h, err)
		}
	} else if !timedOut(err) {
		return nil, x.requestError(ctx, node, what, nil, err)
	}
	why := fmt.Sprintf("the node's workflow did not accept it within %s", x.accept)
	if interrupted {
		why = "interrupted before the node's workflow accepted it"
	}
	if !ag.Workflow.alive() {
		why += "; " + ag.Workflow.describe("worker", x.zone())
	}
	return nil, fmt.Errorf("not delivered: %s %s: %s. It will not run: if it reaches the workflow later it is refused (not after %s). Send it again once `adopt status %s` answers",
		what, node, why, x.zone().clock(in.NotAfter), node)
}

// settle asks again, after the request's NotAfter (seconds away), what
// became of it.
func (x *cli) settle(ctx context.Context, opts client.UpdateWorkflowOptions, after time.Time) (client.WorkflowUpdateHandle, error) {
	if wait := time.Until(after); wait > 0 {
		time.Sleep(wait)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	return x.c.UpdateWorkflow(sctx, opts)
}

func timedOut(err error) bool {
	var to *client.WorkflowUpdateServiceTimeoutOrCanceledError
	return errors.As(err, &to) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// isLate: the workflow's validator turned the request away because it
// came after its NotAfter, so after this CLI had stopped waiting and
// reported it as not delivered. The validators say so with the type Late;
// resolve's says it in words only (workflows/resolve.go, as deployed), so
// its words count too.
func isLate(err error) bool {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Type() == "Late" || strings.Contains(ae.Message(), "after its sender stopped waiting")
}

// requestError turns what the server or the workflow said into an error
// with its exit code. h is the request's handle when err is the outcome it
// answered with, nil when the server answered with an error (the workflow
// never saw the request). An outcome is one of three things, told apart
// by rejected() below: the validator's refusal (exit 2, with its reasons);
// a late request the validator turned away (exit 1, not delivered); or a
// handler that failed once the workflow had accepted the request (exit 1:
// an error, not a refusal, such as a preview whose node did not answer).
// When the server cannot say which, it is taken for a refusal. The hint
// never suggests a harmful command.
func (x *cli) requestError(ctx context.Context, node, what string, h client.WorkflowUpdateHandle, err error) error {
	var se serviceerror.ServiceError
	if h != nil && !errors.As(err, &se) {
		return x.outcomeError(ctx, node, what, h, err)
	}
	// The workflow may have ended between the check and the send (a
	// completed workflow takes no Update): say what its last run was.
	if cerr := x.closedRun(ctx, node); cerr != nil {
		return cerr
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("node %s has no running migration workflow; start it with `adopt start %s` and the node's configuration (--config)", node, node)
	}
	return fmt.Errorf("node %s: %s: %w", node, what, err)
}

// outcomeError is requestError for a failed outcome.
func (x *cli) outcomeError(ctx context.Context, node, what string, h client.WorkflowUpdateHandle, err error) error {
	if isLate(err) {
		return fmt.Errorf("not delivered: %s reached node %s's workflow only after this CLI had stopped waiting for it, and was turned away for that: it does not run. Send it again once `adopt status %s` answers",
			what, node, node)
	}
	msg := err.Error()
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	rejected, aerr := x.rejected(ctx, h)
	if aerr == nil && !rejected {
		return fmt.Errorf("node %s: %s failed after its workflow accepted it (an error, not a refusal): %s; see `adopt status %s`, then try again", node, what, msg, node)
	}
	// When the server cannot say, the failure is taken for a refusal, as
	// every failure was before the two were told apart: most are.
	doubt := ""
	if aerr != nil {
		doubt = fmt.Sprintf(" (taken as a refusal: the server could not say whether the workflow had accepted it: %v)", aerr)
	}
	var reasons []string
	if ae != nil && ae.HasDetails() {
		_ = ae.Details(&reasons)
	}
	if len(reasons) > 0 {
		return refused(fmt.Errorf("node %s refused %s%s", node, what, doubt), reasons)
	}
	return refused(fmt.Errorf("node %s refused %s: %s%s", node, what, msg, doubt), []string{msg})
}

// rejected asks the server whether an Update that failed was refused by
// its validator or failed in its handler once accepted. Both reach the
// caller as the same kind of failure; only the server tells them apart.
// A refused Update leaves no trace (nothing is written to the history), so
// asking for its outcome by ID finds nothing (NotFound), while an accepted
// one's outcome is kept with the run (temporalio/temporal
// docs/architecture/workflow-update.md, "Update Registry"). The run is
// named, so an accepted Update of a run that has since continued as new is
// still found.
func (x *cli) rejected(ctx context.Context, h client.WorkflowUpdateHandle) (bool, error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	err := x.c.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{
		WorkflowID: h.WorkflowID(), RunID: h.RunID(), UpdateID: h.UpdateID(),
	}).Get(pctx, nil)
	var nf *serviceerror.NotFound
	var se serviceerror.ServiceError
	switch {
	case errors.As(err, &nf):
		return true, nil
	case timedOut(err) || errors.As(err, &se):
		return false, err
	}
	return false, nil // its outcome (the same failure): it had been accepted
}

// closedRun explains a node whose workflow is not running, from its last
// run: a converged node is done (nothing to start again), a released one
// can be adopted again, a failed or terminated one restarted. nil when the
// last run is still running or cannot be read.
func (x *cli) closedRun(ctx context.Context, node string) error {
	last, err := x.lastRun(ctx, node)
	if err != nil || last == nil || last.running {
		return nil
	}
	switch last.phase {
	case workflows.PhaseConverged:
		return refused(fmt.Errorf("node %s converged (%s): its workflow is complete and takes no more requests; nothing needs doing", node, x.zone().stamp(last.closed)), nil)
	case workflows.PhaseReleased:
		return refused(fmt.Errorf("node %s was released (%s): it is as found; `adopt start %s` adopts it again", node, x.zone().stamp(last.closed), node), nil)
	}
	return fmt.Errorf("node %s's workflow is not running (%s at %s, phase %s); see `adopt status %s`, then `adopt start %s` to start again",
		node, last.status, x.zone().stamp(last.closed), orUnknown(string(last.phase)), node, node)
}
