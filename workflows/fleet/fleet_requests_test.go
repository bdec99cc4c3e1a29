package fleet

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"adoption/workflows"
)

func fnode(name string, started bool, ended string, done bool) FleetNode {
	return FleetNode{NodeProgress: workflows.NodeProgress{Node: name, Phase: workflows.PhaseAdopted, Modules: 1}, Started: started, Ended: ended, Done: done}
}

// The rules the validators and the signals share, from the state alone.
func TestFleetRequestRules(t *testing.T) {
	st := FleetState{Next: 3, Nodes: []FleetNode{fnode("n1", true, "converged", true), fnode("n2", true, "failed: boom", false), fnode("n3", false, "", false)}}
	f := &fleet{st: &st, gen: map[string]int{}}
	for node, want := range map[string][]string{
		"n9": {"not a node of this fleet", "lists the fleet's nodes"},
		"n1": {"it has not failed (converged)", "nothing to retry"},
		"n3": {"it has not failed (waiting)", "starts in its turn"},
	} {
		err := f.validateRetry(node)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("retry %s: %v, want %q", node, err, w)
			}
		}
	}
	if err := f.validateRetry("n2"); err != nil {
		t.Errorf("retry of a failed node refused: %v", err)
	}
	running := FleetState{Next: 2, Nodes: []FleetNode{fnode("n1", true, "converged", true), fnode("n2", true, "", false)}}
	f = &fleet{st: &running, gen: map[string]int{"n2": 1}}
	if err := f.validateRetry("n2"); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("retry of a node this run started and has not seen end: %v", err)
	}
	f.gen = map[string]int{} // started in an earlier run: it may have ended unseen
	if err := f.validateRetry("n2"); err != nil {
		t.Errorf("retry of a node from an earlier run refused: %v", err)
	}

	for _, c := range []struct {
		what string
		st   FleetState
		want string
	}{
		{"every node started", FleetState{Next: 3, Nodes: []FleetNode{fnode("n1", true, "", true), fnode("n2", true, "", false), fnode("n3", true, "", false)}},
			"every node has started (the last: n3)"},
		{"the next node starts by itself", FleetState{Next: 2, Nodes: []FleetNode{fnode("n1", true, "", true), fnode("n2", true, "", true), fnode("n3", false, "", false)}},
			"node n3 starts by itself: node n2 before it is done"},
		{"every node left already granted", FleetState{Next: 2, Grants: 1, Nodes: []FleetNode{fnode("n1", true, "", true), fnode("n2", false, "", false), fnode("n3", false, "", false)}},
			"already granted its start (1 grant(s) not yet spent)"},
	} {
		if _, _, why := c.st.nextGrant(); !strings.Contains(why, c.want) {
			t.Errorf("%s: next refused with %q, want %q", c.what, why, c.want)
		}
	}
	held := FleetState{Next: 2, Nodes: []FleetNode{fnode("n1", true, "", true), fnode("n2", true, "failed: boom", false), fnode("n3", false, "", false)}}
	if node, passOver, why := held.nextGrant(); why != "" || node != "n3" || len(passOver) != 1 || passOver[0] != "n2" {
		t.Errorf("next past a failed node: %q %v %q, want n3, n2 passed over", node, passOver, why)
	}
}

// next and retry as Updates: what the fleet would turn away is refused by
// the validator and leaves no event; what it takes is answered with what
// it did.
func TestFleetRequestsAsUpdates(t *testing.T) {
	var plans []string
	env := newSlowFleetEnv(t, map[string]bool{"m1": true}, map[string]time.Duration{"m2": 10 * time.Minute}, &plans)
	var refusedRetry, refusedLate error
	var next, retry FleetAnswer
	var passed FleetState
	update := func(name, id string, in FleetRequest, ans *FleetAnswer, rejected *error) {
		env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) {
				if rejected == nil {
					t.Errorf("%s %s refused: %v", name, id, err)
					return
				}
				*rejected = err
			},
			OnAccept: func() {
				if rejected != nil {
					t.Errorf("%s %s accepted, want refused", name, id)
				}
			},
			OnComplete: func(v any, err error) {
				if a, ok := v.(FleetAnswer); ok && ans != nil {
					*ans = a
				}
			},
		}, in)
	}
	env.RegisterDelayedCallback(func() {
		update(UpdateFleetRetry, "r0", FleetRequest{Node: "m2"}, nil, &refusedRetry)
		update(UpdateFleetNext, "n0", FleetRequest{NotAfter: time.Unix(1, 0)}, nil, &refusedLate)
		update(UpdateFleetNext, "n1", FleetRequest{}, &next, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		passed = queryFleet(t, env)
		update(UpdateFleetRetry, "r1", FleetRequest{Node: "m1"}, &retry, nil)
	}, 2*time.Minute)
	env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: fleetMembers()})
	st := fleetResult(t, env)

	if refusedRetry == nil || !strings.Contains(refusedRetry.Error(), "it has not failed (waiting)") {
		t.Errorf("retry of a waiting node: %v", refusedRetry)
	}
	if refusedLate == nil || !strings.Contains(refusedLate.Error(), "after its sender stopped waiting") {
		t.Errorf("a late next: %v", refusedLate)
	}
	if next.Node != "m2" || len(next.PassedOver) != 1 || next.PassedOver[0] != "m1" {
		t.Errorf("next answered %+v, want m2 started, m1 passed over", next)
	}
	if retry.Node != "m1" {
		t.Errorf("retry answered %+v", retry)
	}
	for _, e := range passed.Events {
		if strings.Contains(e, "retry \"m2\"") {
			t.Errorf("a refused retry left an event: %q", e)
		}
	}
	for _, n := range st.Nodes {
		if n.Ended != string(workflows.PhaseConverged) || n.PassedOver {
			t.Errorf("node %s ended %q (passed over %v), want converged", n.Node, n.Ended, n.PassedOver)
		}
	}
}
