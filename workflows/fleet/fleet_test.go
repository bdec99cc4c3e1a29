package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/workflows"
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
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}}, AskFirst: time.Millisecond}, "ask_after: 1ms: give a duration from 1s to 24h"},
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}}, AskFirst: 48 * time.Hour}, "ask_after: 48h0m0s"},
	} {
		err := ValidateFleet(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateFleet(%+v) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestNodeDone(t *testing.T) {
	for _, c := range []struct {
		p    workflows.NodeProgress
		want bool
	}{
		{workflows.NodeProgress{Phase: workflows.PhaseAdopted, Migrated: 2, Modules: 2}, true},
		{workflows.NodeProgress{Phase: workflows.PhaseAdopted, Migrated: 1, Modules: 2}, false},
		{workflows.NodeProgress{Phase: workflows.PhaseMigrating, Migrated: 1, Modules: 2}, false},
		{workflows.NodeProgress{Phase: workflows.PhaseProbing}, false},
		{workflows.NodeProgress{Phase: workflows.PhaseConverged, Migrated: 0, Modules: 0}, true},
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
	return newSlowFleetEnv(t, fail, nil, planCalls)
}

// newSlowFleetEnv is newFleetEnv whose children in slow take that long to
// converge.
func newSlowFleetEnv(t *testing.T, fail map[string]bool, slow map[string]time.Duration, planCalls *[]string) *testsuite.TestWorkflowEnvironment {
	return fleetEnv(fail, slow, func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		*planCalls = append(*planCalls, in.Node)
		return memberPlan(in.Node), nil
	})
}

// memberPlan is the plan every agent of fleetMembers answers with.
func memberPlan(node string) *config.Plan {
	role := "member"
	if node == "c1" {
		role = "control"
	}
	return &config.Plan{Node: node, Role: role, Modules: []config.ModulePlan{{Name: "web"}}}
}

// fleetEnv: each node's agent answers the Plan activity with plan.
func fleetEnv(fail map[string]bool, slow map[string]time.Duration, plan func(context.Context, activities.PlanInput) (*config.Plan, error)) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(workflows.NodeMigration, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	env.OnActivity(nodeActs.Plan, mock.Anything, mock.Anything).Return(plan)
	env.OnWorkflow(workflows.NodeWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.Input) (*workflows.State, error) {
		if fail[in.Plan.Node] {
			delete(fail, in.Plan.Node)
			return nil, temporal.NewNonRetryableApplicationError("boom", "Boom", nil)
		}
		if d := slow[in.Plan.Node]; d > 0 {
			if err := workflow.Sleep(ctx, d); err != nil {
				return nil, err
			}
		}
		return &workflows.State{Node: in.Plan.Node, Phase: workflows.PhaseConverged, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}, nil
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
		env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: "nosuch", Phase: workflows.PhaseAdopted})
		env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: "c1", Phase: "bogus"})
		env.SignalWorkflow(workflows.SignalNodeProgress, "not even a struct")
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
		if n.Ended != string(workflows.PhaseConverged) {
			t.Errorf("node %s ended %q, want converged", n.Node, n.Ended)
		}
	}
}

// An agent whose plan is another node's, or another role's, is refused:
// the node does not start and the fleet holds; `fleet next` goes on
// without it, and the fleet ends once the others have (it used to wait for
// the node passed over for ever).
func TestFleetRefusesAForeignPlan(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(workflows.NodeMigration, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	env.OnActivity(nodeActs.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		if in.Node == "m1" {
			return &config.Plan{Node: "m1", Role: "control"}, nil
		}
		role := "member"
		if in.Node == "c1" {
			role = "control"
		}
		return &config.Plan{Node: in.Node, Role: role}, nil
	})
	env.OnWorkflow(workflows.NodeWorkflow, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in workflows.Input) (*workflows.State, error) {
		return &workflows.State{Node: in.Plan.Node, Phase: workflows.PhaseReleased}, nil
	})
	var held FleetState
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryFleet)
		_ = v.Get(&held)
		env.SignalWorkflow(SignalFleetNext, nil)
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	if !strings.Contains(held.Held, `its agent's plan is node "m1" with role "control"`) {
		t.Errorf("held = %q", held.Held)
	}
	st := fleetResult(t, env)
	if m1 := st.Nodes[1]; !m1.PassedOver || !strings.HasPrefix(m1.Shown(), "not started: ") || !strings.HasSuffix(m1.Shown(), "(passed over)") {
		t.Errorf("m1 = %+v, shown %q: want not started, passed over", m1, m1.Shown())
	}
	if st.Nodes[2].Ended != string(workflows.PhaseReleased) || st.Held != "" {
		t.Errorf("m2 ended %q, held %q: want m2 released and nothing held", st.Nodes[2].Ended, st.Held)
	}
}

// fleetResult is the fleet's end state; it fails the test if the fleet
// did not end by itself.
func fleetResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) FleetState {
	t.Helper()
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st FleetState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func queryFleet(t *testing.T, env *testsuite.TestWorkflowEnvironment) FleetState {
	t.Helper()
	var st FleetState
	v, err := env.QueryWorkflow(QueryFleet)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		t.Error(err)
	}
	return st
}

