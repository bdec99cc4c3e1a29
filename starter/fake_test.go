// A fake Temporal client for the CLI's unit tests: the calls the commands
// make, answered from the fake's fields and counted, so that a test can
// say what was asked and what was sent. A call the fake does not implement
// panics (the embedded client is nil): a test learns of a call it did not
// expect.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"google.golang.org/protobuf/types/known/timestamppb"

	"adoption/internal/opkey"
	"adoption/workflows"
)

type fakeClient struct {
	client.Client

	mu    sync.Mutex
	calls map[string]int
	// listed are the visibility queries ListWorkflow was asked.
	listed []string
	// runs are the workflows the server knows, by workflow ID; one absent
	// is NotFound.
	runs map[string]*workflowpb.WorkflowExecutionInfo
	// answers are what a query returns, by workflow ID; queryErr, when set,
	// is returned instead.
	answers  map[string]any
	queryErr error
	// queryWait holds each query this long (or until its context ends).
	queryWait time.Duration
	inFlight  int // queries running now
	maxFlight int // the most queries ever running at once
	// polled are the task queues with a live poller.
	polled  map[string]bool
	signals []sentSignal
	updates []sentSignal // every Update sent, with its argument
	// outcome is what an Update's handle answers, by update name; accepted
	// names the Updates the server accepted (their outcome is found again
	// by ID), the others were refused by the validator (NotFound).
	outcome  map[string]error
	results  map[string]any // what an accepted Update answers, by update name
	accepted map[string]bool
	pollErr  error             // what asking for an outcome again answers, when set
	sent     map[string]string // update ID -> update name
	list     []*workflowpb.WorkflowExecutionInfo
	started  []sentSignal // every workflow started: its ID, type and input
}

type sentSignal struct {
	workflowID, name string
	arg              any
}

func newFake() *fakeClient {
	return &fakeClient{calls: map[string]int{}, runs: map[string]*workflowpb.WorkflowExecutionInfo{},
		answers: map[string]any{}, results: map[string]any{}, polled: map[string]bool{}, outcome: map[string]error{},
		accepted: map[string]bool{}, sent: map[string]string{}}
}

func (f *fakeClient) count(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[call]++
}

func (f *fakeClient) called(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func (f *fakeClient) Close() {}

// ExecuteWorkflow records the start and answers a run of it.
func (f *fakeClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.count("ExecuteWorkflow")
	f.mu.Lock()
	defer f.mu.Unlock()
	var arg any
	if len(args) > 0 {
		arg = args[0]
	}
	f.started = append(f.started, sentSignal{workflowID: o.ID, name: fmt.Sprint(wf), arg: arg})
	return fakeRun{id: o.ID}, nil
}

// fakeRun is a started run: its IDs only.
type fakeRun struct {
	client.WorkflowRun
	id string
}

func (r fakeRun) GetID() string    { return r.id }
func (r fakeRun) GetRunID() string { return "run-1" }

func (f *fakeClient) DescribeWorkflow(_ context.Context, id, _ string) (*client.WorkflowExecutionDescription, error) {
	f.count("DescribeWorkflow")
	info, ok := f.runs[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	return &client.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}}, nil
}

