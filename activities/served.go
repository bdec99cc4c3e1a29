package activities

// This file ties the activities to package caller: which workflow the
// agent serves (checked in authorize, recorded at a verified start,
// cleared by a release), and who may read the plan.

import (
	"context"

	"adoption/activities/authority"
	"adoption/activities/caller"
	"adoption/nodestate"
)

// ErrWrongWorkflow: the request comes from a workflow the node does not
// serve (package caller).
const ErrWrongWorkflow = caller.ErrWrongWorkflow

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

func (a *Activities) checkPlanReader(ctx context.Context, auth *authority.Authority) error {
	if err := a.served().CheckPlanReader(ctx, auth.Fleet, auth.Source); err != nil {
		heartbeat(ctx, "refused: plan asked by another workflow")
		return err
	}
	return nil
}
