// Tests of the fleet asking nodes it cannot see end (fleet_ask.go).
package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

// resumedFleet is a fleet continued as new while m1, started in the run
// before, was adopted with a module still to migrate: the fleet waits on
// m1 to start m2, and has no future for m1.
func resumedFleet() FleetInput {
	st := &FleetState{Name: "prod", Next: 2, Runs: 1, Nodes: []FleetNode{
		{NodeProgress: workflows.NodeProgress{Node: "c1", Phase: workflows.PhaseConverged, Migrated: 1, Modules: 1}, Role: "control", Started: true, Done: true, Ended: string(workflows.PhaseConverged)},
		{NodeProgress: workflows.NodeProgress{Node: "m1", Phase: workflows.PhaseAdopted, Modules: 1}, Role: "member", Started: true},
		{NodeProgress: workflows.NodeProgress{Node: "m2"}, Role: "member"},
	}}
	return FleetInput{Name: "prod", Members: fleetMembers(), Resume: st}
}

// In runs recorded before fleet-describe: m1 was terminated after the
// fleet continued as new: the fleet asks it
// after waiting an hour, the signal fails (its workflow has closed), and m1
// holds the fleet with the reason; `fleet retry m1` starts it again. Before,
// the fleet showed m1 adopted for ever, with nothing held.
func TestFleetAsksANodeItCannotSee(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	env.OnGetVersion(changeFleetVisibility, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion(changeFleetDescribe, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // runs recorded before: signals
	var asked []time.Duration
	start := time.Time{}
	env.OnSignalExternalWorkflow(mock.Anything, workflows.WorkflowID("m1"), "", workflows.SignalFleetAsk, mock.Anything).Run(func(mock.Arguments) {
		asked = append(asked, env.Now().Sub(start))
	}).Return(&temporal.UnknownExternalWorkflowExecutionError{}).Once()
	var before, held FleetState
	env.RegisterDelayedCallback(func() { start = env.Now(); before = queryFleet(t, env) }, time.Second)
	env.RegisterDelayedCallback(func() {
		held = queryFleet(t, env)
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(Fleet, resumedFleet())
	st := fleetResult(t, env)

	if before.Held != "" || before.Nodes[1].Ended != "" {
		t.Errorf("before the ask: held %q, m1 ended %q", before.Held, before.Nodes[1].Ended)
	}
	if len(asked) != 1 || asked[0] > askFirst {
		t.Errorf("m1 asked after %v, want once, within %v", asked, askFirst)
	}
	for _, want := range []string{"node m1 ended unseen: its workflow node-migration/m1 had closed", "adopt status m1", "adopt fleet retry m1"} {
		if !strings.Contains(held.Held, want) {
			t.Errorf("held = %q, want %q", held.Held, want)
		}
	}
	if held.Nodes[2].Started {
		t.Error("m2 started while m1 held the fleet")
	}
	for _, n := range st.Nodes {
		if n.Ended != string(workflows.PhaseConverged) {
			t.Errorf("node %s ended %q, want converged", n.Node, n.Ended)
		}
	}
}

// In runs recorded before fleet-describe: a node that still runs answers;
// it is asked again later and later (at
// most once a day), and not at all while it sends progress. Nodes started
// in this run are never asked: their futures say when they end.
func TestFleetAsksARunningNodeSeldom(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	env.OnGetVersion(changeFleetVisibility, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.OnGetVersion(changeFleetDescribe, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // runs recorded before: signals
	var asked []time.Time
	env.OnSignalExternalWorkflow(mock.Anything, workflows.WorkflowID("m1"), "", workflows.SignalFleetAsk, mock.Anything).Run(func(mock.Arguments) {
		asked = append(asked, env.Now())
	}).Return(nil)
	var begin time.Time
	env.RegisterDelayedCallback(func() { begin = env.Now() }, 0)
	progress := func(at time.Duration, p workflows.NodeProgress) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalNodeProgress, p) }, at)
	}
	// Quiet for three days, then progress every 30 minutes for a day:
	// not asked then; then done, so m2 starts; m1 converges at the end.
	for at := 72 * time.Hour; at < 96*time.Hour; at += 30 * time.Minute {
		progress(at, workflows.NodeProgress{Node: "m1", Phase: workflows.PhaseMigrating, Modules: 1})
	}
	progress(96*time.Hour, workflows.NodeProgress{Node: "m1", Phase: workflows.PhaseAdopted, Migrated: 1, Modules: 1})
	progress(200*time.Hour, workflows.NodeProgress{Node: "m1", Phase: workflows.PhaseConverged, Migrated: 1, Modules: 1})
	env.ExecuteWorkflow(Fleet, resumedFleet())
	st := fleetResult(t, env)

	var offsets []time.Duration
	for _, at := range asked {
		offsets = append(offsets, at.Sub(begin).Round(time.Minute))
	}
	// 1h, 3h, 7h, 15h, 31h, 55h: each round twice as late, up to a day.
	want := []time.Duration{time.Hour, 3 * time.Hour, 7 * time.Hour, 15 * time.Hour, 31 * time.Hour, 55 * time.Hour}
	if len(offsets) < len(want) {
		t.Fatalf("m1 asked at %v, want first at %v", offsets, want)
	}
	for k, w := range want {
		if offsets[k] != w {
			t.Errorf("ask %d at %v, want %v (all: %v)", k+1, offsets[k], w, offsets)
		}
	}
	for k := 1; k < len(offsets) && offsets[k] < 72*time.Hour; k++ {
		if gap := offsets[k] - offsets[k-1]; gap > askMax {
			t.Errorf("asks %v apart (all: %v), want at most %v while m1 is quiet", gap, offsets, askMax)
		}
	}
	// Once m1 is done, m2 starts (and ends at once), and the fleet waits
	// on m1 to end: asked again from an hour after its last progress.
	if n := len(offsets); offsets[n-1] < 97*time.Hour || n > 20 {
		t.Errorf("m1 asked at %v: want asks after it was done, and few", offsets)
	}
	for _, o := range offsets {
		if o > 72*time.Hour+30*time.Minute && o < 96*time.Hour {
			t.Errorf("m1 asked at %v while it sent progress every 30 minutes (all: %v)", o, offsets)
		}
	}
	for _, n := range st.Nodes {
		if n.Ended != string(workflows.PhaseConverged) {
			t.Errorf("node %s ended %q, want converged", n.Node, n.Ended)
		}
	}
}

// A fleet run from before changeFleetAsk asks nobody (it had no such
// timer or signal: its history replays).
func TestFleetAsksNobodyBeforeTheChange(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	env.OnGetVersion(changeFleetAsk, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	env.ExecuteWorkflow(Fleet, resumedFleet())
	// No SignalExternalWorkflow is mocked: one would fail the run.
	if env.IsWorkflowCompleted() && env.GetWorkflowError() == nil {
		t.Fatal("the fleet ended with m1 still adopted")
	}
	if err := env.GetWorkflowError(); err != nil && strings.Contains(err.Error(), "SignalExternalWorkflow") {
		t.Fatalf("the fleet asked: %v", err)
	}
}

// In runs recorded before fleet-visibility: m1 was terminated after the
// fleet continued as new, and a workflow was
// started again under its ID outside the fleet: the first round (an hour)
// describes it by the run the fleet started and reports it, naming how;
// a node the relay says still runs is left as it is.
func TestFleetDescribesANodeReplacedOutside(t *testing.T) {
	for _, c := range []struct{ ended, held string }{
		{"replaced outside the fleet: the workflow node-migration/m1 under its ID now (run r2, running) was not started by this fleet", "node m1 replaced outside the fleet"},
		{"terminated", "node m1 terminated"},
	} {
		var plans []string
		env := newFleetEnv(t, nil, &plans)
		env.OnGetVersion(changeFleetVisibility, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // runs recorded before: describes
		env.RegisterActivity(relay.New(nil))
		var asked []relay.ChildrenInput
		env.OnActivity(relayActs.Children, mock.Anything, mock.Anything).Return(func(_ context.Context, in relay.ChildrenInput) ([]relay.ChildStanding, error) {
			asked = append(asked, in)
			return []relay.ChildStanding{{Node: "m1", Ended: c.ended}}, nil
		}).Once()
		in := resumedFleet()
		in.Resume.Nodes[1].RunID = "r1"
		var held FleetState
		env.RegisterDelayedCallback(func() {
			held = queryFleet(t, env)
			env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
		}, 2*time.Hour)
		env.ExecuteWorkflow(Fleet, in)
		fleetResult(t, env)
		if len(asked) != 1 || len(asked[0].Nodes) != 1 || asked[0].Nodes[0] != (relay.Child{Node: "m1", RunID: "r1"}) || asked[0].Fleet != FleetID("prod") {
			t.Errorf("asked %+v, want m1 by its run r1, once, in fleet %s", asked, FleetID("prod"))
		}
		if !strings.Contains(held.Held, c.held) || held.Nodes[1].Ended != c.ended {
			t.Errorf("held %q, m1 ended %q; want %q", held.Held, held.Nodes[1].Ended, c.held)
		}
	}
}

// In runs recorded before fleet-visibility: AskFirst shortens the first
// round (the history recorder's fleets): m1,
// replaced outside the fleet, is described within minutes, not an hour.
func TestFleetAskFirstShortensTheFirstRound(t *testing.T) {
	var plans []string
	env := newFleetEnv(t, nil, &plans)
	env.OnGetVersion(changeFleetVisibility, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion) // runs recorded before: describes
	env.RegisterActivity(relay.New(nil))
	asked := 0
	env.OnActivity(relayActs.Children, mock.Anything, mock.Anything).Return(func(_ context.Context, in relay.ChildrenInput) ([]relay.ChildStanding, error) {
		asked++
		return []relay.ChildStanding{{Node: "m1", Ended: "terminated"}}, nil
	}).Once()
	in := resumedFleet()
	in.Resume.Nodes[1].RunID = "r1"
	in.AskFirst = 5 * time.Minute
	var held FleetState
	env.RegisterDelayedCallback(func() {
		held = queryFleet(t, env)
		env.SignalWorkflow(SignalFleetRetry, FleetRetry{Node: "m1"})
	}, 10*time.Minute)
	env.ExecuteWorkflow(Fleet, in)
	fleetResult(t, env)
	if asked != 1 || held.Nodes[1].Ended != "terminated" {
		t.Errorf("within 10 minutes: asked %d time(s), m1 ended %q; want asked once and m1 terminated", asked, held.Nodes[1].Ended)
	}
}
