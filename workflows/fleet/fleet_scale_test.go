// A fleet of a thousand nodes in the SDK's test environment: how long the
// fleet's own code takes when every node reports at once, as the nodes of
// a fleet migrate's big wave do (go test -bench FleetAtScale).
package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
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
		if d := fleetDetails(st); !strings.Contains(d, "**1000 nodes:** 960 migrating, 40 ended badly") || len(d) > 4000 {
			b.Fatalf("details (%d bytes) do not count the nodes, or are not bounded:\n%s", len(d), d)
		}
	}
}

// The details count the nodes by standing, and say each node not done,
// waiting or ended well in status's words, a line each, those that ended
// badly first.
func TestFleetDetailsLines(t *testing.T) {
	st := &FleetState{Name: "prod", Held: "node m1 failed: boom", Nodes: []FleetNode{
		{NodeProgress: workflows.NodeProgress{Node: "c1", Phase: workflows.PhaseAdopted, Migrated: 2, Modules: 12}, Role: "control", Started: true},
		{NodeProgress: workflows.NodeProgress{Node: "m1"}, Role: "member", Started: true, Ended: "failed: boom", PassedOver: true},
		{NodeProgress: workflows.NodeProgress{Node: "m2"}, Role: "member"},
		{NodeProgress: workflows.NodeProgress{Node: "m3", Phase: workflows.PhaseConverged, Migrated: 1, Modules: 1}, Role: "member", Started: true, Done: true, Ended: "converged"},
		{NodeProgress: workflows.NodeProgress{Node: "m4", Phase: workflows.PhaseAdopted, Migrated: 1, Modules: 1}, Role: "member", Started: true, Done: true},
		{NodeProgress: workflows.NodeProgress{Node: "m5", Phase: workflows.PhaseMigrating, Modules: 1}, Role: "member", Started: true, Ended: "terminated"},
	}}
	want := "**Fleet prod**\n\n> **Held:** node m1 failed: boom\n\n" +
		"**6 nodes:** 1 waiting, 1 adopted, 1 done, 1 converged, 1 ended badly, 1 passed over\n\n" +
		"- m1 (member): failed: boom (passed over), modules 0/0\n" +
		"- m5 (member): terminated, modules 0/1\n" +
		"- c1 (control): adopted, modules 2/12\n"
	if got := fleetDetails(st); got != want {
		t.Errorf("details:\n%s\nwant:\n%s", got, want)
	}
}

// Past detailsLines the lines stop, and the rest are counted: at a
// thousand nodes the details stay a few kilobytes.
func TestFleetDetailsBounded(t *testing.T) {
	st := scaleFleet(1000, 40).Resume
	d := fleetDetails(st)
	lines := strings.Count(d, "\n- ")
	if lines != detailsLines+1 || !strings.Contains(d, "- and 960 more (adopt fleet status") {
		t.Errorf("%d lines, want %d and one saying 960 more:\n%s", lines, detailsLines+1, d)
	}
	if !strings.Contains(d, "- sim00999 (member): failed: boom, modules 0/1\n") || strings.Contains(d, "sim00001 ") {
		t.Errorf("the failed nodes do not come first:\n%s", d)
	}
	t.Logf("details of 1000 nodes: %d bytes", len(d))
}

