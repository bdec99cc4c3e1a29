// The operator's fleet requests, `adopt fleet next`, `adopt fleet retry
// NODE`, `adopt fleet pause` and `resume`: the Updates' validators and
// handlers, and the rules they and the signals of the same names share,
// decided from the fleet's state alone.
package fleet

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
)

// registerRequests sets the Update handlers of next and retry. A validator
// refuses what the fleet would turn away or what would change nothing; it
// does not run on replay, so it may grow without versioning.
func (f *fleet) registerRequests(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetNext,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			f.takeIntent(FleetRequest{Intent: in.Intent, Intents: in.Intents})
			node, passOver, _ := f.st.nextGrant()
			f.goOn(ctx)
			return FleetAnswer{Node: node, PassedOver: passOver}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			if _, _, why := f.st.nextGrant(); why != "" {
				return errors.New(why)
			}
			return nil
		}},
	); err != nil {
		return err
	}
	if err := f.registerPause(ctx); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetRetry,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			f.takeIntent(in)
			f.askRetry(ctx, in.Node)
			return FleetAnswer{Node: in.Node}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			return f.validateRetry(in.Node)
		}},
	)
}

// registerPause sets the Update handlers of pause and resume. A resume's
// intent, like next's, is the one the nodes started from then on adopt
// under; a pause changes no node and carries none.
func (f *fleet) registerPause(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetPause,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			f.st.Paused = "paused by the operator at " + workflow.Now(ctx).UTC().Format("15:04:05")
			f.note(ctx, "operator: pause: no node starts, and no wave of a fleet migrate or flip, until `adopt fleet resume`; the nodes started go on")
			return FleetAnswer{}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			if why := f.st.pauseRefusal(); why != "" {
				return errors.New(why)
			}
			return nil
		}},
	); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateFleetResume,
		func(ctx workflow.Context, in FleetRequest) (FleetAnswer, error) {
			f.takeIntent(FleetRequest{Intent: in.Intent, Intents: in.Intents})
			f.st.Paused = ""
			f.note(ctx, "operator: resume")
			next := ""
			if f.canStartNext() {
				next = f.st.Nodes[f.st.Next].Node
			}
			return FleetAnswer{Node: next}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in FleetRequest) error {
			if err := workflows.LateAfter(ctx, in.NotAfter); err != nil {
				return err
			}
			if why := f.st.resumeRefusal(); why != "" {
				return errors.New(why)
			}
			return nil
		}},
	)
}

// validateRetry is retryRefusal with what to do instead, and one more
// refusal only an Update can make at once: a node this run started whose
// end it has not seen is still running (its future would have said so).
// The signal path learns that only when the fleet tries the start.
func (f *fleet) validateRetry(node string) error {
	if why := f.st.retryRefusal(node); why != "" {
		hint := "see `adopt fleet status`"
		switch i := f.st.Index(node); {
		case i < 0:
			hint = "check the name: `adopt fleet status` lists the fleet's nodes"
		case !f.st.Nodes[i].Started:
			hint = "it starts in its turn; `adopt fleet next` lets the next node start now"
		case f.st.Nodes[i].Ended == string(workflows.PhaseReleased):
			hint = "a released node is as found; `adopt start " + node + " --config FILE` adopts it again, outside the fleet"
		case f.st.Nodes[i].Ended == string(workflows.PhaseConverged):
			hint = "it is done: nothing to retry"
		}
		return errors.New(why + "; " + hint)
	}
	if n := f.st.Nodes[f.st.Index(node)]; n.Ended == "" && f.gen[node] > 0 {
		return fmt.Errorf("its workflow (%s) is still running, phase %s: the fleet retries only a node whose workflow failed, was terminated or could not start; see `adopt status %s`", workflows.WorkflowID(node), n.Phase, node)
	}
	return nil
}

