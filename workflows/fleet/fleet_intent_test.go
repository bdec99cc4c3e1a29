package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
)

// The fleet's one intent starts each node; a retried node starts under
// the retry's own intent, once; the nodes after it under the fleet's.
func TestFleetStartsEachNodeUnderItsIntent(t *testing.T) {
	fleetIntent := &intent.Signed{Payload: []byte("fleet"), Signature: []byte("s1")}
	retryIntent := &intent.Signed{Payload: []byte("fleet-retry m1"), Signature: []byte("s2")}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(workflows.NodeMigration, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	env.OnActivity(nodeActs.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		return memberPlan(in.Node), nil
	})
	var started []string
	failed := false
	env.OnWorkflow(workflows.NodeWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.Input) (*workflows.State, error) {
		who := "none" // the child's input went through JSON: told by payload
		if in.Intent != nil {
			who = string(in.Intent.Payload)
		}
		started = append(started, in.Plan.Node+":"+who)
		if in.Plan.Node == "m1" && !failed {
			failed = true
			return nil, temporal.NewNonRetryableApplicationError("boom", "Boom", nil)
		}
		return &workflows.State{Node: in.Plan.Node, Phase: workflows.PhaseConverged, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}, nil
	})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1", Intent: retryIntent})
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers(), Intent: fleetIntent})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if got, want := strings.Join(started, ","), "c1:fleet,m1:fleet,m1:fleet-retry m1,m2:fleet"; got != want {
		t.Errorf("children started under %s, want %s", got, want)
	}
}

// own is a stand-in signed intent told by its payload (the fleet never
// reads one, it only passes it on).
func own(what string) *intent.Signed {
	return &intent.Signed{Payload: []byte(what), Signature: []byte("sig " + what)}
}

// Intents signed per node: each node starts under its own and no other's;
// a retry's own replaces it once; a fleet next's replace the start's for
// the nodes not yet started. The node's plan is read under the same
// intent its workflow is started with (the node answers a fleet only
// under it).
func TestFleetStartsEachNodeUnderItsOwnIntent(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	env.RegisterWorkflowWithOptions(workflows.NodeMigration, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	var read []string
	env.OnActivity(nodeActs.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		who := "none"
		if in.Intent != nil {
			who = string(in.Intent.Payload)
		}
		read = append(read, in.Node+":"+who)
		return memberPlan(in.Node), nil
	})
	var started []string
	failed := false
	env.OnWorkflow(workflows.NodeWorkflow, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in workflows.Input) (*workflows.State, error) {
		who := "none"
		if in.Intent != nil {
			who = string(in.Intent.Payload)
		}
		started = append(started, in.Plan.Node+":"+who)
		if in.Plan.Node == "m1" && !failed {
			failed = true
			return nil, temporal.NewNonRetryableApplicationError("boom", "Boom", nil)
		}
		if in.Plan.Node == "c1" {
			_ = workflow.Sleep(ctx, 2*time.Minute) // the next below comes while c1 runs
		}
		return &workflows.State{Node: in.Plan.Node, Phase: workflows.PhaseConverged, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}, nil
	})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1", Intents: map[string]*intent.Signed{"m1": own("retry m1")}})
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		(&wavesEnv{env: env}).update(t, UpdateFleetNext, "next1", FleetRequest{Intents: map[string]*intent.Signed{"c1": own("next c1"), "m1": own("next m1"), "m2": own("next m2")}}, nil, nil)
	}, time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers(),
		Intents: map[string]*intent.Signed{"c1": own("start c1"), "m1": own("start m1"), "m2": own("start m2")}})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if got, want := strings.Join(started, ","), "c1:start c1,m1:next m1,m1:retry m1,m2:next m2"; got != want {
		t.Errorf("children started under %s, want %s", got, want)
	}
	if got, want := strings.Join(read, ","), "c1:start c1,m1:next m1,m1:retry m1,m2:next m2"; got != want {
		t.Errorf("plans read under %s, want %s", got, want)
	}
}

// A fleet migrate signed per node sends each node its own intent and no
// other's (the targets' only are kept, each dropped once its node has
// answered, and none is shown by the query); one signed once for every
// node (an older CLI's) is sent to each as it is.
func TestFleetOpSendsEachNodeItsOwnIntent(t *testing.T) {
	for _, perNode := range []bool{true, false} {
		o, in := newOpsEnv(t, &config.Waves{Sizes: []int{1, 2}, Budgets: []int{0, 1}}, false, nil)
		req := FleetRequest{Module: "web", Nodes: []string{"c1", "m1", "m2"}}
		if perNode {
			req.Intents = map[string]*intent.Signed{"c1": own("c1"), "m1": own("m1"), "m2": own("m2"), "m3": own("m3")}
		} else {
			req.Intent = own("every node")
		}
		o.update(t, time.Second, UpdateFleetMigrate, "op1", req, nil, nil)
		var shown FleetState
		var kept []string
		o.env.RegisterDelayedCallback(func() { // wave 0 served, wave 1 under way
			shown = queryFleet(t, o.env)
		}, 15*time.Minute)
		o.env.ExecuteWorkflow(Fleet, in)
		st := fleetResult(t, o.env)
		for _, node := range []string{"c1", "m1", "m2"} {
			want := "every node"
			if perNode {
				want = node
			}
			if r, ok := o.reqs[node]; !ok || r.Intent == nil || string(r.Intent.Payload) != want {
				t.Errorf("per node %v: node %s was sent %+v, want the intent %q", perNode, node, r.Intent, want)
			}
		}
		if shown.Op == nil || shown.Op.Intent != nil || shown.Op.Intents != nil {
			t.Errorf("per node %v: the query shows the op's intents: %+v", perNode, shown.Op)
		}
		for node := range st.Op.Intents {
			kept = append(kept, node)
		}
		if len(kept) > 0 {
			t.Errorf("per node %v: the op still holds intents for %v once every node answered", perNode, kept)
		}
	}
}
