// A fleet request that follows the waves: `adopt fleet migrate MODULE`
// targets every node that declares the module, those not started yet too,
// and sends each its request once the node's wave has started; a migrate
// of another module goes along with it (each wave's requests op by op);
// and a node's request counts as served as soon as the node's own
// progress says so, so an op is done when its nodes are, not when the
// relay next reads their status. Runs before changeFleetOpsFollow keep the
// old rules: the nodes started when asked, one op at a time.
package fleet

import (
	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// follows says whether this run's ops follow the waves, asking
// changeFleetOpsFollow the first time.
func (f *fleet) follows(ctx workflow.Context) bool {
	if f.follow == 0 {
		f.follow = 1
		if workflow.GetVersion(ctx, changeFleetOpsFollow, workflow.DefaultVersion, 1) >= 1 {
			f.follow = 2
		}
	}
	return f.follow == 2
}

// ops are the fleet's ops that may still have work: those following the
// waves, then the latest.
func (st *FleetState) ops() []*FleetOp {
	out := append([]*FleetOp{}, st.Following...)
	if st.Op != nil {
		out = append(out, st.Op)
	}
	return out
}

// opsBusy: an op still has requests to send or waits on some.
func (st *FleetState) opsBusy() bool {
	for _, op := range st.ops() {
		if op.busy() {
			return true
		}
	}
	return false
}

// dropFinished drops the following ops that are done or halted (the
// latest stays, for status).
func (st *FleetState) dropFinished() {
	kept := st.Following[:0]
	for _, op := range st.Following {
		if op.busy() {
			kept = append(kept, op)
		}
	}
	st.Following = kept
	if len(st.Following) == 0 {
		st.Following = nil
	}
}

// opReady: op's next wave may be sent: every node of it has started or
// ended (following the waves; before, always).
func (f *fleet) opReady(op *FleetOp) bool {
	if f.follow != 2 {
		return true
	}
	k := op.nextWave()
	for _, n := range op.Nodes {
		if n.Wave != k || n.State != opWaiting {
			continue
		}
		if i := f.index(n.Node); i >= 0 && !f.st.Nodes[i].Started && f.st.Nodes[i].Ended == "" {
			return false
		}
	}
	return true
}

// endedBeforeSent fails the nodes of wave (op indexes) whose workflow
// ended before their request was sent, and returns the others.
func (f *fleet) endedBeforeSent(ctx workflow.Context, op *FleetOp, wave []int) []int {
	var out []int
	for _, j := range wave {
		n := &op.Nodes[j]
		i := f.index(n.Node)
		if i < 0 || f.st.Nodes[i].Ended == "" {
			out = append(out, j)
			continue
		}
		f.served(ctx, op, j, relay.Outcome{Node: n.Node, Why: "node " + n.Node + " " + f.st.Nodes[i].Ended}, nil)
	}
	return out
}

// nodeServed settles the requests a node's progress shows served: a
// migrate once the node is done (every module migrated), a flip once it
// has converged. The relay's answer for it, later, changes nothing.
func (f *fleet) nodeServed(n FleetNode) {
	if f.follow != 2 {
		return
	}
	for _, op := range f.st.ops() {
		if !op.busy() {
			continue
		}
		ok := n.Done
		if op.Kind == relay.KindFlip {
			ok = n.Phase == workflows.PhaseConverged
		}
		if !ok {
			continue
		}
		if j := op.at(n.Node); j >= 0 && op.Nodes[j].State == opRunning {
			op.Nodes[j].State, op.Nodes[j].Why = opDone, ""
			delete(op.Intents, n.Node)
		}
	}
}