// `fleet next` past a failed node that is not the last: status stops
// naming it, the fleet goes on, and `fleet retry` can still start it; the
// retried node counts again.
func TestFleetNextPassesOverAndRetryStillWorks(t *testing.T) {
	var plans []string
	env := newSlowFleetEnv(t, map[string]bool{"m1": true}, map[string]time.Duration{"m2": 10 * time.Minute}, &plans)
	var held, passed FleetState
	env.RegisterDelayedCallback(func() { held = queryFleet(t, env); env.SignalWorkflow(SignalFleetNext, nil) }, time.Minute)
	env.RegisterDelayedCallback(func() { passed = queryFleet(t, env); env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"}) }, 2*time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	st := fleetResult(t, env)

	if !strings.Contains(held.Held, "node m1 failed: boom") {
		t.Errorf("held before next = %q", held.Held)
	}
	if passed.Held != "" || !passed.Nodes[1].PassedOver || passed.Next != 3 || passed.Grants != 0 {
		t.Errorf("after next: held %q, m1 %+v, next %d, grants %d: want nothing held, m1 passed over, m2 started on the grant",
			passed.Held, passed.Nodes[1], passed.Next, passed.Grants)
	}
	for _, n := range st.Nodes {
		if n.Ended != string(workflows.PhaseConverged) || n.PassedOver {
			t.Errorf("node %s ended %q (passed over %v), want converged", n.Node, n.Ended, n.PassedOver)
		}
	}
}

// `fleet next` when the last node failed: there is no node to start, so
// the fleet ends without it.
func TestFleetNextAtTheEnd(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, map[string]bool{"m2": true}, &plans)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFleetNext, nil) }, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	st := fleetResult(t, env)
	if !st.Nodes[2].PassedOver || st.Nodes[2].Ended != "failed: boom" || st.Grants != 0 {
		t.Errorf("m2 = %+v, grants %d: want failed, passed over, no grant", st.Nodes[2], st.Grants)
	}
}

// A `fleet next` with no node left to start and none holding the fleet is
// dropped, and said, not kept as a grant that could never be spent.
func TestFleetNextDroppedWhenNothingToStart(t *testing.T) {
	var plans []string
	env := newSlowFleetEnv(t, nil, map[string]time.Duration{"m2": 10 * time.Minute}, &plans)
	var during FleetState
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFleetNext, nil) }, time.Minute)
	env.RegisterDelayedCallback(func() { during = queryFleet(t, env) }, 2*time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	st := fleetResult(t, env)
	if during.Grants != 0 || st.Grants != 0 {
		t.Errorf("grants = %d during, %d at the end: want 0", during.Grants, st.Grants)
	}
	var dropped bool
	for _, e := range during.Events {
		dropped = dropped || strings.Contains(e, "next dropped: no node is left to start")
	}
	if !dropped {
		t.Errorf("no event says the next was dropped: %v", during.Events)
	}
}

// A fleet run from before changeFleetPassOver keeps the node holding (its
// history replays): next is a grant, and the fleet does not end.
func TestFleetNextBeforePassOver(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, map[string]bool{"m2": true}, &plans)
	env.OnGetVersion(changeFleetPassOver, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalFleetNext, nil) }, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	if env.IsWorkflowCompleted() && env.GetWorkflowError() == nil {
		t.Fatal("the fleet ended with m2 holding it")
	}
}

// Continue-as-new carries names and progress, never plans, even for a
// fleet started the old way with every plan inline; the members once, in
// the state.
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
	if len(next.Nodes) != 0 || len(next.Members) != 0 || next.Resume == nil || next.Resume.Runs != 1 || len(next.members()) != 2 {
		t.Fatalf("carried input: %+v", next)
	}
}

// A node whose agent does not answer: the read of its plan is bounded (it
// had no bound, and the fleet's main loop, with `fleet next` and `fleet
// retry`, waited on it for as long as the agent was down); once it times
// out the node is not started, status says why and what to do, and `fleet
// retry` reads it again once the agent is back.
func TestFleetPlanReadBounded(t *testing.T) {
	var plans []string
	down := map[string]bool{"m1": true}
	env := fleetEnv(nil, nil, func(ctx context.Context, in activities.PlanInput) (*config.Plan, error) {
		plans = append(plans, in.Node)
		if down[in.Node] {
			delete(down, in.Node)
			// What the server answers once the bound has passed with no
			// agent polling the node's queue; unbounded, it never answers.
			if b := activity.GetInfo(ctx).ScheduleToCloseTimeout; b <= 0 || b > 5*time.Minute {
				t.Errorf("the read of %s's plan is bounded by %s: with its agent down the fleet waits that long", in.Node, b)
			}
			return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)
		}
		return memberPlan(in.Node), nil
	})
	var held FleetState
	env.RegisterDelayedCallback(func() {
		held = queryFleet(t, env)
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	st := fleetResult(t, env)

	for _, want := range []string{"node m1 not started: its agent did not answer within 2m0s (is adopt-worker running on m1?)", "adopt fleet retry m1"} {
		if !strings.Contains(held.Held, want) {
			t.Errorf("held = %q, want %q", held.Held, want)
		}
	}
	if held.Nodes[2].Started {
		t.Errorf("m2 started while m1 was not: %+v", held.Nodes)
	}
	if got := strings.Join(plans, ","); got != "c1,m1,m1,m2" {
		t.Errorf("plans read for %s, want c1,m1,m1,m2", got)
	}
	for _, n := range st.Nodes {
		if n.Ended != string(workflows.PhaseConverged) {
			t.Errorf("node %s ended %q, want converged", n.Node, n.Ended)
		}
	}
}
