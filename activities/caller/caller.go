// Package caller decides which workflow a node's agent serves. The first
// verified start of an adoption records the calling workflow (namespace
// and ID) under state_dir (Pin); from then on the agent serves that
// workflow only (Check, before anything else), until a release clears the
// record. A workflow keeps its ID across continue-as-new, so a new run of
// it is still served. An adopted node whose record is gone serves no
// workflow at all until root on the node records one (adopt-worker own).
// The read-only plan is given to the recorded workflow, or the fleet the
// node's own file names (CheckPlanReader).
package caller

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

// ErrOwnerUnknown is the error type of any request to an adopted node
// whose owner record is gone: it cannot tell its workflow from another, so
// it serves none. Never retried: root on the node must record the owner.
const ErrOwnerUnknown = "OwnerUnknown"

// Caller is the workflow an activity task comes from.
type Caller struct {
	Namespace string
	Workflow  string
}

func (c Caller) String() string { return fmt.Sprintf("%s (namespace %s)", c.Workflow, c.Namespace) }

// key carries the calling workflow outside an activity (tests).
type key struct{}

// With is ctx as if called by c (outside an activity).
func With(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, key{}, c)
}

// Of is the workflow that scheduled the activity, and whether the request
// came through Temporal at all: outside an activity, with no With, it is
// the agent's own process on the node (adopt-worker probe, brief), run by
// root there, whom the workflow record does not concern.
func Of(ctx context.Context) (Caller, bool) {
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		return Caller{Namespace: info.Namespace, Workflow: info.WorkflowExecution.ID}, true
	}
	c, ok := ctx.Value(key{}).(Caller)
	return c, ok
}

// Records are the node's records the decision reads (nodestate.Dir).
type Records interface {
	Owner() (nodestate.Owner, bool, error)
	SetOwner(nodestate.Owner) (nodestate.Owner, error)
	Adopted() (nodestate.Marker, bool, error)
}

// Node is one node's side of the decision: its name, its records (nil:
// none kept, every caller served) and the owner record's path for
// messages.
type Node struct {
	Name    string
	Records Records
	File    string
}

// ownership is what the node's records say about the workflow it serves.
type ownership int

const (
	servesNone    ownership = iota // never adopted, or released: any may start it
	servesOwner                    // the owner record names it
	servesUnknown                  // adopted, but the owner record is gone
)

// owner is the workflow the node serves, from its owner record. An adopted
// node without one serves no workflow: the adopted marker's workflow is
// never taken for the owner (it was the request's word on older agents).
func (n Node) owner() (nodestate.Owner, ownership, error) {
	if n.Records == nil {
		return nodestate.Owner{}, servesNone, nil
	}
	o, ok, err := n.Records.Owner()
	if err != nil || ok {
		return o, servesOwner, err
	}
	m, adopted, err := n.Records.Adopted()
	if err != nil {
		return nodestate.Owner{}, servesNone, err
	}
	if adopted {
		return nodestate.Owner{Workflow: m.Workflow, At: m.AdoptedAt}, servesUnknown, nil
	}
	return nodestate.Owner{}, servesNone, nil
}

// serves reports whether o is c: the same workflow ID, in the same
// namespace.
func serves(o nodestate.Owner, c Caller) bool {
	return o.Workflow == c.Workflow && o.Namespace == c.Namespace
}

// Check refuses a request from any workflow but the one the node serves;
// a node that serves none yet (never adopted, or released) takes requests
// from any, which its intents still gate. An adopted node whose owner
// record is gone refuses every workflow (unknown).
func (n Node) Check(ctx context.Context) error {
	o, state, err := n.owner()
	if err != nil {
		return fmt.Errorf("read node %s's owner record: %w", n.Name, err)
	}
	c, remote := Of(ctx)
	switch {
	case !remote || state == servesNone:
		return nil
	case state == servesUnknown:
		return n.unknown(o, c)
	case !serves(o, c):
		return n.wrong(o, c)
	}
	return nil
}

// unknown is the refusal of an adopted node that cannot name its owner,
// with what root on the node does to name it.
func (n Node) unknown(m nodestate.Owner, c Caller) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: node %s is adopted (since %s) but its owner record %s is missing, so it cannot tell which workflow it serves and serves none; this request comes from workflow %s; nothing was changed. "+
			"Check which workflow should serve the node (adopt status %s; its adoption was recorded as %q), then, as root on the node: adopt-worker own --config FILE --workflow ID [--namespace NS]",
		n.Name, m.At.Format(time.RFC3339), n.File, c, n.Name, m.Workflow), ErrOwnerUnknown, nil)
}

func (n Node) wrong(o nodestate.Owner, c Caller) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: node %s serves workflow %s (namespace %s), which adopted it at %s; this request comes from workflow %s; nothing was changed. "+
			"A node serves the workflow that adopted it until it is released (adopt release %s); to hand it to another workflow without one, as root on the node remove %s, then: adopt-worker own --config FILE --workflow ID",
		n.Name, o.Workflow, o.Namespace, o.At.Format(time.RFC3339), c, n.Name, n.File), ErrWrongWorkflow, nil)
}

// Pin records the caller as the workflow the node serves, at a verified
// start of its adoption; a node already serving another is refused (two
// workflows racing to adopt it: the first one recorded won).
func (n Node) Pin(ctx context.Context) error {
	c, remote := Of(ctx)
	if n.Records == nil || !remote {
		return nil
	}
	if m, state, err := n.owner(); err != nil || state == servesUnknown {
		if err != nil {
			return fmt.Errorf("read node %s's owner record: %w", n.Name, err)
		}
		return n.unknown(m, c)
	}
	o, err := n.Records.SetOwner(nodestate.Owner{Namespace: c.Namespace, Workflow: c.Workflow, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("record the workflow node %s serves: %w", n.Name, err)
	}
	if !serves(o, c) {
		return n.wrong(o, c)
	}
	return nil
}

// CheckPlanReader refuses the plan to any workflow but the node's own and
// the fleet its file (source) names (fleet: authority.fleet), and to that
// fleet unless fleetRun, the check that an operator signed its run for
// this node, passes: anyone can start a workflow under the fleet's ID
// while the fleet does not run.
func (n Node) CheckPlanReader(ctx context.Context, fleet, source string, fleetRun func() error) error {
	c, remote := Of(ctx)
	if !remote {
		return nil
	}
	if fleet != "" && c.Workflow == config.FleetWorkflowID(fleet) {
		return fleetRun()
	}
	o, state, err := n.owner()
	if err != nil {
		return fmt.Errorf("read node %s's owner record: %w", n.Name, err)
	}
	if state == servesOwner && serves(o, c) {
		return nil
	}
	named := "names no fleet (authority.fleet)"
	if fleet != "" {
		named = fmt.Sprintf("names fleet %q (authority.fleet), whose workflow is %s", fleet, config.FleetWorkflowID(fleet))
	}
	served := "serves no workflow yet"
	switch state {
	case servesOwner:
		served = "serves workflow " + o.Workflow
	case servesUnknown:
		served = "is adopted but its owner record " + n.File + " is missing, so it serves no workflow"
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"refused: workflow %s asked for node %s's plan, but node %s %s and its file %s %s, so the plan is not given; nothing was changed. "+
			"To start the node in a fleet, set authority.fleet to the fleet's name in the node's own file",
		c, n.Name, n.Name, served, source, named), ErrWrongWorkflow, nil)
}
