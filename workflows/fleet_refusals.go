// What the fleet makes of the operator's `adopt fleet next` and `adopt
// fleet retry NODE`, decided from its state alone. Both are signals (the
// stock temporal CLI can send them too), so the fleet cannot answer them;
// the CLI asks the fleet's state first and refuses (exit 2) what would be
// turned away or change nothing, instead of the refusal showing only in
// the fleet's events. The rules are the fleet's own (fleet_run.go:
// askRetry, canStartNext, prevOK), written here once as plain functions of
// the state so that the CLI and the fleet decide alike. No workflow API is
// used: it is safe anywhere, and changes no command.
package workflows

import "fmt"

// RetryRefusal is why the fleet in state st turns away a retry of node, or
// "" when it takes it, in askRetry's words. Only a node that holds the
// fleet (failed, terminated, could not start) is retried; a node started
// and not known to have ended is taken too, since it may have ended unseen
// (a fleet's later run has no future for it), and the retry is then refused
// at its start if the node's workflow still runs.
func (st *FleetState) RetryRefusal(node string) string {
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

// NextGrant is what `adopt fleet next` would do in state st: the nodes
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
func (st *FleetState) NextGrant() (node string, passOver []string, refusal string) {
	if len(st.Nodes) == 0 {
		return "", nil, "the fleet has no nodes"
	}
	for _, n := range st.Nodes {
		if n.holds() {
			passOver = append(passOver, n.Node)
		}
	}
	i := st.Next + st.Grants
	byItself := ""
	switch {
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
	return n.Done || n.Ended == string(PhaseReleased) || n.Ended == string(PhaseConverged)
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
