package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"adoption/metrics"
	"adoption/workflows"
)

type pagedLister struct {
	pages   [][]*workflowpb.WorkflowExecutionInfo
	queries []string
}

func (l *pagedLister) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	l.queries = append(l.queries, req.Query)
	i := len(req.NextPageToken)
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: l.pages[i]}
	if i+1 < len(l.pages) {
		resp.NextPageToken = make([]byte, i+1)
	}
	return resp, nil
}

func execution(t *testing.T, node, phase string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	f := map[string]*commonpb.Payload{}
	for k, v := range map[string]string{workflows.AttrNode.GetName(): node, workflows.AttrPhase.GetName(): phase} {
		if v == "" {
			continue
		}
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		f[k] = p
	}
	return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{IndexedFields: f}}
}

// A restarted orchestrator serves every running node's phase at once, read
// from visibility, across pages; a workflow with no phase yet is left out.
func TestRepublishPhases(t *testing.T) {
	m, err := metrics.New("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	l := &pagedLister{pages: [][]*workflowpb.WorkflowExecutionInfo{
		{execution(t, "n1", "adopted"), execution(t, "n2", "")},
		{execution(t, "n3", "flipped")},
	}}
	n, err := republishPhases(context.Background(), l, "default", m.SDK())
	if err != nil || n != 2 {
		t.Fatalf("republishPhases = %d, %v; want 2", n, err)
	}
	if !strings.Contains(l.queries[0], "WorkflowType = '"+workflows.NodeWorkflow+"'") || !strings.Contains(l.queries[0], "Running") {
		t.Errorf("query %q", l.queries[0])
	}
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body := rr.Body.String()
	for _, want := range []string{`node="n1",phase="adopted"`, `node="n3",phase="flipped"`} {
		found := false
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "adoption_phase{") && strings.Contains(line, want) &&
				strings.Contains(line, `task_queue="adoption"`) && strings.HasSuffix(line, " 1") {
				found = true
			}
		}
		if !found {
			t.Errorf("no adoption_phase{%s} 1:\n%s", want, body)
		}
	}
	if strings.Contains(body, `node="n2"`) {
		t.Errorf("a workflow with no phase got a series:\n%s", body)
	}
}
