package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"

	"adoption/workflows"
)

// waitCommand is `adopt wait NODE ...`: block until the node's state says
// so, for scripts and runbooks (a failure state ends the wait early).
func (x *cli) waitCommand(ctx context.Context) *cobra.Command {
	var phase, module, state, genesis string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "wait NODE",
		Short: "Wait until a node reaches a phase, a module a state, or genesis an outcome",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			if phase == "" && module == "" && genesis == "" {
				return fmt.Errorf("say what to wait for: --phase, --module with --state, or --genesis")
			}
			deadline := time.Now().Add(timeout)
			var last string
			for {
				st, err := x.state(ctx, node)
				if err == nil && !x.running(ctx, node) && st.Phase != workflows.PhaseConverged && st.Phase != workflows.PhaseReleased {
					// A run that ended short of its goal (terminated) is
					// not the one to wait on: a new one may be starting.
					err = fmt.Errorf("no running migration workflow for node %s", node)
				}
				if err == nil {
					ok, now := waitMet(st, phase, module, state, genesis)
					if ok {
						fmt.Fprintf(x.stdout, "node %s: %s\n", node, now)
						return nil
					}
					last = now
				} else {
					last = err.Error()
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("node %s: timed out after %s; last seen: %s", node, timeout, last)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(250 * time.Millisecond):
				}
			}
		},
	}
	c.Flags().StringVar(&phase, "phase", "", "wait for this phase (adopted, converged, ...)")
	c.Flags().StringVar(&module, "module", "", "the module whose state to wait for (with --state)")
	c.Flags().StringVar(&state, "state", "", "the module state to wait for (migrated, failed, ...)")
	c.Flags().StringVar(&genesis, "genesis", "", "wait for genesis to be done or failed")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up after this long")
	return c
}

// waitMet says whether the state meets every condition asked for, and
// describes what it is now.
func waitMet(st *workflows.State, phase, module, state, genesis string) (bool, string) {
	now := "phase " + string(st.Phase)
	ok := phase == "" || string(st.Phase) == phase
	if module != "" {
		ms := "absent"
		for _, m := range st.Modules {
			if m.Name == module {
				ms = m.State
			}
		}
		now += ", module " + module + " " + ms
		ok = ok && ms == state
	}
	if genesis != "" {
		now += ", genesis " + st.Genesis.State
		ok = ok && st.Genesis.State == genesis
	}
	return ok, now
}

// running says whether the node's latest run is still running.
func (x *cli) running(ctx context.Context, node string) bool {
	d, err := x.c.DescribeWorkflow(ctx, workflows.WorkflowID(node), "")
	return err == nil && d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}
