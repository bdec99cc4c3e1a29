// `adopt fleet start`: the Fleet workflow started with every node of the
// fleet file, by name and role (each node's plan is read from its agent
// when the fleet starts it), signed for each node.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"adoption/activities/authority"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// fleetStartCommand is `adopt fleet start`; its options are the fleet's flags.
func (x *cli) fleetStartCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "start",
		Short:   "Start the fleet: each node's migration as a child, one after another",
		Example: `  adopt fleet start --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetStart(ctx, ff) },
	}
}

func (x *cli) fleetStart(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	// Names and roles only: each node's plan is read from its agent
	// when the fleet starts it.
	in := fleet.FleetInput{Name: f.Name, Waves: f.Waves, AskFirst: f.AskAfter}
	for _, c := range f.Configs {
		in.Members = append(in.Members, fleet.FleetMember{Node: c.Node.Name, Role: c.Node.Role})
	}
	if err := fleet.ValidateFleet(in); err != nil {
		return usagef("%v", err)
	}
	if in.Intents, err = x.fleetIntents(authority.ActFleet, f.Configs); err != nil {
		return err
	}
	if err := requestFits("fleet start", len(in.Intents), in); err != nil {
		return err
	}
	for _, m := range in.Members {
		d, err := x.c.DescribeWorkflow(ctx, workflows.WorkflowID(m.Node), "")
		if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return refused(fmt.Errorf("fleet %s: node %s already has a running workflow (%s): release or terminate it first, or leave the node out of the fleet file", f.Name, m.Node, workflows.WorkflowID(m.Node)), nil)
		}
	}
	run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fleet.FleetID(f.Name), TaskQueue: workflows.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            fmt.Sprintf("fleet %s: %s", f.Name, f.NodeNames()),
	}, fleet.FleetWorkflow, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return refused(fmt.Errorf("fleet %s is already running; see `adopt fleet status`", f.Name), nil)
	}
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, map[string]string{"fleet": f.Name, "workflow_id": fleet.FleetID(f.Name), "run_id": run.GetRunID()})
	}
	fmt.Fprintf(x.stdout, "started %s (run %s): nodes %s, the control node first\n", fleet.FleetID(f.Name), run.GetRunID(), f.NodeNames())
	return nil
}
