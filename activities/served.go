package activities

// This file ties the activities to package caller: which workflow the
// agent serves (checked in authorize, recorded at a verified start,
// cleared by a release), and who may read the plan.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/caller"
	"adoption/intent"
	"adoption/nodestate"
)

// ErrWrongWorkflow: the request comes from a workflow the node does not
// serve (package caller).
const ErrWrongWorkflow = caller.ErrWrongWorkflow

// ErrOwnerUnknown: the node is adopted but its owner record is gone
// (package caller).
const ErrOwnerUnknown = caller.ErrOwnerUnknown

// WithWorkflow is ctx as if called by workflow id (outside an activity),
// in namespace "default".
func WithWorkflow(ctx context.Context, id string) context.Context {
	return caller.With(ctx, caller.Caller{Namespace: "default", Workflow: id})
}

func callingWorkflow(ctx context.Context) string {
	c, _ := caller.Of(ctx)
	return c.Workflow
}

// served is the node's side of package caller's decisions.
func (a *Activities) served() caller.Node {
	n := caller.Node{Name: a.Node, File: "workflow.json under node.state_dir"}
	if a.State != nil {
		n.Records = a.State
	}
	if d, ok := a.State.(*nodestate.Dir); ok {
		n.File = d.OwnerFile()
	}
	return n
}

func (a *Activities) checkCaller(ctx context.Context) error {
	if err := a.served().Check(ctx); err != nil {
		heartbeat(ctx, "refused: not the node's workflow")
		return err
	}
	return nil
}

func (a *Activities) pin(ctx context.Context) error { return a.served().Pin(ctx) }

// checkPlanReader lets the node's own workflow read its plan, and the
// fleet its file names when signed carries an operator's intent to start
// the node in a fleet (start, next, resume, retry): for this node, its own
// plan, unexpired. The nonce is not claimed here: the node's workflow the
// fleet starts presents the same intent to adopt the node.
func (a *Activities) checkPlanReader(ctx context.Context, auth *authority.Authority, signed *intent.Signed) error {
	fleetRun := func() error {
		if auth.Operators.Len() == 0 && auth.Unsigned {
			return nil
		}
		_, err := authority.Verify(a.Node, auth, signed, authority.FleetStartIntent(), time.Now())
		var r *intent.Refusal
		if errors.As(err, &r) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"refused: workflow %s asked for node %s's plan as fleet %s, without an operator's signed start of the fleet for this node: %v; nothing was changed. "+
					"The fleet reads a node's plan only with the intent adopt fleet start, next, resume or retry signed for the node",
				callingWorkflow(ctx), a.Node, auth.Fleet, err), ErrIntentRefused, nil, r.Reason)
		}
		return err
	}
	if err := a.served().CheckPlanReader(ctx, auth.Fleet, auth.Source, fleetRun); err != nil {
		heartbeat(ctx, "refused: plan asked by another workflow")
		return err
	}
	return nil
}
