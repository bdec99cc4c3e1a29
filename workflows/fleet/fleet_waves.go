// The fleet's waves and its pause: which wave a node is in, when the next
// wave may start (the previous one has migrated, its failures within its
// budget), which failed nodes halt the fleet, and what the fleet waits on.
// A fleet without waves is one node at a time: each node a wave of its own
// with no budget, so the same rules give the fleet's old order.
package fleet

import (
	"fmt"
)

// WaveOf is the wave node i is in: 0 for the control node, then 1, 2...;
// without waves, i itself.
func (st *FleetState) WaveOf(i int) int {
	if st.Waves == nil || i == 0 {
		return i
	}
	end := 1
	for k, s := range st.Waves.Sizes {
		if end += s; i < end {
			return k + 1
		}
	}
	return len(st.Waves.Sizes)
}

// wave is the nodes of wave k, [lo, hi).
func (st *FleetState) wave(k int) (lo, hi int) {
	if st.Waves == nil || k == 0 {
		return k, min(k+1, len(st.Nodes))
	}
	lo = 1
	for _, s := range st.Waves.Sizes[:k-1] {
		lo += s
	}
	return lo, min(lo+st.Waves.Sizes[k-1], len(st.Nodes))
}

// budget is how many of wave k's nodes may fail before the fleet halts.
func (st *FleetState) budget(k int) int {
	if st.Waves == nil || k == 0 {
		return 0
	}
	return st.Waves.Budgets[k-1]
}

// failed are the nodes of wave k that ended badly and that the operator
// neither retried nor went on without.
func (st *FleetState) failed(k int) []string {
	var out []string
	lo, hi := st.wave(k)
	for _, n := range st.Nodes[lo:hi] {
		if n.holds() {
			out = append(out, n.Node)
		}
	}
	return out
}

// overBudget: wave k has more failures than its budget; its failed nodes
// halt the fleet.
func (st *FleetState) overBudget(k int) bool { return len(st.failed(k)) > st.budget(k) }

// holding says, for a walk over many nodes, whether node i's end holds the
// fleet: it ended badly, the operator has neither retried it nor gone on
// without it, and its wave has more such nodes than its budget (without
// waves: none allowed). Each wave's budget is counted once, not once per
// failed node (a wave of hundreds of nodes with dozens failed made every
// such walk quadratic).
func (st *FleetState) holding() func(i int) bool {
	over := map[int]bool{}
	return func(i int) bool {
		if !st.Nodes[i].holds() {
			return false
		}
		k := st.WaveOf(i)
		o, ok := over[k]
		if !ok {
			o = st.overBudget(k)
			over[k] = o
		}
		return o
	}
}

// migrated: every node of wave k is done, has ended, or failed within the
// wave's budget.
func (st *FleetState) migrated(k int) bool {
	lo, hi := st.wave(k)
	for _, n := range st.Nodes[lo:hi] {
		if !n.letsNextStart() && !n.blocked() {
			return false
		}
	}
	return !st.overBudget(k)
}

// startsByItself: node i may start without the operator's grant: it is
// the first node, its wave has begun, or the wave before has migrated.
// Without waves that is: the node before it is done or has ended well.
func (st *FleetState) startsByItself(i int) bool {
	switch {
	case i == 0:
		return true
	case st.Waves == nil:
		return st.Nodes[i-1].letsNextStart()
	case st.WaveOf(i) == st.WaveOf(i-1):
		return true
	}
	return st.migrated(st.WaveOf(i - 1))
}

// waitsOn are the nodes the fleet waits on before it starts node i: the
// wave before it (without waves, the node before it).
func (st *FleetState) waitsOn(i int) []int {
	lo, hi := st.wave(st.WaveOf(i - 1))
	var out []int
	for j := lo; j < hi; j++ {
		out = append(out, j)
	}
	return out
}

// heldBy says why the fleet does not go on, when failed nodes hold it, in
// the words status shows; "" otherwise.
func (st *FleetState) heldBy() string {
	holds := st.holding()
	for i, n := range st.Nodes {
		if !holds(i) {
			continue
		}
		if st.Waves == nil || i == 0 { // the control node is a wave of its own, with no budget
			return fmt.Sprintf("node %s %s: fix it, then `adopt fleet retry %s`, or go on without it: `adopt fleet next`", n.Node, n.Ended, n.Node)
		}
		k := st.WaveOf(i)
		lo, hi := st.wave(k)
		var why []string
		for j := lo; j < hi; j++ {
			if st.Nodes[j].holds() {
				why = append(why, st.Nodes[j].Node+" "+st.Nodes[j].Ended)
			}
		}
		return fmt.Sprintf("wave %d halted: %d node(s) failed, its budget (max_failed) allows %d: %s. Fix them, then `adopt fleet retry NODE`, or go on without them: `adopt fleet next`",
			k, len(why), st.budget(k), names(why, "; "))
	}
	return ""
}

// waveStart is the event line of wave k's start, or "" when node i is not
// the first of a wave (or the fleet has no waves).
func (st *FleetState) waveStart(i int) string {
	k := st.WaveOf(i)
	if st.Waves == nil || k == 0 {
		return ""
	}
	if lo, _ := st.wave(k); lo != i {
		return ""
	}
	lo, hi := st.wave(k)
	var in []string
	for _, n := range st.Nodes[lo:hi] {
		in = append(in, n.Node)
	}
	line := fmt.Sprintf("wave %d of %d: %s (up to %d may fail)", k, len(st.Waves.Sizes), names(in, ", "), st.budget(k))
	if prev := st.failed(k - 1); len(prev) > 0 {
		line += fmt.Sprintf("; wave %d went on with %s failed, within its budget", k-1, names(prev, ", "))
	}
	return line
}

// pauseRefusal is why `adopt fleet pause` would change nothing, or "".
func (st *FleetState) pauseRefusal() string {
	switch {
	case st.Paused != "":
		return "the fleet is already paused (" + st.Paused + "); `adopt fleet resume` lets it go on"
	case st.Next >= len(st.Nodes) && !st.opsBusy():
		return "every node has started: there is no start left to pause (each node's own workflow goes on; see `adopt fleet status`)"
	}
	return ""
}

// resumeRefusal is why `adopt fleet resume` would change nothing, or "".
func (st *FleetState) resumeRefusal() string {
	if st.Paused == "" {
		return "the fleet is not paused"
	}
	return ""
}
