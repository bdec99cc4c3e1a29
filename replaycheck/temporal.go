// The check's two parts against Temporal: the open runs from visibility
// (Query is the one place saying which workflows an upgrade moves), and
// each run's history replayed with the SDK's replayer on the workflow types
// a registration function registers, through the client's converters so
// that encrypted payloads decode.
package replaycheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
)

// Query selects the workflows that move when the deployment's current
// version changes: every open run on the orchestrator's task queue, NodeMigration
// and Fleet alike, all registered AutoUpgrade (workflows.Register).
func Query() string {
	return fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", workflows.TaskQueue)
}

// pageSize bounds one visibility page.
const pageSize = 1000

// Visibility lists the open runs of Query, page by page.
type Visibility struct {
	C interface {
		ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	}
	Namespace string
}

// OpenRuns implements Lister.
func (v Visibility) OpenRuns(ctx context.Context) ([]Run, error) {
	var runs []Run
	var token []byte
	for {
		resp, err := v.C.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: v.Namespace, Query: Query(), PageSize: pageSize, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			runs = append(runs, Run{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(), Type: e.GetType().GetName()})
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return runs, nil
		}
	}
}

// Histories replays runs read through C on the types Register registers,
// decoding with DataConverter and FailureConverter (nil: the SDK's
// defaults, as for a client dialled without them).
type Histories struct {
	C interface {
		GetWorkflowHistory(ctx context.Context, workflowID, runID string, isLongPoll bool, filterType enumspb.HistoryEventFilterType) client.HistoryEventIterator
	}
	Register         func(workflows.Registry)
	DataConverter    converter.DataConverter
	FailureConverter converter.FailureConverter
}

// Replay implements Replayer.
func (h Histories) Replay(ctx context.Context, r Run) error {
	it := h.C.GetWorkflowHistory(ctx, r.WorkflowID, r.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			if errors.As(err, new(*serviceerror.NotFound)) {
				return fmt.Errorf("%w: %v", ErrClosed, err)
			}
			return fmt.Errorf("read the history: %w", err)
		}
		hist.Events = append(hist.Events, e)
	}
	if n := len(hist.Events); n > 0 && closing(hist.Events[n-1].GetEventType()) {
		return ErrClosed
	}
	if !ranTask(hist) {
		return nil // no workflow task completed: no command to disagree with
	}
	// One replayer per history: nothing is shared between concurrent
	// replays but the registered functions.
	rp, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: h.DataConverter, FailureConverter: h.FailureConverter})
	if err != nil {
		return err
	}
	h.Register(rp)
	return rp.ReplayWorkflowHistoryWithOptions(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: r.WorkflowID, RunID: r.RunID}})
}

// closing reports whether t ends a run.
func closing(t enumspb.EventType) bool {
	switch t {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		return true
	}
	return false
}

// ranTask reports whether a workflow task of the run completed: before
// that its history holds no command (and the replayer refuses it).
func ranTask(h *historypb.History) bool {
	for _, e := range h.GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return true
		}
	}
	return false
}
