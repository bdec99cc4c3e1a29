package relay

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// standing tells the chain the fleet started (same first run, the fleet as
// parent) from a workflow started again outside it.
func TestStanding(t *testing.T) {
	c := Child{Node: "m1", RunID: "r1"}
	for _, tc := range []struct {
		what                  string
		first, parent, latest string
		status                enumspb.WorkflowExecutionStatus
		want                  string
	}{
		{"running, continued as new", "r1", "fleet/prod", "r5", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, ""},
		{"terminated", "r1", "fleet/prod", "r5", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, "terminated"},
		{"restarted outside", "r9", "", "r9", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "replaced outside the fleet: the workflow node-migration/m1 under its ID now (run r9, running)"},
		{"another fleet's", "r9", "fleet/other", "r9", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "replaced outside the fleet"},
	} {
		got := standing("fleet/prod", c, tc.first, tc.parent, tc.latest, tc.status)
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
	}
}

// pagedVisibility answers a list in pages of two (the token is the next
// row's index) and a describe from latest.
type pagedVisibility struct {
	Temporal
	rows      []*workflowpb.WorkflowExecutionInfo
	latest    map[string]*workflowpb.WorkflowExecutionInfo
	queries   []string
	described []string
}

func (p *pagedVisibility) ListWorkflow(_ context.Context, r *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	p.queries = append(p.queries, r.GetQuery())
	from := 0
	if len(r.GetNextPageToken()) > 0 {
		from, _ = strconv.Atoi(string(r.GetNextPageToken()))
	}
	to := min(from+2, len(p.rows))
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: p.rows[from:to]}
	if to < len(p.rows) {
		resp.NextPageToken = []byte(strconv.Itoa(to))
	}
	return resp, nil
}

func (p *pagedVisibility) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	p.described = append(p.described, id)
	info, ok := p.latest[id]
	if !ok {
		return nil, serviceerror.NewNotFound("gone")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

func info(id, runID, first, parent string, status enumspb.WorkflowExecutionStatus) *workflowpb.WorkflowExecutionInfo {
	i := &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}, FirstRunId: first, Status: status}
	if parent != "" {
		i.ParentExecution = &commonpb.WorkflowExecution{WorkflowId: parent}
	}
	return i
}

// Ended reads every page, describes only the asked nodes it lists (once
// each), and reports those whose latest run says the fleet's chain ended.
func TestEndedPagesAndConfirms(t *testing.T) {
	term, done := enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	p := &pagedVisibility{
		rows: []*workflowpb.WorkflowExecutionInfo{
			info("node-migration/a", "a1", "", "fleet/prod", done),
			info("node-migration/x", "x1", "", "fleet/prod", term), // not asked: ended already
			info("node-migration/b", "b0", "", "fleet/prod", term), // an old chain of b
			info("node-migration/c", "c2", "", "fleet/prod", term),
			info("node-migration/c", "c3", "", "fleet/prod", term), // listed twice, described once
			info("node-migration/d", "d1", "", "fleet/prod", term),
		},
		latest: map[string]*workflowpb.WorkflowExecutionInfo{
			"node-migration/a": info("node-migration/a", "a1", "a0", "fleet/prod", done),
			"node-migration/b": info("node-migration/b", "b4", "b1", "fleet/prod", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING),
			"node-migration/c": info("node-migration/c", "c9", "c9", "", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING),
		},
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out, err := (&Relay{C: p}).Ended(context.Background(), EndedInput{Fleet: "fleet/prod", Since: since,
		Nodes: []Child{{Node: "a", RunID: "a0"}, {Node: "b", RunID: "b1"}, {Node: "c", RunID: "c1"}, {Node: "d", RunID: "d0"}, {Node: "e", RunID: "e0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.queries) != 3 || p.queries[0] != "ParentWorkflowId = 'fleet/prod' AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew' AND CloseTime >= '2026-01-02T03:04:05Z'" {
		t.Errorf("queries %q, want three pages of the fleet's closes since %v", p.queries, since)
	}
	if strings.Join(p.described, " ") != "node-migration/a node-migration/b node-migration/c node-migration/d" {
		t.Errorf("described %q, want a, b, c, d once each", p.described)
	}
	got := map[string]string{}
	for _, s := range out.Ended {
		got[s.Node] = s.Ended
	}
	if len(got) != 3 || !strings.HasPrefix(got["a"], "ended unseen: its workflow node-migration/a is completed") ||
		!strings.HasPrefix(got["c"], "replaced outside the fleet") || !strings.Contains(got["d"], "no workflow node-migration/d exists") {
		t.Errorf("ended %q, want a completed, c replaced, d gone (b's old chain and unlisted e not)", got)
	}
	if out.Listed != 6 || out.Described != 4 {
		t.Errorf("listed %d, described %d; want 6, 4", out.Listed, out.Described)
	}
	if _, err := EndedQuery("fleet/x' OR 'a'='a", time.Time{}); err == nil {
		t.Error("a fleet ID with a quote made a query")
	}
}
