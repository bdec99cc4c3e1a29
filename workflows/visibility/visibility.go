// Package visibility is the client's side of the node workflows' search
// attributes: the overview's visibility query (every running node, or
// every workflow that needs a person: AdoptionAttention != ""), its
// listing page by page, and what one listed run says (its node, its
// keywords). `adopt status` and the bench's scale section both ask
// through it, so the figure the bench prints is the command's.
package visibility

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"adoption/workflows"
)

// Query is the overview's visibility query: the running node workflows
// (every run with all); with attention, every workflow whose
// AdoptionAttention is set instead (the nodes and a fleet holding a wave),
// as the Web UI's saved query AdoptionAttention != "" finds them.
func Query(all, attention bool) string {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.NodeWorkflow)
	if attention {
		q = fmt.Sprintf("%s != ''", workflows.AttrAttention.GetName())
	}
	if !all {
		q += " AND ExecutionStatus = 'Running'"
	}
	return q
}

// Lister lists workflow runs by a visibility query (client.Client does).
type Lister interface {
	ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// pageSize is how many runs one list call asks for.
const pageSize = 1000

// List calls each for every run q finds, one list call per page.
func List(ctx context.Context, c Lister, q string, each func(*workflowpb.WorkflowExecutionInfo)) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: pageSize})
		if err != nil {
			return fmt.Errorf("list node workflows (%s): %w", q, err)
		}
		for _, e := range resp.Executions {
			each(e)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return nil
		}
	}
}

// Keyword is the run's keyword search attribute key, "" when unset.
func Keyword(e *workflowpb.WorkflowExecutionInfo, key temporal.SearchAttributeKeyKeyword) string {
	var s string
	if json.Unmarshal(e.GetSearchAttributes().GetIndexedFields()[key.GetName()].GetData(), &s) != nil {
		return ""
	}
	return s
}

// NodeOf is the node a node workflow's run is for: its AdoptionNode, or
// its workflow ID for a run that has none yet. "" for a run that is not a
// node's.
func NodeOf(e *workflowpb.WorkflowExecutionInfo) string {
	if node := Keyword(e, workflows.AttrNode); node != "" {
		return node
	}
	node, _ := strings.CutPrefix(e.GetExecution().GetWorkflowId(), workflows.WorkflowID(""))
	if node == e.GetExecution().GetWorkflowId() {
		return ""
	}
	return node
}
