// A fleet of a thousand nodes in the SDK's test environment: how long the
// fleet's own code takes when every node reports at once, as the nodes of
// a fleet migrate's big wave do (go test -bench FleetAtScale).
package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities/relay"
	"adoption/config"
	"adoption/workflows"
)

// scaleFleet is a resumed fleet of c1 and n-1 members in the waves
// [1, 5, "10%", "100%"], every node started and migrating; failed of the
// big wave's nodes ended badly, within its budget.
func scaleFleet(n, failed int) FleetInput {
	members := []FleetMember{{Node: "c1", Role: "control"}}
	for i := 1; i < n; i++ {
		members = append(members, FleetMember{Node: fmt.Sprintf("sim%05d", i), Role: "member"})
	}
	big := n - 1 - 5 - 100
	waves := &config.Waves{Sizes: []int{1, 5, 100, big}, Budgets: []int{0, 0, 10, big / 10}}
	st := &FleetState{Name: "bench", Waves: waves, Next: n}
	for i, m := range members {
		fn := FleetNode{NodeProgress: workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseMigrating, Modules: 1},
			Role: m.Role, Started: true, Declares: []string{"web"}}
		if i >= n-failed {
			fn.Ended = "failed: boom"
		}
		st.Nodes = append(st.Nodes, fn)
	}
	return FleetInput{Name: "bench", Members: members, Resume: st}
}

// runScaleFleet runs the fleet: every node reports progress twice at
// once, then is released, so the fleet ends. It fails b unless the fleet
// ended with every running node released.
func runScaleFleet(tb testing.TB, n, failed int) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	in := scaleFleet(n, failed)
	running := in.Members[:n-failed]
	for k, ph := range []workflows.Phase{workflows.PhaseMigrating, workflows.PhaseAdopted} {
		migrated := k
		env.RegisterDelayedCallback(func() {
			for _, m := range running {
				env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: m.Node, Phase: ph, Migrated: migrated, Modules: 1})
			}
		}, time.Duration(k+1)*time.Minute)
	}
	env.RegisterDelayedCallback(func() {
		for _, m := range running {
			env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseReleased, Migrated: 1, Modules: 1})
		}
	}, time.Hour)
	env.ExecuteWorkflow(Fleet, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		tb.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st FleetState
	if err := env.GetWorkflowResult(&st); err != nil {
		tb.Fatal(err)
	}
	for _, nd := range st.Nodes[:n-failed] {
		if nd.Ended != string(workflows.PhaseReleased) || nd.Migrated != 1 {
			tb.Fatalf("node %s: ended %q, migrated %d; want released with its module migrated", nd.Node, nd.Ended, nd.Migrated)
		}
	}
}

func BenchmarkFleetAtScale(b *testing.B) {
	for range b.N {
		runScaleFleet(b, 1000, 40)
	}
}

// The same fleet runs to its end: the progress of a thousand nodes at once
// is taken within the SDK's deadlock bound.
func TestFleetAtScale(t *testing.T) {
	start := time.Now()
	runScaleFleet(t, 1000, 40)
	t.Logf("1000 nodes, 3 x 960 signals: %s", time.Since(start))
}

// The two walks a node's progress costs the fleet, on a thousand nodes
// with forty failed in the big wave: why the fleet does not go on, once
// per signal, and its details, once per workflow task.
func BenchmarkFleetHeldBy(b *testing.B) {
	st := scaleFleet(1000, 40).Resume
	for range b.N {
		if st.heldBy() != "" {
			b.Fatal("a wave within its budget holds the fleet")
		}
	}
}

func BenchmarkFleetDetails(b *testing.B) {
	st := scaleFleet(1000, 40).Resume
	for range b.N {
		if len(fleetDetails(st)) < 1000*20 {
			b.Fatal("details too short")
		}
	}
}

// The details say each node in status's words, a line each.
func TestFleetDetailsLines(t *testing.T) {
	st := &FleetState{Name: "prod", Held: "node m1 failed: boom", Nodes: []FleetNode{
		{NodeProgress: workflows.NodeProgress{Node: "c1", Phase: workflows.PhaseAdopted, Migrated: 2, Modules: 12}, Role: "control", Started: true},
		{NodeProgress: workflows.NodeProgress{Node: "m1"}, Role: "member", Started: true, Ended: "failed: boom", PassedOver: true},
		{NodeProgress: workflows.NodeProgress{Node: "m2"}, Role: "member"},
	}}
	want := "**Fleet prod**\n\n> **Held:** node m1 failed: boom\n\n" +
		"- c1 (control): adopted, modules 2/12\n" +
		"- m1 (member): failed: boom (passed over), modules 0/0\n" +
		"- m2 (member): waiting, modules 0/0\n"
	if got := fleetDetails(st); got != want {
		t.Errorf("details:\n%s\nwant:\n%s", got, want)
	}
}

// A fleet migrate on the same fleet: each wave's requests at once, the
// big wave's hundreds together; every running node is served.
func runScaleMigrate(tb *testing.T, n, failed int) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(relay.New(nil))
	served := 0
	env.OnActivity(relayActs.Request, mock.Anything, mock.Anything).After(10 * time.Minute).Return(func(_ context.Context, in relay.NodeRequest) (relay.Outcome, error) {
		served++
		return relay.Outcome{Node: in.Node}, nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalFleetAsk, mock.Anything).Return(nil)
	in := scaleFleet(n, failed)
	for i := range in.Resume.Nodes {
		in.Resume.Nodes[i].Phase = workflows.PhaseAdopted
	}
	running := in.Members[:n-failed]
	var names []string
	for _, m := range in.Members {
		names = append(names, m.Node)
	}
	var ans FleetAnswer
	env.RegisterDelayedCallback(func() {
		(&wavesEnv{env: env}).update(tb, UpdateFleetMigrate, "op1", FleetRequest{Module: "web", Nodes: names}, &ans, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		for _, m := range running {
			env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseReleased, Migrated: 1, Modules: 1})
		}
	}, 20*time.Hour)
	env.ExecuteWorkflow(Fleet, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		tb.Fatalf("fleet: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st FleetState
	if err := env.GetWorkflowResult(&st); err != nil {
		tb.Fatal(err)
	}
	if served != n-failed || len(ans.Targets) != n-failed || st.Op == nil || !st.Op.Done {
		tb.Fatalf("served %d, targets %d, op %+v; want %d served and the op done", served, len(ans.Targets), st.Op != nil && st.Op.Done, n-failed)
	}
}

func TestFleetMigrateAtScale(t *testing.T) {
	start := time.Now()
	runScaleMigrate(t, 1000, 40)
	t.Logf("fleet migrate of 960 nodes in 4 waves: %s", time.Since(start))
}
