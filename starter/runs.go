// A node's latest run, as the server describes it: status, close time and
// the phase it last published, with no worker needed.
package main

import (
	"context"
	"errors"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"

	"adoption/workflows"
	"adoption/workflows/visibility"
)

// run is the latest run of a node's workflow.
type runInfo struct {
	runID   string
	running bool
	status  string // Running, Completed, Terminated, ...
	closed  time.Time
	started time.Time
	phase   workflows.Phase // from AdoptionPhase, or the result of a completed run
	pending []pendingActivity
	result  *workflows.State // a completed run's final state
	// sealed: the result is encrypted with a codec key this CLI lacks.
	sealed bool
}

// pendingActivity is a step the workflow waits on, as the server sees it:
// no worker needed to ask.
type pendingActivity struct {
	Type        string    `json:"type"`
	State       string    `json:"state"` // scheduled, started, cancel requested
	Attempt     int32     `json:"attempt"`
	Scheduled   time.Time `json:"scheduled,omitzero"`
	LastStarted time.Time `json:"last_started,omitzero"`
	LastFailure string    `json:"last_failure,omitempty"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// lastRun describes the node's latest run; nil, nil when there is none.
func (x *cli) lastRun(ctx context.Context, node string) (*runInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	desc, err := x.c.DescribeWorkflow(ctx, workflows.WorkflowID(node), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := desc.RawResponse
	info := d.GetWorkflowExecutionInfo()
	r := runFrom(info)
	for _, p := range d.GetPendingActivities() {
		pa := pendingActivity{Type: p.GetActivityType().GetName(), Attempt: p.GetAttempt(),
			State:       strings.ToLower(strings.TrimPrefix(p.GetState().String(), "PENDING_ACTIVITY_STATE_")),
			LastFailure: x.target.failureMessage(p.GetLastFailure())}
		if t := p.GetScheduledTime(); t != nil {
			pa.Scheduled = t.AsTime()
		}
		if t := p.GetLastStartedTime(); t != nil {
			pa.LastStarted = t.AsTime()
		}
		if t := p.GetNextAttemptScheduleTime(); t != nil {
			pa.NextAttempt = t.AsTime()
		}
		r.pending = append(r.pending, pa)
	}
	if !r.running && info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		// The result is the final state: the phase it ended in, even if
		// the last search attribute upsert did not land.
		var st workflows.State
		err := x.c.GetWorkflow(ctx, workflows.WorkflowID(node), r.runID).Get(ctx, &st)
		if err == nil && st.Phase != "" {
			r.phase, r.result = st.Phase, &st
		}
		r.sealed = encryptedWithoutKey(err)
	}
	return r, nil
}

func runFrom(info *workflowpb.WorkflowExecutionInfo) *runInfo {
	r := &runInfo{
		runID:   info.GetExecution().GetRunId(),
		running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		status:  statusName(info.GetStatus()),
		started: info.GetStartTime().AsTime(),
		phase:   workflows.Phase(visibility.Keyword(info, workflows.AttrPhase)),
	}
	if info.GetCloseTime() != nil {
		r.closed = info.GetCloseTime().AsTime()
	}
	return r
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return s.String()
}
