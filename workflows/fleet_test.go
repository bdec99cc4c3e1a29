package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
)

func TestValidateFleet(t *testing.T) {
	ok := FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}, {Node: "n2", Role: "member"}}}
	if err := ValidateFleet(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   FleetInput
		want string
	}{
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n2", Role: "member"}, {Node: "n1", Role: "control"}}}, "control node n1 must come first"},
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "member"}}}, "exactly one control node"},
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}, {Node: "n1", Role: "member"}}}, "node n1 appears twice"},
		{FleetInput{Name: "Prod!", Nodes: []config.Plan{{Node: "n1", Role: "control"}}}, `fleet name "Prod!" is invalid`},
		{FleetInput{Name: "prod"}, "the fleet has no nodes"},
	} {
		err := ValidateFleet(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateFleet(%+v) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestNodeDone(t *testing.T) {
	for _, c := range []struct {
		p    NodeProgress
		want bool
	}{
		{NodeProgress{Phase: PhaseAdopted, Migrated: 2, Modules: 2}, true},
		{NodeProgress{Phase: PhaseAdopted, Migrated: 1, Modules: 2}, false},
		{NodeProgress{Phase: PhaseMigrating, Migrated: 1, Modules: 2}, false},
		{NodeProgress{Phase: PhaseProbing}, false},
		{NodeProgress{Phase: PhaseConverged, Migrated: 0, Modules: 0}, true},
	} {
		if got := nodeDone(c.p); got != c.want {
			t.Errorf("nodeDone(%+v) = %v", c.p, got)
		}
	}
}

func fleetMembers() []FleetMember {
	return []FleetMember{{Node: "c1", Role: "control"}, {Node: "m1", Role: "member"}, {Node: "m2", Role: "member"}}
}

// newFleetEnv: each node's plan comes from its agent (the Plan activity);
// each child is mocked: it returns at once (converged) unless its node is
// in fail, in which case its first run fails.
func newFleetEnv(t *testing.T, fail map[string]bool, planCalls *[]string) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(NodeMigration, workflow.RegisterOptions{Name: NodeWorkflow})
	env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		*planCalls = append(*planCalls, in.Node)
		role := "member"
		if in.Node == "c1" {
			role = "control"
		}
		return &config.Plan{Node: in.Node, Role: role, Modules: []config.ModulePlan{{Name: "web"}}}, nil
	})
	env.OnWorkflow(NodeWorkflow, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in Input) (*State, error) {
		if fail[in.Plan.Node] {
			delete(fail, in.Plan.Node)
			return nil, temporal.NewNonRetryableApplicationError("boom", "Boom", nil)
		}
		return &State{Node: in.Plan.Node, Phase: PhaseConverged, Modules: []ModuleState{{Name: "web", State: ModuleMigrated}}}, nil
	})
	return env
}

// The fleet reads each node's plan from its agent when it starts it, in
// order; a malformed progress signal is dropped; a failed node holds the
// fleet (status says so) until `fleet retry` starts it again.
func TestFleetHoldsOnFailureAndRetries(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, map[string]bool{"m1": true}, &plans)
	var held FleetState
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalNodeProgress, NodeProgress{Node: "nosuch", Phase: PhaseAdopted})
		env.SignalWorkflow(SignalNodeProgress, NodeProgress{Node: "c1", Phase: "bogus"})
		env.SignalWorkflow(SignalNodeProgress, "not even a struct")
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryFleet)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&held)
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st FleetState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(held.Held, "node m1 failed: boom") || !strings.Contains(held.Held, "adopt fleet retry m1") {
		t.Errorf("held fleet status = %q, want m1's failure and the retry command", held.Held)
	}
	if held.Nodes[2].Started {
		t.Errorf("m2 started while m1 had failed: %+v", held.Nodes)
	}
	if got := strings.Join(plans, ","); got != "c1,m1,m1,m2" {
		t.Errorf("plans read for %s, want c1,m1,m1,m2 (m1 read again on retry)", got)
	}
	for _, n := range st.Nodes {
		if n.Ended != string(PhaseConverged) {
			t.Errorf("node %s ended %q, want converged", n.Node, n.Ended)
		}
	}
}

// An agent whose plan is another node's, or another role's, is refused:
// the node does not start and the fleet holds; `fleet next` goes on.
func TestFleetRefusesAForeignPlan(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(NodeMigration, workflow.RegisterOptions{Name: NodeWorkflow})
	env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		if in.Node == "m1" {
			return &config.Plan{Node: "m1", Role: "control"}, nil
		}
		role := "member"
		if in.Node == "c1" {
			role = "control"
		}
		return &config.Plan{Node: in.Node, Role: role}, nil
	})
	env.OnWorkflow(NodeWorkflow, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in Input) (*State, error) {
		return &State{Node: in.Plan.Node, Phase: PhaseReleased}, nil
	})
	var held FleetState
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryFleet)
		_ = v.Get(&held)
		env.SignalWorkflow(SignalFleetNext, nil)
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	// m1 stays not started: the fleet cannot finish by itself.
	if env.IsWorkflowCompleted() && env.GetWorkflowError() == nil {
		var st FleetState
		_ = env.GetWorkflowResult(&st)
		t.Fatalf("the fleet finished with m1 refused: %+v", st)
	}
	if !strings.Contains(held.Held, `its agent's plan is node "m1" with role "control"`) {
		t.Errorf("held = %q", held.Held)
	}
}

// Continue-as-new carries names and progress, never plans, even for a
// fleet started the old way with every plan inline.
func TestFleetContinuesAsNewWithoutPlans(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.SetContinueAsNewSuggested(true)
	plans := []config.Plan{{Node: "c1", Role: "control"}, {Node: "m1", Role: "member"}}
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Nodes: plans})
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
	}
	var next FleetInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.Nodes) != 0 || len(next.Members) != 2 || next.Resume == nil || next.Resume.Runs != 1 {
		t.Fatalf("carried input: %+v", next)
	}
}
