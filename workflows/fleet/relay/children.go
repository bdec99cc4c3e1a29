// How the fleet learns how its nodes' workflows stand when it cannot see
// them end (a child's future does not cross continue-as-new): the latest
// run under each node's workflow ID, described, against the run the fleet
// started.
package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"adoption/workflows"
)

// Describer is what Children needs of a Temporal client.
type Describer interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// Child is one node as the fleet started it: RunID is the first run of the
// chain the fleet started, or the start of it that a big fleet carries
// across continue-as-new (at least 64 bits: fleet_bounds.go); "" when the
// fleet did not record it.
type Child struct {
	Node  string `json:"node"`
	RunID string `json:"run_id,omitempty"`
}

// ChildrenInput names the fleet and the nodes to describe.
type ChildrenInput struct {
	Fleet string  `json:"fleet"` // the fleet's workflow ID
	Nodes []Child `json:"nodes"`
}

// ChildStanding is how one node's workflow stands: Ended is "" while the
// chain the fleet started runs, else how it ended, in the fleet's words.
type ChildStanding struct {
	Node  string `json:"node"`
	Ended string `json:"ended,omitempty"`
}

// Children describes each node's latest run. A node whose describe fails
// for another reason than a missing workflow is left out (asked again at
// the next round).
func (r *Relay) Children(ctx context.Context, in ChildrenInput) ([]ChildStanding, error) {
	d, ok := r.C.(Describer)
	if !ok {
		return nil, errors.New("the relay's client cannot describe workflows")
	}
	var out []ChildStanding
	for _, c := range in.Nodes {
		if st, err := describeStanding(ctx, d, in.Fleet, c); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// describeStanding describes the latest run under c's workflow ID and
// says how the chain the fleet started stands (standing); a workflow no
// longer there has ended unseen.
func describeStanding(ctx context.Context, d Describer, fleetID string, c Child) (ChildStanding, error) {
	id := workflows.WorkflowID(c.Node)
	resp, err := d.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return ChildStanding{Node: c.Node, Ended: "ended unseen: no workflow " + id + " exists any more"}, nil
	case err != nil:
		return ChildStanding{}, fmt.Errorf("describing %s: %w", id, err)
	}
	info := resp.GetWorkflowExecutionInfo()
	return ChildStanding{Node: c.Node, Ended: standing(fleetID, c, info.GetFirstRunId(), info.GetParentExecution().GetWorkflowId(),
		info.GetExecution().GetRunId(), info.GetStatus())}, nil
}

// standing decides, from the latest run under the node's ID, whether the
// chain the fleet started still runs ("") or how it ended. A chain keeps
// its first run ID and its parent across continue-as-new; a workflow
// started again outside the fleet has another first run and no parent.
func standing(fleetID string, c Child, firstRun, parent, latest string, status enumspb.WorkflowExecutionStatus) string {
	id := workflows.WorkflowID(c.Node)
	ours := parent == fleetID && (c.RunID == "" || firstRun == "" || strings.HasPrefix(firstRun, c.RunID))
	switch {
	case !ours:
		return fmt.Sprintf("replaced outside the fleet: the workflow %s under its ID now (run %s, %s) was not started by this fleet; the run the fleet started has ended (adopt status %s)",
			id, latest, strings.ToLower(status.String()), c.Node)
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return ""
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case status == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed: see adopt status " + c.Node
	}
	return "ended unseen: its workflow " + id + " is " + strings.ToLower(status.String()) + " (adopt status " + c.Node + ")"
}
