// The rehearsal of a module's cutover: `adopt migrate NODE MODULE --dry-run`
// is an Update that runs the Rehearse activity on the node's queue at once
// (it is not queued behind migrations: it changes nothing) and answers with
// what the cutover would do. The Web UI shows it as an activity whose
// summary says "rehearsal"; the module's state does not move.
package workflows

import (
	"fmt"
	"time"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// UpdateRehearse rehearses a module's cutover.
const UpdateRehearse = "rehearse"

func (n *node) registerRehearse(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRehearse,
		func(ctx workflow.Context, in RequestInput) (*nodewire.Rehearsal, error) {
			// Short and bounded: the operator waits at the terminal, and a
			// rehearsal that cannot reach the node says so instead of
			// waiting for the agent.
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				TaskQueue:              NodeQueue(n.s.Node),
				ScheduleToStartTimeout: 20 * time.Second,
				StartToCloseTimeout:    2 * time.Minute,
				Summary:                fmt.Sprintf("rehearsal: migrate %s (dry run, changes nothing)", in.Module),
				RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
			})
			var r nodewire.Rehearsal
			err := workflow.ExecuteActivity(actx, a.Rehearse, nodewire.ModuleInput{
				Plan: n.s.Plan.Ref(), Module: in.Module, Decisions: n.decisionsFor(in.Module),
			}).Get(ctx, &r)
			if err != nil {
				return nil, fmt.Errorf("rehearsal of %s on node %s: %s", in.Module, n.s.Node, errorMessage(err))
			}
			n.event(ctx, fmt.Sprintf("rehearsed migrate %s: %d step(s), %d refusal(s)", in.Module, len(r.Steps), len(r.Refusals)))
			return &r, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
			if err := late(ctx, in); err != nil {
				return err
			}
			switch n.s.Phase {
			case PhaseAdopted, PhaseMigrating:
			default:
				return fmt.Errorf("node %s is %s: a rehearsal needs an adopted node", n.s.Node, n.s.Phase)
			}
			m := n.s.module(in.Module)
			if _, ok := n.s.Plan.Module(in.Module); !ok || m == nil {
				return fmt.Errorf("module %q is not in node %s's plan", in.Module, n.s.Node)
			}
			if m.State == ModuleMigrated {
				return fmt.Errorf("module %s is already migrated on node %s: there is no cutover left to rehearse", in.Module, n.s.Node)
			}
			return nil
		}},
	)
}