func (f *fakeClient) QueryWorkflow(ctx context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	f.count("QueryWorkflow")
	f.mu.Lock()
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if f.queryWait > 0 {
		select {
		case <-time.After(f.queryWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.queryErr != nil {
		return nil, f.queryErr
	}
	v, ok := f.answers[id]
	if !ok {
		return nil, serviceerror.NewNotFound("no answer for " + id)
	}
	return jsonValue{v}, nil
}

func (f *fakeClient) SignalWorkflow(_ context.Context, id, _, name string, arg any) error {
	f.count("SignalWorkflow")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, sentSignal{workflowID: id, name: name, arg: arg})
	return nil
}

func (f *fakeClient) DescribeTaskQueue(_ context.Context, queue string, _ enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	f.count("DescribeTaskQueue")
	r := &workflowservice.DescribeTaskQueueResponse{}
	if f.polled[queue] {
		r.Pollers = []*taskqueuepb.PollerInfo{{Identity: "fake@" + queue, LastAccessTime: timestamppb.Now()}}
	}
	return r, nil
}

func (f *fakeClient) ListWorkflow(_ context.Context, r *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.count("ListWorkflow")
	f.mu.Lock()
	f.listed = append(f.listed, r.GetQuery())
	f.mu.Unlock()
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.list}, nil
}

func (f *fakeClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.count("UpdateWorkflow")
	id := o.UpdateID
	if id == "" {
		id = fmt.Sprintf("%s-%d", o.UpdateName, f.called("UpdateWorkflow"))
	}
	f.mu.Lock()
	f.sent[id] = o.UpdateName
	f.mu.Unlock()
	f.updates = append(f.updates, sentSignal{workflowID: o.WorkflowID, name: o.UpdateName, arg: o.Args[0]})
	return fakeHandle{workflowID: o.WorkflowID, runID: "run-1", updateID: id, err: f.outcome[o.UpdateName], result: f.results[o.UpdateName]}, nil
}

func (f *fakeClient) GetWorkflowUpdateHandle(ref client.GetWorkflowUpdateHandleOptions) client.WorkflowUpdateHandle {
	f.count("GetWorkflowUpdateHandle")
	f.mu.Lock()
	name := f.sent[ref.UpdateID]
	f.mu.Unlock()
	h := fakeHandle{workflowID: ref.WorkflowID, runID: ref.RunID, updateID: ref.UpdateID}
	switch {
	case f.pollErr != nil:
		h.err = f.pollErr
	case !f.accepted[name]:
		h.err = serviceerror.NewNotFound(fmt.Sprintf("update %q not found", ref.UpdateID))
	default:
		h.err = f.outcome[name]
	}
	return h
}

// fakeHandle answers Get with err (a failure) or an empty result.
type fakeHandle struct {
	workflowID, runID, updateID string
	err                         error
	result                      any
}

func (h fakeHandle) WorkflowID() string { return h.workflowID }
func (h fakeHandle) RunID() string      { return h.runID }
func (h fakeHandle) UpdateID() string   { return h.updateID }
func (h fakeHandle) Get(_ context.Context, ptr any) error {
	if h.err == nil && h.result != nil && ptr != nil {
		return jsonValue{h.result}.Get(ptr)
	}
	return h.err
}

// jsonValue is a query's answer, decoded as the SDK's JSON converter would.
type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }
func (j jsonValue) Get(ptr any) error {
	b, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

// wire is err as a client receives it: through the failure converter, as
// an Update's outcome travels (a plain error becomes an ApplicationError).
func wire(err error) error {
	fc := temporal.GetDefaultFailureConverter()
	return fc.FailureToError(fc.ErrorToFailure(err))
}

// execution is a run as the server describes or lists it, with the node's
// search attributes when node is set.
func execution(id, node, phase string, status enumspb.WorkflowExecutionStatus) *workflowpb.WorkflowExecutionInfo {
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"},
		Type:      &commonpb.WorkflowType{Name: workflows.NodeWorkflow},
		Status:    status, StartTime: timestamppb.Now(),
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{}},
	}
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		info.CloseTime = timestamppb.Now()
	}
	if node != "" {
		info.SearchAttributes.IndexedFields[workflows.AttrNode.GetName()] = keywordPayload(node)
	}
	if phase != "" {
		info.SearchAttributes.IndexedFields[workflows.AttrPhase.GetName()] = keywordPayload(phase)
	}
	return info
}

func keywordPayload(s string) *commonpb.Payload {
	b, _ := json.Marshal(s)
	return &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: b}
}

// runCLI runs one command line against the fake; nothing is dialled.
func runCLI(t *testing.T, f *fakeClient, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("ADOPT_CONFIG", "")
	var out, errb bytes.Buffer
	x := &cli{stdout: &out, stderr: &errb, c: f}
	code = x.execute(context.Background(), args)
	return code, out.String(), errb.String()
}

// fleetFile writes a fleet file for nodes (the first the control node)
// and their node configurations; its path.
func fleetFile(t *testing.T, name string, nodes ...string) string {
	t.Helper()
	dir := t.TempDir()
	key := testKey(t)
	body := "name: " + name + "\nnodes:\n"
	for i, n := range nodes {
		role := "member"
		if i == 0 {
			role = "control"
		}
		p := filepath.Join(dir, n+".yaml")
		if err := os.WriteFile(p, []byte(fmt.Sprintf("node: {name: %s, role: %s}\n", n, role)+key.YAML()), 0o600); err != nil {
			t.Fatal(err)
		}
		body += "  - " + p + "\n"
	}
	p := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testKey is an operator key for one test: the nodes' files trust it and
// the CLI signs with it (operator.sign_key).
func testKey(t *testing.T) opkey.Key {
	t.Helper()
	k, err := opkey.Generate(t.TempDir(), "operator", "operator@test")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}
