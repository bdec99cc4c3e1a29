package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// onRelay answers the relay's activities after d, one a node (runs
// before changeFleetRelayBatches) or a batch, each node by fn; it returns
// the count of activities the fleet scheduled.
func onRelay(env *testsuite.TestWorkflowEnvironment, d time.Duration, fn func(relay.NodeRequest) (relay.Outcome, error)) *int {
	acts := new(int)
	env.OnActivity(relayActs.Request, mock.Anything, mock.Anything).After(d).Return(func(_ context.Context, in relay.NodeRequest) (relay.Outcome, error) {
		*acts++
		return fn(in)
	}).Maybe()
	env.OnActivity(relayActs.Requests, mock.Anything, mock.Anything).After(d).Return(func(_ context.Context, in relay.Batch) ([]relay.Outcome, error) {
		*acts++
		var out []relay.Outcome
		for _, r := range in.Requests {
			if r.Intent == nil {
				r.Intent = in.Intent
			}
			o, err := fn(r)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		return out, nil
	}).Maybe()
	return acts
}

// opsEnv: a fleet resumed with every node started and adopted (c1, then
// m1..m3), so only the op moves. The relay answers each node after
// 10 minutes, with fail[node] as its failure; calls records when.
type opsEnv struct {
	env   *testsuite.TestWorkflowEnvironment
	calls map[string]time.Duration
	reqs  map[string]relay.NodeRequest
}

func newOpsEnv(t *testing.T, waves *config.Waves, done bool, fail map[string]string) (*opsEnv, FleetInput) {
	var ts testsuite.WorkflowTestSuite
	o := &opsEnv{env: ts.NewTestWorkflowEnvironment(), calls: map[string]time.Duration{}, reqs: map[string]relay.NodeRequest{}}
	o.env.RegisterActivity(relay.New(nil))
	t0 := o.env.Now()
	onRelay(o.env, 10*time.Minute, func(in relay.NodeRequest) (relay.Outcome, error) {
		o.calls[in.Node] = o.env.Now().Sub(t0)
		o.reqs[in.Node] = in
		return relay.Outcome{Node: in.Node, Why: fail[in.Node]}, nil
	})
	// The fleet asks quiet nodes from an earlier run: they run.
	o.env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalFleetAsk, mock.Anything).Return(nil)
	members := waveMembers(3)
	st := &FleetState{Name: "prod", Waves: waves, Next: len(members)}
	for _, m := range members {
		migrated := 0
		if done {
			migrated = 1
		}
		decl := []string{"web"}
		if m.Node == "m3" {
			decl = []string{"dns"}
		}
		st.Nodes = append(st.Nodes, FleetNode{NodeProgress: workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseAdopted, Migrated: migrated, Modules: 1},
			Role: m.Role, Started: true, Done: done, Declares: decl})
	}
	// Late, every node is released, so the fleet ends and gives its state.
	o.env.RegisterDelayedCallback(func() {
		for _, m := range members {
			o.env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseReleased})
		}
	}, 20*time.Hour)
	return o, FleetInput{Name: "prod", Members: members, Resume: st}
}

func (o *opsEnv) update(t *testing.T, at time.Duration, name, id string, in FleetRequest, ans *FleetAnswer, refused *error) {
	o.env.RegisterDelayedCallback(func() {
		(&wavesEnv{env: o.env}).update(t, name, id, in, ans, refused)
	}, at)
}

// fleet migrate: the control node alone, then each wave's nodes at once
// once the wave before has been served; a failure within the wave's budget
// is named and does not halt; a node that does not declare the module is
// not asked.
func TestFleetMigrateInWaves(t *testing.T) {
	o, in := newOpsEnv(t, &config.Waves{Sizes: []int{1, 2}, Budgets: []int{0, 1}}, false, map[string]string{"m2": "migrate web failed: boom"})
	var ans FleetAnswer
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1", "m1", "m2"}}, &ans, nil)
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	if strings.Join(ans.Targets, ",") != "c1,m1,m2" {
		t.Errorf("targets %v, want c1, m1, m2", ans.Targets)
	}
	want := map[string]time.Duration{"c1": time.Second + 10*time.Minute, "m1": time.Second + 20*time.Minute, "m2": time.Second + 30*time.Minute}
	for node, at := range want {
		if got := o.calls[node]; got != at {
			t.Errorf("node %s answered at %v, want %v (calls %v)", node, got, at, o.calls)
		}
	}
	if _, ok := o.calls["m3"]; ok {
		t.Error("m3, which does not declare web, was asked")
	}
	if r := o.reqs["m1"]; r.Kind != relay.KindMigrate || r.Module != "web" || r.ID != "op1" {
		t.Errorf("m1's request %+v", r)
	}
	if st.Op == nil || !st.Op.Done || st.Op.Halted != "" {
		t.Fatalf("op %+v, want done, not halted", st.Op)
	}
	if !strings.Contains(st.Op.Standing(), "m2 (migrate web failed: boom)") || !hasEvent(st, "fleet migrate web: node m2 failed: migrate web failed: boom") {
		t.Errorf("m2's failure not named: %q; %q", st.Op.Standing(), st.Events)
	}
}

