package scale

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"adoption/workflows"
)

// The floor waits for the flip Update, then runs the node's activity on the
// node's queue and the orchestrator's on its own, in that order, and ends.
func TestFlipFloorShape(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var ran []string
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		ran = append(ran, floorNodeAct+"@"+activity.GetInfo(ctx).TaskQueue)
		return nil
	}, activity.RegisterOptions{Name: floorNodeAct})
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		ran = append(ran, floorOrchAct+"@"+activity.GetInfo(ctx).TaskQueue)
		return nil
	}, activity.RegisterOptions{Name: floorOrchAct})
	env.RegisterDelayedCallback(func() {
		if len(ran) != 0 {
			t.Errorf("activities ran before the Update: %v", ran)
		}
		env.UpdateWorkflow(workflows.UpdateFlip, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("update rejected: %v", err) },
		})
	}, time.Minute)
	env.ExecuteWorkflow(flipFloor, "sim00001")
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []string{floorNodeAct + "@" + workflows.NodeQueue("sim00001"), floorOrchAct + "@" + floorQueue}
	if len(ran) != 2 || ran[0] != want[0] || ran[1] != want[1] {
		t.Errorf("ran %v, want %v", ran, want)
	}
}
