package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"adoption/config"
	"adoption/workflows"
)

// fleetCommand is `adopt fleet start|next|retry|status`.
func (x *cli) fleetCommand(ctx context.Context) *cobra.Command {
	var fleetPath string
	var timeout time.Duration
	fc := &cobra.Command{Use: "fleet", Short: "Adopt every node of a fleet in order, the control node first",
		Example: `  adopt fleet start --fleet fleet.yaml
  adopt fleet status --fleet fleet.yaml --json`}
	fc.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "how long the fleet's workflow may take to answer")
	fc.PersistentFlags().StringVar(&fleetPath, "fleet", "fleet.yaml", "fleet file: temporal settings, a name, and the node configuration files in order")
	load := func() (*config.Fleet, error) {
		f, err := config.LoadFleet(fleetPath)
		if err != nil {
			return nil, err
		}
		if err := x.dialWith(&f.Temporal, "temporal.* of "+fleetPath); err != nil {
			return nil, err
		}
		return f, nil
	}
	start := &cobra.Command{
		Use:     "start",
		Short:   "Start the fleet: each node's migration as a child, one after another",
		Example: `  adopt fleet start --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			// Names and roles only: each node's plan is read from its agent
			// when the fleet starts it.
			in := workflows.FleetInput{Name: f.Name}
			for _, c := range f.Configs {
				in.Members = append(in.Members, workflows.FleetMember{Node: c.Node.Name, Role: c.Node.Role})
			}
			if err := workflows.ValidateFleet(in); err != nil {
				return usagef("%v", err)
			}
			for _, m := range in.Members {
				d, err := x.c.DescribeWorkflow(ctx, workflows.WorkflowID(m.Node), "")
				if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					return refused(fmt.Errorf("fleet %s: node %s already has a running workflow (%s): release or terminate it first, or leave the node out of the fleet file", f.Name, m.Node, workflows.WorkflowID(m.Node)), nil)
				}
			}
			run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: workflows.FleetID(f.Name), TaskQueue: workflows.TaskQueue,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				StaticSummary:                            fmt.Sprintf("fleet %s: %s", f.Name, f.NodeNames()),
			}, workflows.FleetWorkflow, in)
			var already *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &already) {
				return refused(fmt.Errorf("fleet %s is already running; see `adopt fleet status`", f.Name), nil)
			}
			if err != nil {
				return err
			}
			if x.asJSON {
				return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "workflow_id": workflows.FleetID(f.Name), "run_id": run.GetRunID()})
			}
			fmt.Fprintf(x.stdout, "started %s (run %s): nodes %s, the control node first\n", workflows.FleetID(f.Name), run.GetRunID(), f.NodeNames())
			return nil
		},
	}
	next := &cobra.Command{
		Use:     "next",
		Short:   "Start the next node now, before the current one has migrated every module",
		Example: `  adopt fleet next --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := x.c.SignalWorkflow(sctx, workflows.FleetID(f.Name), "", workflows.SignalFleetNext, nil); err != nil {
				var nf *serviceerror.NotFound
				if errors.As(err, &nf) {
					return fmt.Errorf("fleet %s is not running (not started, or finished): `adopt fleet start --fleet %s` starts it", f.Name, fleetPath)
				}
				return fmt.Errorf("fleet %s: %w", f.Name, err)
			}
			if x.asJSON {
				return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": workflows.SignalFleetNext})
			}
			fmt.Fprintf(x.stdout, "fleet %s: the next node starts now\n", f.Name)
			return nil
		},
	}
	retry := &cobra.Command{
		Use:     "retry NODE",
		Short:   "Start a node again whose workflow failed, was terminated or could not start (its plan read afresh)",
		Example: `  adopt fleet retry n2 --fleet fleet.yaml`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := x.c.SignalWorkflow(sctx, workflows.FleetID(f.Name), "", workflows.SignalFleetRetry, workflows.FleetRetry{Node: a[0]}); err != nil {
				var nf *serviceerror.NotFound
				if errors.As(err, &nf) {
					return fmt.Errorf("fleet %s is not running (not started, or finished): `adopt fleet start --fleet %s` starts it", f.Name, fleetPath)
				}
				return fmt.Errorf("fleet %s: %w", f.Name, err)
			}
			if x.asJSON {
				return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": workflows.SignalFleetRetry, "node": a[0]})
			}
			fmt.Fprintf(x.stdout, "fleet %s: retry of node %s asked (see adopt fleet status)\n", f.Name, a[0])
			return nil
		},
	}
	status := &cobra.Command{
		Use:     "status",
		Short:   "Every node of the fleet with its phase and modules",
		Example: `  adopt fleet status --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			st, err := x.fleetState(ctx, f.Name, fleetPath, timeout)
			if err != nil {
				return err
			}
			if x.asJSON {
				return writeJSON(x.stdout, st)
			}
			if st.Frozen != "" {
				fmt.Fprintf(x.stdout, "NOTE: %s\n\n", st.Frozen)
			}
			if st.Held != "" {
				fmt.Fprintf(x.stdout, "HELD: %s\n\n", st.Held)
			}
			tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tROLE\tPHASE\tMODULES MIGRATED")
			for _, n := range st.Nodes {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", n.Node, n.Role, n.Shown(), n.Migrated, n.Modules)
			}
			return tw.Flush()
		},
	}
	fc.AddCommand(start, next, retry, status)
	return fc
}

// fleetState asks the fleet's workflow, bounded by timeout: a query while
// it runs, its result once it has completed.
func (x *cli) fleetState(ctx context.Context, name, path string, timeout time.Duration) (*workflows.FleetState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := workflows.FleetID(name)
	d, err := x.c.DescribeWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("fleet %s not started: `adopt fleet start --fleet %s` starts it", name, path)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet %s: %w", name, err)
	}
	var st workflows.FleetState
	if r := runFrom(d.RawResponse.GetWorkflowExecutionInfo()); !r.running {
		if err := x.c.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil {
			return nil, fmt.Errorf("fleet %s ended (%s at %s): %w", name, r.status, r.closed.Local().Format(time.DateTime), err)
		}
		return &st, nil
	}
	v, err := x.c.QueryWorkflow(ctx, id, "", workflows.QueryFleet)
	if err != nil {
		if ctx.Err() != nil {
			wq := x.queueHealth(context.WithoutCancel(ctx), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
			return nil, fmt.Errorf("fleet %s did not answer within %s: %s", name, timeout, wq.describe("worker"))
		}
		return nil, fmt.Errorf("fleet %s: %w", name, err)
	}
	return &st, v.Get(&st)
}