// fleet flip: a node whose preview refuses fails its wave; over the
// budget, the op halts naming it, and the next wave is never asked.
func TestFleetFlipHaltsOverBudget(t *testing.T) {
	o, in := newOpsEnv(t, &config.Waves{Sizes: []int{1, 2}, Budgets: []int{0, 0}}, true, map[string]string{"m1": "preview refused: port 8443/tcp would close"})
	var ans FleetAnswer
	o.update(t, time.Second, UpdateFleetFlip, "flip1", FleetRequest{}, &ans, nil)
	// While it halts, another op may start; while one runs, none.
	var busy error
	o.update(t, 5*time.Minute, UpdateFleetFlip, "flip2", FleetRequest{}, nil, &busy)
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	if len(ans.Targets) != 4 {
		t.Errorf("targets %v, want every node", ans.Targets)
	}
	if _, ok := o.calls["m2"]; ok {
		t.Errorf("wave 2 was asked after wave 1 halted: %v", o.calls)
	}
	if st.Op == nil || !strings.Contains(st.Op.Halted, "wave 1 halted: 1 node(s) failed, its budget (max_failed) allows 0: m1 preview refused: port 8443/tcp would close") {
		t.Errorf("op %+v, want halted at wave 1 naming m1's refused preview", st.Op)
	}
	if busy == nil || !strings.Contains(busy.Error(), "fleet flip is under way") {
		t.Errorf("a second flip while one runs: %v, want refused", busy)
	}
}

// Bad input is refused at once, naming what was wrong; nothing starts.
func TestFleetOpsRefused(t *testing.T) {
	o, in := newOpsEnv(t, nil, false, nil)
	cases := []struct {
		name string
		in   FleetRequest
		want string
	}{
		{UpdateFleetMigrate, FleetRequest{Module: "mail"}, `module "mail": no node of the fleet declares it`},
		{UpdateFleetMigrate, FleetRequest{}, "module: none given"},
		{UpdateFleetMigrate, FleetRequest{Module: "web", Nodes: []string{"zz"}}, "node zz is not of this fleet"},
		{UpdateFleetMigrate, FleetRequest{Module: "web", Nodes: []string{"m3"}}, "node m3 does not declare module web (it declares dns)"},
		{UpdateFleetFlip, FleetRequest{}, "no node of the fleet is migrated and running: c1 has 0 of 1 module(s) migrated"},
	}
	errs := make([]error, len(cases))
	for i, c := range cases {
		o.update(t, time.Second, c.name, "bad"+string(rune('0'+i)), c.in, nil, &errs[i])
	}
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	for i, c := range cases {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), c.want) {
			t.Errorf("%s %+v: %v, want refused with %q", c.name, c.in, errs[i], c.want)
		}
	}
	if st.Op != nil || len(o.calls) > 0 {
		t.Errorf("a refused request started something: op %+v, calls %v", st.Op, o.calls)
	}
}

// A paused fleet sends no wave of an op; resume lets it go on.
func TestFleetOpWaitsWhilePaused(t *testing.T) {
	o, in := newOpsEnv(t, nil, false, nil)
	in.Resume.Paused = "paused by the operator"
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1"}}, nil, nil)
	o.update(t, 5*time.Hour, UpdateFleetResume, "r1", FleetRequest{}, nil, nil)
	o.env.ExecuteWorkflow(Fleet, in)
	st := fleetResult(t, o.env)
	if got := o.calls["c1"]; got != 5*time.Hour+10*time.Minute {
		t.Errorf("c1 answered at %v, want 5h10m (after the resume)", got)
	}
	if st.Op == nil || !st.Op.Done {
		t.Errorf("op %+v, want done", st.Op)
	}
}

// A fleet due to continue as new waits for the wave in flight, then
// carries the op with how far it went; its next run goes on from there.
func TestFleetOpCarriedAcrossContinueAsNew(t *testing.T) {
	o, in := newOpsEnv(t, nil, false, nil)
	o.update(t, time.Second, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: []string{"c1", "m1", "m2"}}, nil, nil)
	// Due while m1's wave waits on the relay (10m1s to 20m1s).
	o.env.RegisterDelayedCallback(func() { o.env.SetContinueAsNewSuggested(true) }, 15*time.Minute)
	o.env.ExecuteWorkflow(Fleet, in)
	var can *workflow.ContinueAsNewError
	if !errors.As(o.env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", o.env.GetWorkflowError())
	}
	var next FleetInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	op := next.Resume.Op
	if op == nil || op.ID != "op1" || op.nextWave() != 2 {
		t.Fatalf("carried op %+v, want op1 with m2's wave next", op)
	}
	for _, n := range op.Nodes {
		_, asked := o.calls[n.Node]
		if (n.State == opDone) != asked || n.State == opRunning {
			t.Errorf("node %s carried as %s, relay answered: %v (a wave cut in flight)", n.Node, n.State, asked)
		}
	}
}
