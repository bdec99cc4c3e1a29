// The orchestrator's replay check before --make-current (replaycheck)
// against a real dev server: an open node workflow, encrypted, replays on
// this build's registrations and fails on a workflow of the same type name
// whose command sequence differs.
package tests

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/codec"
	"adoption/config"
	"adoption/replaycheck"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

func TestReplayCheckOpenWorkflow(t *testing.T) {
	needE2E(t)
	keyFile := writeCodecKey(t, 0x5a)
	t.Setenv("ADOPT_TEMPORAL_CODEC_KEY_FILE", keyFile) // the orchestrator encrypts
	srv := startDevServer(t)
	secret, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	dc := codec.DataConverter(cd)
	fc := codec.FailureConverter(dc)
	c, err := client.Dial(client.Options{HostPort: srv.Addr(), DataConverter: dc, FailureConverter: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// A node with no agent: its workflow runs its first tasks on the
	// orchestrator and stays open, waiting on the node's activity.
	const node = "replayck"
	id := workflows.WorkflowID(node)
	plan := config.Plan{Node: node, Role: "member", Modules: []config.ModulePlan{{Name: "web", Ports: config.MustPorts([]string{"80/tcp"})}}}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrNode.ValueSet(node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	}, workflows.NodeWorkflow, workflows.Input{Plan: plan}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the node workflow schedules an activity", func() bool {
		return historyTypes(t, c, id)[enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED] > 0
	})

	check := func(register func(workflows.Registry), withCodec bool) replaycheck.Report {
		t.Helper()
		h := replaycheck.Histories{C: c, Register: register}
		if withCodec {
			h.DataConverter, h.FailureConverter = dc, fc
		}
		var rep replaycheck.Report
		waitUntil(t, "visibility lists the open workflow", func() bool {
			var err error
			if rep, err = replaycheck.Check(ctx, replaycheck.Visibility{C: c, Namespace: "default"}, h, 4); err != nil {
				t.Fatal(err)
			}
			return rep.Open > 0
		})
		return rep
	}

	// This build's own registrations replay it.
	rep := check(fleet.Register, true)
	if rep.Open != 1 || rep.Replayed != 1 || len(rep.Failures) != 0 || rep.Err() != nil {
		t.Fatalf("this build's registrations: %+v (%v), want 1 open, 1 replayed", rep, rep.Err())
	}
	t.Logf("replayed %d open workflow in %v", rep.Replayed, rep.Took)

	// A NodeMigration whose first command is a timer: the history's
	// commands differ, the check names the workflow.
	changed := func(r workflows.Registry) {
		r.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ workflows.Input) error {
			return workflow.Sleep(ctx, time.Hour)
		}, workflow.RegisterOptions{Name: workflows.NodeWorkflow, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	}
	rep = check(changed, true)
	if rep.Open != 1 || len(rep.Failures) != 1 || rep.Failures[0].Run.WorkflowID != id {
		t.Fatalf("a changed command sequence: %+v, want one failure naming %s", rep, id)
	}
	if e := rep.Err(); e == nil || !strings.Contains(e.Error(), id) {
		t.Fatalf("Err() = %v, want it to name %s", e, id)
	}
	t.Logf("changed code: %v", rep.Failures[0].Err)

	// Without the codec the encrypted input does not decode: the check
	// replays through the converters it is given.
	rep = check(fleet.Register, false)
	if len(rep.Failures) != 1 {
		t.Fatalf("without the codec: %+v, want the encrypted history to fail", rep)
	}

	// Closed meanwhile: skipped, not a failure.
	if err := c.TerminateWorkflow(ctx, id, "", "replay check test"); err != nil {
		t.Fatal(err)
	}
	h := replaycheck.Histories{C: c, Register: fleet.Register, DataConverter: dc, FailureConverter: fc}
	runID := ""
	if d, err := c.DescribeWorkflow(ctx, id, ""); err == nil {
		runID = d.WorkflowExecution.RunID
	}
	if err := h.Replay(ctx, replaycheck.Run{WorkflowID: id, RunID: runID, Type: workflows.NodeWorkflow}); !errors.Is(err, replaycheck.ErrClosed) {
		t.Fatalf("replay of a terminated run: %v, want ErrClosed", err)
	}
}
