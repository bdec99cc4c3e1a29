package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
)

// wavesEnv: a fleet of c1 (control) and members; each child records when
// it started and under which intent, fails its first run if its node is in
// fail, else converges after slow[node] (default 10 minutes).
type wavesEnv struct {
	env     *testsuite.TestWorkflowEnvironment
	started map[string]time.Duration // since the fleet started
	intents map[string]string
}

func newWavesEnv(t *testing.T, fail map[string]bool, slow map[string]time.Duration) *wavesEnv {
	var ts testsuite.WorkflowTestSuite
	w := &wavesEnv{env: ts.NewTestWorkflowEnvironment(), started: map[string]time.Duration{}, intents: map[string]string{}}
	w.env.RegisterActivity(&activities.Activities{})
	w.env.OnActivity(nodeActs.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (*config.Plan, error) {
		return memberPlan(in.Node), nil
	})
	var t0 time.Time
	// A workflow, not a mock: the test environment runs a mocked child to
	// its end before its start resolves, which would serialize the waves.
	w.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in workflows.Input) (*workflows.State, error) {
		node := in.Plan.Node
		if t0.IsZero() {
			t0 = workflow.Now(ctx) // c1 starts at once
		}
		w.started[node] = workflow.Now(ctx).Sub(t0)
		if in.Intent != nil {
			w.intents[node] = string(in.Intent.Payload)
		}
		d := 10 * time.Minute
		if s, ok := slow[node]; ok {
			d = s
		}
		if err := workflow.Sleep(ctx, d); err != nil {
			return nil, err
		}
		if fail[node] {
			delete(fail, node)
			return nil, temporal.NewNonRetryableApplicationError("boom", "Boom", nil)
		}
		return &workflows.State{Node: node, Phase: workflows.PhaseConverged, Modules: []workflows.ModuleState{{Name: "web", State: workflows.ModuleMigrated}}}, nil
	}, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	return w
}

func waveMembers(n int) []FleetMember {
	out := []FleetMember{{Node: "c1", Role: "control"}}
	for i := 1; i <= n; i++ {
		out = append(out, FleetMember{Node: "m" + string(rune('0'+i)), Role: "member"})
	}
	return out
}

// update sends an Update and gives its answer, or its refusal.
func (w *wavesEnv) update(t *testing.T, name, id string, in FleetRequest, ans *FleetAnswer, refused *error) {
	w.env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) {
			if refused == nil {
				t.Errorf("%s %s refused: %v", name, id, err)
				return
			}
			*refused = err
		},
		OnAccept: func() {
			if refused != nil {
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

// The control node alone, then each wave's nodes together once the wave
// before has migrated: m2, m3 and m4 start at once when m1 is done, where
// one node at a time would start m3 only after m2.
func TestFleetWavesStartTogether(t *testing.T) {
	w := newWavesEnv(t, nil, nil)
	w.env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: waveMembers(4),
		Waves: &config.Waves{Sizes: []int{1, 3}, Budgets: []int{0, 0}}})
	st := fleetResult(t, w.env)
	want := map[string]time.Duration{"c1": 0, "m1": 10 * time.Minute, "m2": 20 * time.Minute, "m3": 20 * time.Minute, "m4": 20 * time.Minute}
	for node, at := range want {
		if got, ok := w.started[node]; !ok || got != at {
			t.Errorf("node %s started at %v (started: %v), want %v", node, got, ok, at)
		}
	}
	if !hasEvent(st, "wave 2 of 2: m2, m3, m4 (up to 0 may fail)") {
		t.Errorf("no event for wave 2's start: %q", st.Events)
	}

	// The same fleet without waves: one node at a time, as before.
	w = newWavesEnv(t, nil, nil)
	w.env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: waveMembers(4)})
	fleetResult(t, w.env)
	if w.started["m3"] != 30*time.Minute || w.started["m4"] != 40*time.Minute {
		t.Errorf("without waves m3 started at %v, m4 at %v, want 30m and 40m", w.started["m3"], w.started["m4"])
	}
}

// A wave's failures within its budget let the next wave start, and are
// named; the fleet ends with the failed node failed, not holding it.
func TestFleetWaveWithinBudgetGoesOn(t *testing.T) {
	w := newWavesEnv(t, map[string]bool{"m2": true}, nil)
	w.env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: waveMembers(4),
		Waves: &config.Waves{Sizes: []int{1, 2, 1}, Budgets: []int{0, 1, 0}}})
	st := fleetResult(t, w.env)
	if w.started["m4"] != 30*time.Minute {
		t.Errorf("m4 started at %v, want 30m (once m2 failed within its wave's budget and m3 converged); started %v, events %q", w.started["m4"], w.started, st.Events)
	}
	if n := st.Nodes[st.Index("m2")]; n.Ended != "failed: boom" || st.Held != "" {
		t.Errorf("m2 ended %q, held %q; want failed and the fleet not held", n.Ended, st.Held)
	}
	if !hasEvent(st, "wave 2 went on with m2 failed, within its budget") {
		t.Errorf("the failure within budget is not named: %q", st.Events)
	}
}

