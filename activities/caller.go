package activities

// This file holds whom the agent serves. The first verified start of an
// adoption records the calling workflow (namespace and ID) under
// state_dir; from then on the agent serves that workflow only (every
// activity checks it in authorize, before anything else), until a release
// clears the record. A workflow keeps its ID across continue-as-new, so a
// new run of it is still served. The read-only Plan answers the recorded
// workflow, or the fleet the node's own file names (authority.fleet).

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/nodestate"
)

// ErrWrongWorkflow is the error type of a request from a workflow the node
// does not serve. Never retried: nothing was changed, and the caller will
// not become the node's workflow by retrying.
const ErrWrongWorkflow = "WrongWorkflow"

// Caller is the workflow an activity task comes from.
type Caller struct {
	Namespace string
	Workflow  string
}

func (c Caller) String() string { return fmt.Sprintf("%s (namespace %s)", c.Workflow, c.Namespace) }

// callerKey carries the calling workflow outside an activity (tests).
type callerKey struct{}

// WithWorkflow is ctx as if called by workflow id (outside an activity),
// in namespace "default".
func WithWorkflow(ctx context.Context, id string) context.Context {
	return WithCaller(ctx, Caller{Namespace: "default", Workflow: id})
}

// WithCaller is ctx as if called by c (outside an activity).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is the workflow that scheduled the activity; outside an
// activity, the one WithCaller names (none: the zero Caller).
func callerOf(ctx context.Context) Caller {
	c, _ := remoteCaller(ctx)
	return c
}

// remoteCaller is callerOf, and whether the request came through Temporal
// at all: outside an activity, with no WithCaller, it is the agent's own
// process on the node (adopt-worker probe, brief), run by root there, whom
// the workflow record does not concern.
func remoteCaller(ctx context.Context) (Caller, bool) {
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		return Caller{Namespace: info.WorkflowNamespace, Workflow: info.WorkflowExecution.ID}, true
	}
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

func callingWorkflow(ctx context.Context) string { return callerOf(ctx).Workflow }

// owner is the workflow the node serves: its owner record, or, on a node
// adopted before owner records existed, the workflow its adopted marker
// names (in any namespace). ok is false when the node serves no workflow
// yet.
func (a *Activities) owner() (nodestate.Owner, bool, error) {
	if a.State == nil {
		return nodestate.Owner{}, false, nil
	}
	o, ok, err := a.State.Owner()
	if err != nil || ok {
		return o, ok, err
	}
	m, adopted, err := a.State.Adopted()
	if err != nil || !adopted || m.Workflow == "" {
		return nodestate.Owner{}, false, err
	}
	return nodestate.Owner{Workflow: m.Workflow, At: m.AdoptedAt}, true, nil
}

// serves reports whether o is c: the same workflow ID, in the same
// namespace (any, for an owner taken from an older adopted marker).
func serves(o nodestate.Owner, c Caller) bool {
	return o.Workflow == c.Workflow && (o.Namespace == "" || o.Namespace == c.Namespace)
}

// checkCaller refuses a request from any workflow but the one the node
// serves; a node that serves none yet (never adopted, or released) takes
// requests from any, which its intents still gate.
func (a *Activities) checkCaller(ctx context.Context) error {
	o, ok, err := a.owner()
	if err != nil {
		return fmt.Errorf("read node %s's owner record: %w", a.Node, err)
	}
	if c, remote := remoteCaller(ctx); ok && remote && !serves(o, c) {
		heartbeat(ctx, "refused: not the node's workflow")
		return wrongWorkflow(a.Node, o, c, a.ownerFile())
	}
	return nil
}

func wrongWorkflow(node string, o nodestate.Owner, c Caller, file string) error {
	ns := o.Namespace
	if ns == "" {
		ns = "any"
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: node %s serves workflow %s (namespace %s), which adopted it at %s; this request comes from workflow %s; nothing was changed. "+
			"A node serves the workflow that adopted it until it is released (adopt release %s); to hand it to another workflow without one, remove %s as root on the node",
		node, o.Workflow, ns, o.At.Format(time.RFC3339), c, node, file), ErrWrongWorkflow, nil)
}

func (a *Activities) ownerFile() string {
	if d, ok := a.State.(*nodestate.Dir); ok {
		return d.OwnerFile()
	}
	return "workflow.json under node.state_dir"
}

// pin records the caller as the workflow the node serves, at a verified
// start of its adoption; a node already serving another is refused (two
// workflows racing to adopt it: the first one recorded won).
func (a *Activities) pin(ctx context.Context) error {
	c, remote := remoteCaller(ctx)
	if a.State == nil || !remote {
		return nil
	}
	o, err := a.State.SetOwner(nodestate.Owner{Namespace: c.Namespace, Workflow: c.Workflow, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("record the workflow node %s serves: %w", a.Node, err)
	}
	if !serves(o, c) {
		return wrongWorkflow(a.Node, o, c, a.ownerFile())
	}
	return nil
}

// checkPlanReader refuses Plan to any workflow but the node's own and the
// fleet its file names.
func (a *Activities) checkPlanReader(ctx context.Context, auth *Authority) error {
	c, remote := remoteCaller(ctx)
	if !remote || (auth.Fleet != "" && c.Workflow == config.FleetWorkflowID(auth.Fleet)) {
		return nil
	}
	o, ok, err := a.owner()
	if err != nil {
		return fmt.Errorf("read node %s's owner record: %w", a.Node, err)
	}
	if ok && serves(o, c) {
		return nil
	}
	fleet := "names no fleet (authority.fleet)"
	if auth.Fleet != "" {
		fleet = fmt.Sprintf("names fleet %q (authority.fleet), whose workflow is %s", auth.Fleet, config.FleetWorkflowID(auth.Fleet))
	}
	served := "serves no workflow yet"
	if ok {
		served = "serves workflow " + o.Workflow
	}
	heartbeat(ctx, "refused: plan asked by another workflow")
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: workflow %s asked for node %s's plan, but node %s %s and its file %s %s, so the plan is not given; nothing was changed. "+
			"To start the node in a fleet, set authority.fleet to the fleet's name in the node's own file",
		c, a.Node, a.Node, served, auth.Source, fleet), ErrWrongWorkflow, nil)
}
