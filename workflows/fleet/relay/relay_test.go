package relay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/firewall/flip"
	"adoption/workflows"
)

// served reads a node's status: done, still going, or why not.
func TestServed(t *testing.T) {
	mig := NodeRequest{Node: "n1", Kind: KindMigrate, Module: "web"}
	flp := NodeRequest{Node: "n1", Kind: KindFlip}
	mod := func(state, why string) []workflows.ModuleState {
		return []workflows.ModuleState{{Name: "web", State: state, LastError: why}}
	}
	for _, c := range []struct {
		what string
		in   NodeRequest
		st   workflows.State
		ok   bool
		why  string
	}{
		{"migrated", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleMigrated, "")}, true, ""},
		{"migrating", mig, workflows.State{Phase: workflows.PhaseMigrating, Modules: mod(workflows.ModuleMigrating, "")}, false, ""},
		{"failed", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleFailed, "boom")}, false, "migrate web failed: boom"},
		{"failed, queued again", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleFailed, "boom"), Queue: []workflows.Request{{Kind: KindMigrate, Module: "web"}}}, false, ""},
		{"not declared", mig, workflows.State{Phase: workflows.PhaseAdopted}, false, "node n1 does not declare module web"},
		{"converged", flp, workflows.State{Phase: workflows.PhaseConverged}, true, ""},
		{"flip queued", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Reasons: []string{"old"}}, Queue: []workflows.Request{{Kind: KindFlip}}}, false, ""},
		{"flipping", flp, workflows.State{Phase: workflows.PhaseFlipping}, false, ""},
		{"refused by the flip's preview", flp, workflows.State{Phase: workflows.PhaseAdopted, LastError: "flip refused by the preview: 9999/tcp would close"}, false, "flip refused by the preview: 9999/tcp would close"},
		{"preview refused", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Reasons: []string{"8443/tcp would close"}}}, false, "preview refused: 8443/tcp would close"},
		{"reverted", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Approved: true}, Events: []workflows.Event{{Text: "flip reverted: not confirmed"}}}, false, "the flip ended without converging: flip reverted: not confirmed"},
		{"released", flp, workflows.State{Phase: workflows.PhaseReleased}, false, "node n1 is released"},
	} {
		ok, why := served(c.in, c.st)
		if ok != c.ok || why != c.why {
			t.Errorf("%s: served %v %q, want %v %q", c.what, ok, why, c.ok, c.why)
		}
	}
}

// fakeTemporal answers status queries from states in turn (the last one
// for good) and updates with refuse (nil: accepted).
type fakeTemporal struct {
	errs    []error // the first status reads fail with these, in turn
	reads   int
	states  []workflows.State
	refuse  error
	updates []client.UpdateWorkflowOptions
}

type fakeHandle struct{ err error }

func (h fakeHandle) WorkflowID() string             { return "" }
func (h fakeHandle) RunID() string                  { return "" }
func (h fakeHandle) UpdateID() string               { return "" }
func (h fakeHandle) Get(context.Context, any) error { return h.err }

type fakeValue struct{ st workflows.State }

func (v fakeValue) HasValue() bool { return true }
func (v fakeValue) Get(p any) error {
	*(p.(*workflows.State)) = v.st
	return nil
}

func (f *fakeTemporal) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.updates = append(f.updates, o)
	return fakeHandle{err: f.refuse}, nil
}

func (f *fakeTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	f.reads++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	st := f.states[0]
	if len(f.states) > 1 {
		f.states = f.states[1:]
	}
	return fakeValue{st}, nil
}

// Request sends the update once, by an ID derived from the op's, and
// watches until served; a refusal is an outcome; a request already being
// served (a retried attempt) is not sent again.
func TestRequest(t *testing.T) {
	adopted := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModulePending}}}
	queued := adopted
	queued.Queue = []workflows.Request{{Kind: KindMigrate, Module: "web"}}
	migrating := workflows.State{Phase: workflows.PhaseMigrating, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrating}}}
	migrated := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}
	in := NodeRequest{Node: "n1", Kind: KindMigrate, Module: "web", ID: "op1"}
	for _, c := range []struct {
		what   string
		states []workflows.State
		refuse error
		sent   int
		why    string
	}{
		{"served", []workflows.State{adopted, queued, migrating, migrated}, nil, 1, ""},
		{"already migrated", []workflows.State{migrated}, nil, 0, ""},
		{"being served", []workflows.State{migrating, migrated}, nil, 0, ""},
		{"refused", []workflows.State{adopted}, temporal.NewApplicationError("node n1 refuses migrate web: flipping", "Refused"), 1, "refused: node n1 refuses migrate web: flipping"},
	} {
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		f := &fakeTemporal{states: c.states, refuse: c.refuse}
		env.RegisterActivity(&Relay{C: f, Every: time.Millisecond})
		v, err := env.ExecuteActivity((&Relay{}).Request, in)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var out Outcome
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		if out.Why != c.why || len(f.updates) != c.sent {
			t.Errorf("%s: why %q, sent %d; want %q, %d", c.what, out.Why, len(f.updates), c.why, c.sent)
		}
		if len(f.updates) > 0 && (f.updates[0].UpdateID != "op1/n1" || f.updates[0].UpdateName != workflows.UpdateMigrate) {
			t.Errorf("%s: update %+v", c.what, f.updates[0])
		}
	}
}

// A status read that runs out of time, or finds the server busy, is read
// again within the same attempt; any other failure fails the attempt.
func TestRequestReadsAgainWhenLate(t *testing.T) {
	migrated := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}
	in := NodeRequest{Node: "n1", Kind: KindMigrate, Module: "web", ID: "op1"}
	for _, c := range []struct {
		what  string
		errs  []error
		fails bool
	}{
		{"late, then busy", []error{fmt.Errorf("query: %w", context.DeadlineExceeded), serviceerror.NewResourceExhausted(0, "busy"), serviceerror.NewDeadlineExceeded("late")}, false},
		{"not found", []error{serviceerror.NewNotFound("no workflow")}, true},
	} {
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		f := &fakeTemporal{errs: c.errs, states: []workflows.State{migrated}}
		env.RegisterActivity(&Relay{C: f, Every: time.Millisecond})
		v, err := env.ExecuteActivity((&Relay{}).Request, in)
		if c.fails {
			if err == nil {
				t.Errorf("%s: the attempt did not fail", c.what)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var out Outcome
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		if out.Why != "" || f.reads != len(c.errs)+1 || len(f.updates) != 0 {
			t.Errorf("%s: why %q, %d reads, %d sent; want served after %d reads, none sent", c.what, out.Why, f.reads, len(f.updates), len(c.errs)+1)
		}
	}
}