// retryRefusal is why the fleet in state st turns away a retry of node, or
// "" when it takes it, in askRetry's words. Only a node that holds the
// fleet (failed, terminated, could not start) is retried; a node started
// and not known to have ended is taken too, since it may have ended unseen
// (a fleet's later run has no future for it), and the retry is then refused
// at its start if the node's workflow still runs.
func (st *FleetState) retryRefusal(node string) string {
	i := st.Index(node)
	if i < 0 {
		return "not a node of this fleet"
	}
	n := st.Nodes[i]
	if !n.blocked() && (!n.Started || n.Ended != "") {
		return fmt.Sprintf("it has not failed (%s)", n.standing())
	}
	return ""
}

// nextGrant is what `adopt fleet next` would do in state st: the nodes
// that hold the fleet, which it passes over (the fleet goes on without
// them, goOn in fleet_run.go), and the node it lets start now; or why it
// would change nothing. The fleet counts each such signal as a grant
// (Grants) and spends one per node it starts before the previous node
// lets it (canStartNext, prevOK); it drops one with no node left to start
// and none to pass over. A grant given while the next node starts by
// itself is not spent on that node and carries on, to start a later node
// early that the operator never named: with nothing to pass over, that is
// refused here too. Grants not yet spent each go to the next node in turn,
// so a further one is for the node after them.
func (st *FleetState) nextGrant() (node string, passOver []string, refusal string) {
	if len(st.Nodes) == 0 {
		return "", nil, "the fleet has no nodes"
	}
	holds := st.holding()
	for i, n := range st.Nodes {
		if holds(i) {
			passOver = append(passOver, n.Node)
		}
	}
	i := st.Next + st.Grants
	byItself := ""
	switch {
	case st.Paused != "":
		byItself = "the fleet is paused (" + st.Paused + "): `adopt fleet resume` lets it go on"
	case st.Waves != nil && st.Grants > 0 && st.Next < len(st.Nodes):
		byItself = fmt.Sprintf("wave %d's start is already granted", st.WaveOf(st.Next))
	case st.Waves != nil && st.Next < len(st.Nodes) && st.startsByItself(st.Next):
		k := st.WaveOf(st.Next)
		byItself = fmt.Sprintf("node %s starts by itself: its wave %d has begun, or wave %d before it has migrated", st.Nodes[st.Next].Node, k, k-1)
	case i >= len(st.Nodes) && st.Grants == 0:
		byItself = fmt.Sprintf("every node has started (the last: %s); there is no next node", st.Nodes[len(st.Nodes)-1].Node)
	case i >= len(st.Nodes):
		byItself = fmt.Sprintf("every node not yet started is already granted its start (%d grant(s) not yet spent)", st.Grants)
	case st.Grants == 0 && st.Next == 0:
		byItself = fmt.Sprintf("node %s starts by itself: it is the fleet's first node", st.Nodes[0].Node)
	case st.Grants == 0 && st.Nodes[st.Next-1].letsNextStart():
		prev := st.Nodes[st.Next-1]
		why := "has ended (" + prev.Ended + ")"
		if prev.Ended == "" {
			why = "is done (" + string(prev.Phase) + ", every module migrated)"
		}
		byItself = fmt.Sprintf("node %s starts by itself: node %s before it %s", st.Nodes[i].Node, prev.Node, why)
	default:
		node = st.Nodes[i].Node
	}
	if byItself != "" && len(passOver) == 0 {
		return "", nil, byItself
	}
	return node, passOver, ""
}

// Index is where node stands in the fleet's order, -1 if it is not one
// of the fleet's.
func (st *FleetState) Index(node string) int {
	for i := range st.Nodes {
		if st.Nodes[i].Node == node {
			return i
		}
	}
	return -1
}

// letsNextStart: the node lets the next one start without a grant (the
// fleet's prevOK).
func (n FleetNode) letsNextStart() bool {
	return n.Done || n.Ended == string(workflows.PhaseReleased) || n.Ended == string(workflows.PhaseConverged)
}

// standing is how the node stands, in the fleet's words (fleet.describe).
func (n FleetNode) standing() string {
	switch {
	case n.Ended != "":
		return n.Ended
	case !n.Started:
		return "waiting"
	}
	return string(n.Phase)
}
