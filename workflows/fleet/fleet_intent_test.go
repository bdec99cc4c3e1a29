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
