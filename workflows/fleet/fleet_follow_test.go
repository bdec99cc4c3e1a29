package fleet

import (
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// followEnv: a resumed fleet in waves [1, 2]: c1 and m1 started and
// adopted, web not migrated yet; m2 and m3 not started (their children
// run 5 hours, then converge). The relay answers after relayAfter; late,
// c1 and m1 are released, so the fleet ends.
func followEnv(t *testing.T, relayAfter time.Duration) (*opsEnv, FleetInput) {
	w := newWavesEnv(t, nil, map[string]time.Duration{"m2": 5 * time.Hour, "m3": 5 * time.Hour})
	o := &opsEnv{env: w.env, calls: map[string]time.Duration{}, reqs: map[string]relay.NodeRequest{}}
	o.env.RegisterActivity(relay.New(nil))
	t0 := o.env.Now()
	onRelay(o.env, relayAfter, func(in relay.NodeRequest) (relay.Outcome, error) {
		o.calls[in.Node] = o.env.Now().Sub(t0)
		o.reqs[in.Node] = in
		return relay.Outcome{Node: in.Node}, nil
	})
	members := waveMembers(3)
	st := &FleetState{Name: "prod", Waves: &config.Waves{Sizes: []int{1, 2}, Budgets: []int{0, 0}}, Next: 2}
	for i, m := range members {
		n := FleetNode{NodeProgress: workflows.NodeProgress{Node: m.Node}, Role: m.Role}
		if i < 2 {
			n.NodeProgress = workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseAdopted, Modules: 1}
			n.Started, n.Declares = true, []string{"web"}
		}
		st.Nodes = append(st.Nodes, n)
	}
	o.env.RegisterDelayedCallback(func() {
		for _, node := range []string{"c1", "m1"} {
			o.env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: node, Phase: workflows.PhaseReleased, Migrated: 1, Modules: 1})
		}
	}, 20*time.Hour)
	return o, FleetInput{Name: "prod", Members: members, Resume: st}
}

// done signals, at at, that each of nodes has web migrated.
func (o *opsEnv) done(at time.Duration, nodes ...string) {
	o.env.RegisterDelayedCallback(func() {
		for _, node := range nodes {
			o.env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: node, Phase: workflows.PhaseAdopted, Migrated: 1, Modules: 1})
		}
	}, at)
}

// One `adopt fleet migrate web` reaches every node that declares it: the
// nodes not started yet are targets too, and each is sent its request once
// its wave has started (before, the op took only the nodes started, and
// the operator sent it again after every wave).
func TestFleetMigrateFollowsTheWaves(t *testing.T) {
	o, in := followEnv(t, 10*time.Minute)
	var ans FleetAnswer
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1", "m1", "m2", "m3"}}, &ans, nil)
	// The relay serves c1 (10m), then m1 (20m); their progress says so.
	o.done(25*time.Minute, "c1", "m1")
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	if strings.Join(ans.Targets, ",") != "c1,m1,m2,m3" || len(ans.Skipped) != 0 {
		t.Errorf("targets %v, skipped %v; want every node that declares web", ans.Targets, ans.Skipped)
	}
	for _, node := range []string{"m2", "m3"} {
		at, asked := o.calls[node]
		if !asked || at < 25*time.Minute || o.reqs[node].ID != "op1" {
			t.Errorf("node %s: asked %v at %v (request %+v); want op1's request once wave 2 started, after 25m", node, asked, at, o.reqs[node])
		}
	}
	if st.Op == nil || !st.Op.Done || st.Op.Halted != "" {
		t.Fatalf("op %+v, want done", st.Op)
	}
}

// An op is done when its nodes are: a node whose progress says it has
// served the request settles it at once, so the next request is taken
// then, not once the relay next reads the node (here 3 hours later).
func TestFleetOpDoneWhenItsNodesAre(t *testing.T) {
	o, in := followEnv(t, 3*time.Hour)
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1"}}, nil, nil)
	o.done(30*time.Minute, "c1")
	var ans FleetAnswer
	o.update(t, time.Hour, UpdateFleetMigrate, "op2", FleetRequest{Module: "web", Nodes: []string{"m1"}}, &ans, nil) // refused: the test fails
	o.env.ExecuteWorkflow(Fleet, in)
	fleetResult(t, o.env)
	if strings.Join(ans.Targets, ",") != "m1" {
		t.Errorf("the next migrate, once c1 said it was done: targets %v; want m1", ans.Targets)
	}
}

// A migrate of another module goes along with one that waits for the
// waves (which wait for every module); the same module's is refused.
func TestFleetMigrateAnotherModuleAlong(t *testing.T) {
	o, in := followEnv(t, 10*time.Minute)
	in.Resume.Nodes[0].Declares = []string{"web", "dns"}
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1", "m1", "m2", "m3"}}, nil, nil)
	var same error
	o.update(t, time.Minute, UpdateFleetMigrate, "op2", FleetRequest{Module: "web", Nodes: []string{"m2"}}, nil, &same)
	o.env.RegisterDelayedCallback(func() {
		(&wavesEnv{env: o.env}).update(t, UpdateFleetMigrate, "op3", FleetRequest{Module: "dns", Nodes: []string{"c1"}}, nil, nil) // refused: the test fails
	}, 2*time.Minute)
	o.done(25*time.Minute, "c1", "m1")
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	if same == nil || !strings.Contains(same.Error(), "under way") {
		t.Errorf("a second migrate of web: %v, want refused as under way", same)
	}
	if st.Op == nil || st.Op.Module != "dns" || len(st.Following) != 0 {
		t.Errorf("latest op %+v, following %d; want dns's, none left following", st.Op, len(st.Following))
	}
}
