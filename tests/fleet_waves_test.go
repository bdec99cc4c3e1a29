package tests

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/failpoint"
	"adoption/sandbox"
	"adoption/workflows"
)

// TestFleetWavesMigrateFlip: four nodes on the dev server in waves [1, 2]
// after the control node, wave 2 allowed one failure (max_failed "50%").
// A fleet file with bad waves, budget or ask_after is refused at once with
// the key named, and nothing starts; a module no node declares is refused
// at once. `adopt fleet migrate web` migrates the nodes started so far,
// and the next wave starts only once the one before has migrated: e2ewc
// and e2ewd together. A refused preview halts `adopt fleet flip` at its
// wave, named. e2ewd, terminated and started again outside the fleet, is
// reported by the fleet's first ask round after it (the fleet continued as
// new since it started e2ewd, so only a round can see it). The flip again,
// paused once wave 1 is under way: wave 2 does not start while paused, and
// goes to the end once resumed.
func TestFleetWavesMigrateFlip(t *testing.T) {
	needE2E(t)
	// The server suggests continue-as-new at 150 events (the history
	// recorder's setting), so the fleet, and the nodes, continue as new
	// during the test as a long fleet does on any cluster (the fleet heeds
	// the suggestion: fleet_run.go, due).
	srv := startDevServerArgs(t, "--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=150")
	srv.orch = startOrchestrator(t, srv.Addr())
	f := &wavesFleet{t: t, srv: srv, name: "e2ewaves", file: t.TempDir() + "/fleet.yaml"}
	for i, name := range []string{"e2ewa", "e2ewb", "e2ewc", "e2ewd"} {
		role := "member"
		if i == 0 {
			role = "control"
		}
		n := upNodeWith(t, sandbox.Spec{Name: name, Index: 170 + i, Role: role, Fleet: f.name,
			Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), fleetNodePlan)
		var env []string
		if name == "e2ewb" {
			// Its flip waits 5 s before the apply (the test build's
			// failpoint), so that a pause sent as the fleet flip begins
			// lands while wave 1 is under way.
			env = append(env, failpoint.EnvVar+"=flip-before-apply=sleep:5s")
		}
		startWorker(t, n, env...)
		f.nodes = append(f.nodes, n)
	}
	f.refusesBadFiles()
	f.write("waves: [1, 2]\nmax_failed: \"50%\"\nask_after: 15s\n")
	if out, errs, code := adopt(t, "fleet", "start", "--fleet", f.file); code != 0 {
		t.Fatalf("fleet start: %s%s", out, errs)
	}
	nodes := f.nodes

	waitPhase(t, nodes[0], workflows.PhaseAdopted, 90*time.Second)
	out, errs, code := adopt(t, "fleet", "migrate", "nosuch", "--fleet", f.file)
	if code != 2 || !strings.Contains(errs, `modules: no node of fleet e2ewaves declares module "nosuch"`) {
		t.Fatalf("fleet migrate nosuch: exit %d, want 2 naming the key\n%s%s", code, out, errs)
	}
	if st := f.status(); st.Op != nil {
		t.Fatalf("a refused migrate started something: %+v", st.Op)
	}

	f.op("migrate web on e2ewa", "migrate", "web") // wave 0: the control node
	waitPhase(t, nodes[1], workflows.PhaseAdopted, 90*time.Second)
	if st := f.status(); st.Nodes[2].Started || st.Nodes[3].Started {
		t.Fatalf("wave 2 started before wave 1 migrated: %+v", st.Nodes)
	}
	f.op("migrate web on e2ewa, e2ewb", "migrate", "web") // e2ewa answers at once: done
	waitPhase(t, nodes[2], workflows.PhaseAdopted, 90*time.Second)
	waitPhase(t, nodes[3], workflows.PhaseAdopted, 90*time.Second)
	st := f.op("migrate web on e2ewa, e2ewb, e2ewc, e2ewd", "migrate", "web")
	events := strings.Join(st.Events, "\n")
	for _, want := range []string{"wave 2 of 2: e2ewc, e2ewd (up to 1 may fail)", "fleet migrate web: wave 2: e2ewc, e2ewd"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q:\n%s", want, events)
		}
	}

	// A port opened by hand on e2ewb: its flip's preview refuses, which
	// fails e2ewb; over wave 1's budget (0), the flip halts naming it and
	// wave 2 is not flipped.
	hand := func(verb string) {
		if out, err := exec.Command("ip", "netns", "exec", nodes[1].Netns, "iptables", verb, "ufw-user-input", "-p", "tcp", "--dport", "9999", "-j", "ACCEPT").CombinedOutput(); err != nil {
			t.Fatalf("hand edit %s: %v %s", verb, err, out)
		}
	}
	hand("-I")
	if out, errs, code := adopt(t, "fleet", "flip", "--fleet", f.file); code != 0 {
		t.Fatalf("fleet flip: %s%s", out, errs)
	}
	st = f.wait("the flip to halt on e2ewb", 3*time.Minute, func(st fleetState) bool {
		return st.Op != nil && st.Op.Kind == "flip" && st.Op.Halted != ""
	})
	if h := st.Op.Halted; !strings.Contains(h, "wave 1 halted") || !strings.Contains(h, "e2ewb flip refused by the preview") || !strings.Contains(h, "9999/tcp") {
		t.Errorf("halted: %q, want wave 1 naming e2ewb's refused preview and 9999/tcp", h)
	}
	for _, want := range []string{"fleet flip: wave 0: e2ewa", "fleet flip: wave 1: e2ewb"} {
		if !strings.Contains(strings.Join(st.Events, "\n"), want) {
			t.Errorf("no event %q:\n%s", want, strings.Join(st.Events, "\n"))
		}
	}
	waitPhase(t, nodes[0], workflows.PhaseConverged, 90*time.Second)
	for _, n := range nodes[2:] {
		if s, err := status(t, n); err != nil || s.Phase != workflows.PhaseAdopted {
			t.Errorf("%s after the halt: %v %v, want adopted (not flipped)", n.Name, s.Phase, err)
		}
	}
	out, _, _ = adopt(t, "fleet", "status", "--fleet", f.file)
	if !strings.Contains(out, "FLEET FLIP: HALTED: wave 1 halted") {
		t.Errorf("fleet status does not show the halt:\n%s", out)
	}

	f.replacedOutside(nodes[3])

	// The port closed by hand again, the flip goes on from where it
	// halted (e2ewd, replaced outside the fleet, is left out), paused
	// between its waves.
	hand("-D")
	f.pausedBetweenWaves()
	for _, n := range nodes[:3] {
		waitPhase(t, n, workflows.PhaseConverged, 90*time.Second)
		if !reachable(t, n, 80) {
			t.Errorf("%s converged without serving its module", n.Name)
		}
	}
	// e2ewd failed within wave 2's budget: the fleet ends without it.
	st = f.wait("the fleet to end", time.Minute, func(st fleetState) bool {
		return strings.Contains(strings.Join(st.Events, "\n"), "every node has ended")
	})
	if st.Held != "" {
		t.Errorf("the fleet ended held: %q", st.Held)
	}
	if s, err := status(t, nodes[3]); err == nil {
		t.Logf("e2ewd's own workflow, started outside the fleet: %s", s.Phase)
	}
}
