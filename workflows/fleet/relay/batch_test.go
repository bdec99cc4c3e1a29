package relay

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/intent"
	"adoption/workflows"
)

// nodesTemporal answers each node's status from its own state, safely
// from many goroutines: an accepted migrate makes the module migrated.
type nodesTemporal struct {
	mu      sync.Mutex
	states  map[string]workflows.State
	refuse  map[string]bool
	intents map[string]*intent.Signed
}

func (f *nodesTemporal) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := o.Args[0].(workflows.RequestInput)
	for node := range f.states {
		if workflows.WorkflowID(node) != o.WorkflowID {
			continue
		}
		f.intents[node] = in.Intent
		if f.refuse[node] {
			return fakeHandle{err: temporal.NewApplicationError("node "+node+" refuses", "Refused")}, nil
		}
		f.states[node] = workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}
	}
	return fakeHandle{}, nil
}

func (f *nodesTemporal) QueryWorkflow(_ context.Context, id, _, _ string, _ ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for node, st := range f.states {
		if workflows.WorkflowID(node) == id {
			return fakeValue{st}, nil
		}
	}
	return fakeValue{}, nil
}

// Requests serves every node of a batch, each as Request would, and
// answers in the batch's order; a node's request without an intent is
// sent the batch's.
func TestRequests(t *testing.T) {
	pending := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModulePending}}}
	migrated := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}
	f := &nodesTemporal{
		states:  map[string]workflows.State{"n1": migrated, "n2": pending, "n3": pending},
		refuse:  map[string]bool{"n2": true},
		intents: map[string]*intent.Signed{},
	}
	shared, own := &intent.Signed{Payload: []byte("all")}, &intent.Signed{Payload: []byte("n3")}
	in := Batch{Intent: shared, Requests: []NodeRequest{
		{Node: "n1", Kind: KindMigrate, Module: "web", ID: "op1"},
		{Node: "n2", Kind: KindMigrate, Module: "web", ID: "op1"},
		{Node: "n3", Kind: KindMigrate, Module: "web", ID: "op1", Intent: own},
	}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(&Relay{C: f, Every: time.Millisecond})
	v, err := env.ExecuteActivity((&Relay{}).Requests, in)
	if err != nil {
		t.Fatal(err)
	}
	var out []Outcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	want := []Outcome{{Node: "n1"}, {Node: "n2", Why: "refused: node n2 refuses"}, {Node: "n3"}}
	if len(out) != len(want) {
		t.Fatalf("outcomes %+v, want %+v", out, want)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("outcome %d: %+v, want %+v", i, out[i], want[i])
		}
	}
	if _, sent := f.intents["n1"]; sent {
		t.Error("n1, migrated already, was sent its request")
	}
	if string(f.intents["n2"].Payload) != "all" || string(f.intents["n3"].Payload) != "n3" {
		t.Errorf("intents sent: n2 %q, n3 %q; want the batch's to n2, its own to n3", f.intents["n2"].Payload, f.intents["n3"].Payload)
	}
}