// A fleet migrate on the same fleet: each wave's requests at once, the
// big wave's hundreds together; every running node is served.
func runScaleMigrate(tb *testing.T, n, failed int) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(relay.New(nil))
	served := 0
	acts := onRelay(env, 10*time.Minute, func(in relay.NodeRequest) (relay.Outcome, error) {
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
	// Each wave in batches of relayBatch: waves of 1, 1, 5, 100 and the rest.
	if want := 4 + (n-failed-107+relayBatch-1)/relayBatch; *acts != want {
		tb.Errorf("the fleet scheduled %d relay activities for %d nodes, want %d (batches of %d)", *acts, n-failed, want, relayBatch)
	}
}

func TestFleetMigrateAtScale(t *testing.T) {
	start := time.Now()
	runScaleMigrate(t, 1000, 40)
	t.Logf("fleet migrate of 960 nodes in 4 waves: %s", time.Since(start))
}

// runFirstTask runs a resumed fleet of n nodes (the first workflow task of
// a run after continue-as-new: the carried state decoded, the handlers set,
// the first details) and cancels it once that task is done. It fails tb
// unless the fleet was cancelled.
func runFirstTask(tb testing.TB, n int, wave bool) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	in := scaleFleet(n, 40)
	if wave {
		env.RegisterActivity(relay.New(nil))
		onRelay(env, time.Hour, func(in relay.NodeRequest) (relay.Outcome, error) { return relay.Outcome{Node: in.Node}, nil })
		op := &FleetOp{ID: "op1", Kind: relay.KindMigrate, Module: "web", Intents: map[string]*intent.Signed{}}
		for i, nd := range in.Resume.Nodes[:n-40] {
			state := opDone
			if w := in.Resume.WaveOf(i); w == 3 {
				state = opWaiting
				payload, err := json.Marshal(intent.Intent{Action: "fleet-migrate", Targets: []intent.Target{{Node: nd.Node, PlanHash: strings.Repeat("ab", 32)}}, Nonce: "n"})
				if err != nil {
					tb.Fatal(err)
				}
				op.Intents[nd.Node] = &intent.Signed{Payload: payload, Signature: make([]byte, 300)}
			}
			op.Nodes = append(op.Nodes, OpNode{Node: nd.Node, Wave: in.Resume.WaveOf(i), State: state})
		}
		in.Resume.Op = op
	}
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(Fleet, in)
	if !env.IsWorkflowCompleted() || !temporal.IsCanceledError(env.GetWorkflowError()) {
		tb.Fatalf("fleet: completed %v, error %v; want cancelled", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

// A fleet cancelled ends cancelled: before, its signal and op coroutines
// looped on an Await that returns at once once cancelled, never yielding,
// until the SDK's deadlock detector failed the task.
func TestFleetCancelledEnds(t *testing.T) {
	runFirstTask(t, 1000, false)
	runFirstTask(t, 1000, true)
}

func BenchmarkFleetFirstTask(b *testing.B) {
	for range b.N {
		runFirstTask(b, 1000, false)
	}
}

// The same with a fleet migrate whose big wave (894 nodes) the new run
// sends: one relay activity a node, each with its node's own signed
// intent (as the CLI signs them: one a node).
func BenchmarkFleetFirstTaskWave(b *testing.B) {
	for range b.N {
		runFirstTask(b, 1000, true)
	}
}

// signedMigrate is a fleet migrate of web on every running node of a
// resumed fleet of n nodes, signed as the CLI signs it (ed25519): once for
// every node (perNode false: an older CLI) or once for each node. It
// returns the encoded bytes of the Update's input, of every relay request
// the fleet sent (the ActivityTaskScheduled inputs of its history) and of
// the largest one.
func signedMigrate(t *testing.T, n int, perNode bool) (update, sent, largest int) {
	signer := testSigner(t)
	in := scaleFleet(n, 0)
	req := FleetRequest{Module: "web"}
	var targets []intent.Target
	for i := range in.Resume.Nodes {
		in.Resume.Nodes[i].Phase = workflows.PhaseAdopted
		req.Nodes = append(req.Nodes, in.Members[i].Node)
		targets = append(targets, intent.Target{Node: in.Members[i].Node, PlanHash: strings.Repeat("ab", 32)})
	}
	args := map[string]string{"module": "web"}
	now := time.Now()
	if perNode {
		ins, err := intent.Each("fleet-migrate", targets, args, now, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req.Intents = map[string]*intent.Signed{}
		for i, one := range ins {
			s, err := intent.Sign(one, signer)
			if err != nil {
				t.Fatal(err)
			}
			req.Intents[targets[i].Node] = &s
		}
	} else {
		one, err := intent.New("fleet-migrate", targets, args, now, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s, err := intent.Sign(one, signer)
		if err != nil {
			t.Fatal(err)
		}
		req.Intent = &s
	}
	size := func(v any) int {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.GetData())
	}
	update = size(req)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	// Encoding a wave's requests, each with the whole intent, takes the
	// test environment seconds within the workflow's task: this measures
	// bytes, not time.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.SetTestTimeout(2 * time.Minute)
	env.RegisterActivity(relay.New(nil))
	onRelay(env, 10*time.Minute, func(r relay.NodeRequest) (relay.Outcome, error) {
		b := size(r)
		sent += b
		largest = max(largest, b)
		var one intent.Intent
		if err := json.Unmarshal(r.Intent.Payload, &one); err != nil {
			t.Error(err)
		}
		if perNode && (len(one.Targets) != 1 || one.Targets[0].Node != r.Node) {
			t.Errorf("node %s was sent an intent for %+v", r.Node, one.Targets)
		}
		return relay.Outcome{Node: r.Node}, nil
	})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, "", workflows.SignalFleetAsk, mock.Anything).Return(nil)
	env.RegisterDelayedCallback(func() {
		(&wavesEnv{env: env}).update(t, UpdateFleetMigrate, "op1", req, nil, nil)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		for _, m := range in.Members {
			env.SignalWorkflow(workflows.SignalNodeProgress, workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseReleased, Migrated: 1, Modules: 1})
		}
	}, 20*time.Hour)
	env.ExecuteWorkflow(Fleet, in)
	if st := fleetResult(t, env); st.Op == nil || !st.Op.Done {
		t.Fatalf("op %+v, want done", st.Op)
	}
	return update, sent, largest
}

// A signed fleet migrate of a thousand nodes: signed once for every node,
// each relay request carries the whole intent, and the fleet's history
// takes over a hundred MB of activity inputs (the server's limit on a
// history is 50 MB); signed per node, each request carries its own, and
// the Update's input (every node's intent, once) stays well under the
// 2 MB limit of a payload.
func TestFleetSignedMigrateSize(t *testing.T) {
	const n = 1000
	u0, sent0, big0 := signedMigrate(t, n, false)
	u1, sent1, big1 := signedMigrate(t, n, true)
	t.Logf("fleet migrate of %d nodes signed once for every node: update %d bytes, relay requests %d bytes in all, %d the largest", n, u0, sent0, big0)
	t.Logf("signed once for each node: update %d bytes, relay requests %d bytes in all, %d the largest", u1, sent1, big1)
	if sent0 < 50<<20 {
		t.Errorf("one intent for every node: %d bytes of requests, want it over 50 MB (what this test guards against)", sent0)
	}
	if big1 > 2<<10 || sent1 > n*(2<<10) {
		t.Errorf("signed per node: the largest request %d bytes, %d in all; want at most 2 KiB each", big1, sent1)
	}
	if u1 > 1<<20 {
		t.Errorf("signed per node: the Update's input is %d bytes, want under 1 MiB", u1)
	}
}
