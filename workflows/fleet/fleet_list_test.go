// Tests of the fleet's ask rounds by one visibility query a round
// (fleet_ask.go, listRound), through the relay's Ended on a fake client.
package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// visibility is a fake Temporal client for the relay's Ended: closed lists
// what a query returns, latest what a describe returns, by workflow ID.
type visibility struct {
	relay.Temporal // not called
	closed         func() []*workflowpb.WorkflowExecutionInfo
	latest         func(id string) *workflowpb.WorkflowExecutionInfo
	queries        []string
	described      []string
}

func (v *visibility) ListWorkflow(_ context.Context, r *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	v.queries = append(v.queries, r.GetQuery())
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: v.closed()}, nil
}

func (v *visibility) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	v.described = append(v.described, id)
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: v.latest(id)}, nil
}

// run is a run's visibility record or description.
func run(id, runID, first, parent string, status enumspb.WorkflowExecutionStatus) *workflowpb.WorkflowExecutionInfo {
	info := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}, FirstRunId: first, Status: status}
	if parent != "" {
		info.ParentExecution = &commonpb.WorkflowExecution{WorkflowId: parent}
	}
	return info
}

// One query a round, whatever the number of nodes: the first round (an
// hour) lists every close, finds m1's old chain closed, and its describe
// says the chain the fleet started still runs: not reported. m1 is then
// terminated and started again outside the fleet: the second round (two
// hours later) lists only the closes since the first (less the lag), and
// reports m1 replaced outside the fleet, which holds the fleet.
func TestFleetListsEndsInOneQueryARound(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	id := workflows.WorkflowID("m1")
	replaced := false
	v := &visibility{
		closed: func() []*workflowpb.WorkflowExecutionInfo {
			return []*workflowpb.WorkflowExecutionInfo{run(id, "r0", "r0", "fleet/prod", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED)}
		},
		latest: func(string) *workflowpb.WorkflowExecutionInfo {
			if replaced {
				return run(id, "r9", "r9", "", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
			}
			return run(id, "r3", "r1", "fleet/prod", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
		},
	}
	env.RegisterActivity(&relay.Relay{C: v})
	in := resumedFleet()
	in.Resume.Nodes[1].RunID = "r1"
	var begin time.Time
	var between, held FleetState
	env.RegisterDelayedCallback(func() { begin = env.Now() }, 0)
	env.RegisterDelayedCallback(func() { between = queryFleet(t, env); replaced = true }, 2*time.Hour)
	env.RegisterDelayedCallback(func() {
		held = queryFleet(t, env)
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
	}, 4*time.Hour)
	env.ExecuteWorkflow(Fleet, in)
	fleetResult(t, env)

	if len(v.queries) != 2 {
		t.Fatalf("queries %q, want two (one a round)", v.queries)
	}
	for _, q := range v.queries {
		for _, want := range []string{"ParentWorkflowId = 'fleet/prod'", "ExecutionStatus != 'Running'", "ExecutionStatus != 'ContinuedAsNew'"} {
			if !strings.Contains(q, want) {
				t.Errorf("query %q, want %q", q, want)
			}
		}
	}
	if strings.Contains(v.queries[0], "CloseTime") {
		t.Errorf("first round's query %q, want every close", v.queries[0])
	}
	since := "CloseTime >= '" + begin.Add(time.Hour-visibilityLag).UTC().Format(time.RFC3339Nano) + "'"
	if !strings.Contains(v.queries[1], since) {
		t.Errorf("second round's query %q, want %q", v.queries[1], since)
	}
	if len(v.described) != 2 || v.described[0] != id || v.described[1] != id {
		t.Errorf("described %q, want m1 once a round", v.described)
	}
	if between.Nodes[1].Ended != "" || between.Held != "" || !between.AskedAt.Equal(begin.Add(time.Hour)) {
		t.Errorf("after the first round: m1 ended %q, held %q, asked at %v; want running, nothing held, asked at %v",
			between.Nodes[1].Ended, between.Held, between.AskedAt, begin.Add(time.Hour))
	}
	if !strings.HasPrefix(held.Nodes[1].Ended, "replaced outside the fleet: the workflow node-migration/m1 under its ID now (run r9, running)") ||
		!strings.Contains(held.Held, "node m1 replaced outside the fleet") {
		t.Errorf("after the second round: m1 ended %q, held %q; want replaced outside the fleet, holding it", held.Nodes[1].Ended, held.Held)
	}
}

// A round whose query fails reports nothing and keeps Since where it was:
// the next round looks as far back.
func TestFleetListRoundFailedKeepsSince(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	env.RegisterActivity(&relay.Relay{C: relay.Temporal(nil)}) // cannot list: every round fails
	in := resumedFleet()
	var after FleetState
	env.RegisterDelayedCallback(func() { after = queryFleet(t, env) }, 5*time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: "m1", Phase: workflows.PhaseConverged, Migrated: 1, Modules: 1})
	}, 6*time.Hour)
	env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, env)
	if !after.AskedAt.IsZero() || after.Nodes[1].Ended != "" || after.Held != "" {
		t.Errorf("after failed rounds: asked at %v, m1 ended %q, held %q; want no round counted", after.AskedAt, after.Nodes[1].Ended, after.Held)
	}
	if st.Nodes[1].Ended != string(workflows.PhaseConverged) {
		t.Errorf("m1 ended %q, want converged", st.Nodes[1].Ended)
	}
}
