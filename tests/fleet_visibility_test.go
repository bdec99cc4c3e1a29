package tests

// What a fleet's ask round (relay.Ended, run by the fleet as a local
// activity) relies on, checked on a real dev server (SQLite visibility):
// ParentWorkflowId in a list query, kept by every run of a chain across
// continue-as-new; a chain's continued-as-new runs left out; a chain
// terminated and started again outside its parent reported, confirmed by
// its describe.

import (
	"context"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/internal/wait"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

const visQueue = "vis-test"

// visParent starts its one child (abandoned, like the fleet's) and waits.
func visParent(ctx workflow.Context, node string) error {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: workflows.WorkflowID(node), TaskQueue: visQueue,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON})
	if err := workflow.ExecuteChildWorkflow(cctx, "VisChild", 0).GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return err
	}
	return workflow.Sleep(ctx, time.Hour)
}

// visChild continues as new once, then waits.
func visChild(ctx workflow.Context, gen int) error {
	if gen == 0 {
		return workflow.NewContinueAsNewError(ctx, "VisChild", 1)
	}
	return workflow.Sleep(ctx, time.Hour)
}

func TestFleetEndedQueryOnDevServer(t *testing.T) {
	srv := startDevServerOnly(t)
	c, err := client.Dial(client.Options{HostPort: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, visQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(visParent, workflow.RegisterOptions{Name: "VisParent"})
	w.RegisterWorkflowWithOptions(visChild, workflow.RegisterOptions{Name: "VisChild"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx := context.Background()
	const fleetID, node = "fleet/vis", "vnode"
	id := workflows.WorkflowID(node)
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fleetID, TaskQueue: visQueue}, "VisParent", node); err != nil {
		t.Fatal(err)
	}
	// The chain's second run, the fleet's child still.
	var first string
	wait.For(t, 30*time.Second, "the child's second run", func() bool {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return false
		}
		i := d.GetWorkflowExecutionInfo()
		first = i.GetFirstRunId()
		return i.GetExecution().GetRunId() != first && i.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	})
	// Both runs carry the parent in visibility.
	wait.For(t, 30*time.Second, "both runs listed by ParentWorkflowId", func() bool {
		r, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: "ParentWorkflowId = '" + fleetID + "'"})
		if err != nil {
			t.Fatalf("ParentWorkflowId in a list query: %v", err)
		}
		return len(r.GetExecutions()) == 2
	})
	rel := &relay.Relay{C: c}
	in := relay.EndedInput{Fleet: fleetID, Nodes: []relay.Child{{Node: node, RunID: first}}}
	out, err := rel.Ended(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Listed != 0 || len(out.Ended) != 0 {
		t.Fatalf("a running chain (one run continued as new): listed %d, ended %+v; want nothing", out.Listed, out.Ended)
	}
	// Terminated and started again outside the fleet (no parent).
	if err := c.TerminateWorkflow(ctx, id, "", "e2e: replaced outside the fleet"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: visQueue}, "VisChild", 1); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the terminated chain reported", func() bool {
		out, err = rel.Ended(ctx, in)
		return err == nil && len(out.Ended) == 1
	})
	if out.Listed != 1 || !strings.HasPrefix(out.Ended[0].Ended, "replaced outside the fleet: the workflow "+id) {
		t.Errorf("listed %d, ended %+v; want the terminated run alone, reported replaced outside the fleet", out.Listed, out.Ended)
	}
	// Since after the close: old news, not listed.
	in.Since = time.Now().Add(time.Minute)
	if out, err = rel.Ended(ctx, in); err != nil || out.Listed != 0 {
		t.Errorf("since after the close: listed %d (%v), want none", out.Listed, err)
	}
}