// More failures than the budget halt the fleet with the nodes named; the
// next wave does not start until `adopt fleet next` goes on without them.
func TestFleetWaveOverBudgetHalts(t *testing.T) {
	w := newWavesEnv(t, map[string]bool{"m1": true, "m2": true}, nil)
	var halted FleetState
	var next FleetAnswer
	var attention []string
	w.env.OnUpsertTypedSearchAttributes(mock.Anything).Maybe().Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.AttrAttention); ok {
			attention = append(attention, v)
		}
	}).Return(nil)
	w.env.RegisterDelayedCallback(func() {
		halted = queryFleet(t, w.env)
		w.update(t, UpdateFleetNext, "n1", FleetRequest{}, &next, nil)
	}, time.Hour)
	w.env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: waveMembers(3),
		Waves: &config.Waves{Sizes: []int{2, 1}, Budgets: []int{1, 0}}})
	st := fleetResult(t, w.env)
	want := "wave 1 halted: 2 node(s) failed, its budget (max_failed) allows 1: m1 failed: boom; m2 failed: boom"
	if !strings.Contains(halted.Held, want) || halted.Nodes[halted.Index("m3")].Started {
		t.Errorf("after wave 1 failed beyond its budget: held %q, m3 started %v; want %q and m3 waiting", halted.Held, halted.Nodes[halted.Index("m3")].Started, want)
	}
	if !hasEvent(halted, want) {
		t.Errorf("the halt is not in the events: %q", halted.Events)
	}
	if next.Node != "m3" || strings.Join(next.PassedOver, ",") != "m1,m2" {
		t.Errorf("next answered %+v, want m3 started, m1 and m2 passed over", next)
	}
	if w.started["m3"] != time.Hour {
		t.Errorf("m3 started at %v, want at the operator's next (1h)", w.started["m3"])
	}
	if n := st.Nodes[st.Index("m3")]; n.Ended != string(workflows.PhaseConverged) {
		t.Errorf("m3 ended %q", n.Ended)
	}
	// AdoptionAttention says so while the wave holds the fleet, and is
	// cleared once next goes on without its failures.
	if strings.Join(attention, ",") != workflows.AttentionWaveHeld+"," {
		t.Errorf("AdoptionAttention upserted %q, want wave-held then cleared", attention)
	}
}

// pause stops the fleet starting nodes (the one started goes on); resume
// lets it go on, and the nodes started from then on adopt under its intent.
// What would change nothing is refused by the validators.
func TestFleetPauseResume(t *testing.T) {
	w := newWavesEnv(t, nil, nil)
	var paused FleetState
	var again, early, nextPaused, lateEnd error
	var resumed FleetAnswer
	w.env.RegisterDelayedCallback(func() {
		w.update(t, UpdateFleetResume, "r0", FleetRequest{}, nil, &early)
		w.update(t, UpdateFleetPause, "p1", FleetRequest{}, nil, nil)
		w.update(t, UpdateFleetPause, "p2", FleetRequest{}, nil, &again)
		w.update(t, UpdateFleetNext, "n1", FleetRequest{}, nil, &nextPaused)
	}, time.Minute)
	w.env.RegisterDelayedCallback(func() { paused = queryFleet(t, w.env) }, 30*time.Minute)
	w.env.RegisterDelayedCallback(func() {
		w.update(t, UpdateFleetResume, "r1", FleetRequest{Intent: &intent.Signed{Payload: []byte("resume")}}, &resumed, nil)
	}, time.Hour)
	w.env.RegisterDelayedCallback(func() {
		w.update(t, UpdateFleetPause, "p3", FleetRequest{}, nil, &lateEnd)
	}, 75*time.Minute)
	w.env.ExecuteWorkflow(Fleet, FleetInput{Name: "prod", Members: waveMembers(2), Intent: &intent.Signed{Payload: []byte("start")}})
	st := fleetResult(t, w.env)

	if paused.Paused == "" || paused.Nodes[paused.Index("m1")].Started || paused.Nodes[0].Ended != string(workflows.PhaseConverged) {
		t.Errorf("paused fleet at 30m: paused %q, m1 started %v, c1 %q; want paused, m1 waiting, c1 converged", paused.Paused, paused.Nodes[1].Started, paused.Nodes[0].Ended)
	}
	if w.started["m1"] != time.Hour || resumed.Node != "m1" {
		t.Errorf("m1 started at %v, resume answered %+v; want at the resume (1h), naming m1", w.started["m1"], resumed)
	}
	if w.intents["c1"] != "start" || w.intents["m1"] != "resume" {
		t.Errorf("intents %v, want c1 under the start's, m1 under the resume's", w.intents)
	}
	for what, c := range map[string]struct {
		err  error
		want string
	}{
		"resume of a fleet not paused":  {early, "the fleet is not paused"},
		"pause of a paused fleet":       {again, "already paused"},
		"next while paused":             {nextPaused, "the fleet is paused"},
		"pause with every node started": {lateEnd, "every node has started"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want refused with %q", what, c.err, c.want)
		}
	}
	if st.Paused != "" {
		t.Errorf("the fleet ended paused: %q", st.Paused)
	}
}

// The fleet refuses waves that do not fit its nodes, before it starts one.
func TestFleetWavesValidated(t *testing.T) {
	in := FleetInput{Name: "prod", Members: waveMembers(3), Waves: &config.Waves{Sizes: []int{1, 1}, Budgets: []int{0, 0}}}
	if err := ValidateFleet(in); err == nil || !strings.Contains(err.Error(), "cover 2 node(s), the fleet has 3 after its control node") {
		t.Errorf("waves short of the fleet: %v", err)
	}
}

func hasEvent(st FleetState, s string) bool {
	for _, e := range st.Events {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}
