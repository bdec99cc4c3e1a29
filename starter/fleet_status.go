// `adopt fleet status`: every node of the fleet with its phase and
// modules, from the fleet's query while it runs, its result once it has
// completed.
package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"

	"adoption/workflows"
	"adoption/workflows/fleet"
)

// fleetStatusCommand is `adopt fleet status`; its options are the fleet's flags.
func (x *cli) fleetStatusCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "Every node of the fleet with its phase and modules",
		Example: `  adopt fleet status --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetStatus(ctx, ff) },
	}
}

func (x *cli) fleetStatus(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	st, err := x.fleetState(ctx, f.Name, ff.path, ff.timeout)
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, st)
	}
	if st.Frozen != "" {
		fmt.Fprintf(x.stdout, "NOTE: %s\n\n", st.Frozen)
	}
	if st.Held != "" {
		fmt.Fprintf(x.stdout, "HELD: %s\n\n", st.Held)
	}
	if st.Paused != "" {
		fmt.Fprintf(x.stdout, "PAUSED: %s; `adopt fleet resume` lets it go on\n\n", st.Paused)
	}
	for _, op := range st.Following {
		fmt.Fprintf(x.stdout, "%s: %s\n\n", strings.ToUpper(op.What()), op.Standing())
	}
	if st.Op != nil {
		fmt.Fprintf(x.stdout, "%s: %s\n\n", strings.ToUpper(st.Op.What()), st.Op.Standing())
	}
	tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	if st.Waves == nil {
		fmt.Fprintln(tw, "NODE\tROLE\tPHASE\tMODULES MIGRATED")
		for _, n := range st.Nodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", n.Node, n.Role, n.Shown(), n.Migrated, n.Modules)
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "WAVE\tNODE\tROLE\tPHASE\tMODULES MIGRATED")
	for i, n := range st.Nodes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\n", st.WaveOf(i), n.Node, n.Role, n.Shown(), n.Migrated, n.Modules)
	}
	return tw.Flush()
}

// fleetState asks the fleet's workflow, bounded by timeout: a query while
// it runs, its result once it has completed.
func (x *cli) fleetState(ctx context.Context, name, path string, timeout time.Duration) (*fleet.FleetState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := x.fleetRun(ctx, name, path)
	if err != nil {
		return nil, err
	}
	if !r.running {
		var st fleet.FleetState
		if err := x.c.GetWorkflow(ctx, fleet.FleetID(name), "").Get(ctx, &st); err != nil {
			return nil, fmt.Errorf("fleet %s ended (%s at %s): %w", name, r.status, x.zone().stamp(r.closed), err)
		}
		return &st, nil
	}
	return x.queryFleet(ctx, name, timeout)
}

// queryFleet asks the running fleet for its state, page by page (the
// fleet answers a page of nodes at a time: docs/fleet.md); ctx bounds it,
// timeout is named when it does not answer. The op's targets are the
// pages' together; its counts are the fleet's.
func (x *cli) queryFleet(ctx context.Context, name string, timeout time.Duration) (*fleet.FleetState, error) {
	var all *fleet.FleetState
	for {
		from := 0
		if all != nil {
			from = len(all.Nodes)
		}
		v, err := x.c.QueryWorkflow(ctx, fleet.FleetID(name), "", fleet.QueryFleet, fleet.FleetPage{From: from})
		if err != nil {
			if ctx.Err() != nil {
				wq := x.queueHealth(context.WithoutCancel(ctx), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
				return nil, fmt.Errorf("fleet %s did not answer within %s: %s", name, timeout, wq.describe("worker", x.zone()))
			}
			return nil, fmt.Errorf("fleet %s: %w", name, err)
		}
		var st fleet.FleetState
		if err := v.Get(&st); err != nil {
			return nil, err
		}
		if all == nil {
			all = &st
		} else {
			all.Nodes = append(all.Nodes, st.Nodes...)
			if all.Op != nil && st.Op != nil {
				all.Op.Nodes = append(all.Op.Nodes, st.Op.Nodes...)
			}
			for i, op := range all.Following {
				if i < len(st.Following) {
					op.Nodes = append(op.Nodes, st.Following[i].Nodes...)
				}
			}
		}
		// An older fleet answers every node at once (no total); a page
		// that brings none ends it too.
		if len(all.Nodes) >= st.NodesTotal || len(st.Nodes) == 0 {
			all.NodesFrom, all.NodesTotal = 0, 0
			return all, nil
		}
	}
}
