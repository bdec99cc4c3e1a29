package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// TestFleetWavesMigrateFlip: four nodes on the dev server in waves [1, 2]
// after the control node. A module no node declares is refused at once;
// `adopt fleet migrate web` migrates the nodes started so far, and the
// next wave starts only once the one before has migrated: e2ewc and e2ewd
// together. `adopt fleet flip` then flips every node, wave by wave.
func TestFleetWavesMigrateFlip(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	var nodes []*node
	for i, name := range []string{"e2ewa", "e2ewb", "e2ewc", "e2ewd"} {
		role := "member"
		if i == 0 {
			role = "control"
		}
		n := upNodeWith(t, sandbox.Spec{Name: name, Index: 170 + i, Role: role, Fleet: "e2ewaves",
			Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), fleetNodePlan)
		startWorker(t, n)
		nodes = append(nodes, n)
	}
	fleetFile := filepath.Join(t.TempDir(), "fleet.yaml")
	body := fmt.Sprintf("temporal:\n  address: %s\nname: e2ewaves\nwaves: [1, 2]\nnodes:\n", srv.Addr())
	for _, n := range nodes {
		body += "  - " + n.cfg + "\n"
	}
	if err := os.WriteFile(fleetFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := adopt(t, "fleet", "start", "--fleet", fleetFile); code != 0 {
		t.Fatalf("fleet start: %s%s", out, errs)
	}
	fleetStatus := func() fleet.FleetState {
		out, errs, code := adopt(t, "fleet", "status", "--fleet", fleetFile, "--json")
		if code != 0 {
			t.Fatalf("fleet status: %s", errs)
		}
		var st fleet.FleetState
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// op runs a fleet migrate or flip and waits until the fleet says it
	// finished, without a failure.
	op := func(want string, args ...string) fleet.FleetState {
		t.Helper()
		out, errs, code := adopt(t, append(append([]string{"fleet"}, args...), "--fleet", fleetFile)...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("fleet %s: exit %d, want %q\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			st := fleetStatus()
			if st.Op != nil && (st.Op.Done || st.Op.Halted != "") {
				if st.Op.Halted != "" || strings.Contains(st.Op.Standing(), "failed") {
					t.Fatalf("fleet %s: %s", strings.Join(args, " "), st.Op.Standing())
				}
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("fleet %s not finished: %+v", strings.Join(args, " "), st.Op)
			}
			time.Sleep(time.Second)
		}
	}

	waitPhase(t, nodes[0], workflows.PhaseAdopted, 90*time.Second)
	out, errs, code := adopt(t, "fleet", "migrate", "nosuch", "--fleet", fleetFile)
	if code != 2 || !strings.Contains(errs, `modules: no node of fleet e2ewaves declares module "nosuch"`) {
		t.Fatalf("fleet migrate nosuch: exit %d, want 2 naming the key\n%s%s", code, out, errs)
	}
	if st := fleetStatus(); st.Op != nil {
		t.Fatalf("a refused migrate started something: %+v", st.Op)
	}

	op("migrate web on e2ewa", "migrate", "web") // wave 0: the control node
	waitPhase(t, nodes[1], workflows.PhaseAdopted, 90*time.Second)
	if st := fleetStatus(); st.Nodes[2].Started || st.Nodes[3].Started {
		t.Fatalf("wave 2 started before wave 1 migrated: %+v", st.Nodes)
	}
	op("migrate web on e2ewa, e2ewb", "migrate", "web") // e2ewa answers at once: done
	waitPhase(t, nodes[2], workflows.PhaseAdopted, 90*time.Second)
	waitPhase(t, nodes[3], workflows.PhaseAdopted, 90*time.Second)
	st := op("migrate web on e2ewa, e2ewb, e2ewc, e2ewd", "migrate", "web")
	events := strings.Join(st.Events, "\n")
	for _, want := range []string{"wave 2 of 2: e2ewc, e2ewd", "fleet migrate web: wave 2: e2ewc, e2ewd"} {
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
	if out, errs, code := adopt(t, "fleet", "flip", "--fleet", fleetFile); code != 0 {
		t.Fatalf("fleet flip: %s%s", out, errs)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for st = fleetStatus(); st.Op == nil || st.Op.Kind != "flip" || st.Op.Halted == ""; st = fleetStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("the flip did not halt on e2ewb: %+v", st.Op)
		}
		time.Sleep(time.Second)
	}
	if h := st.Op.Halted; !strings.Contains(h, "wave 1 halted") || !strings.Contains(h, "e2ewb flip refused by the preview") || !strings.Contains(h, "9999/tcp") {
		t.Errorf("halted: %q, want wave 1 naming e2ewb's refused preview and 9999/tcp", h)
	}
	waitPhase(t, nodes[0], workflows.PhaseConverged, 90*time.Second)
	for _, n := range nodes[2:] {
		if s, err := status(t, n); err != nil || s.Phase != workflows.PhaseAdopted {
			t.Errorf("%s after the halt: %v %v, want adopted (not flipped)", n.Name, s.Phase, err)
		}
	}
	out, _, _ = adopt(t, "fleet", "status", "--fleet", fleetFile)
	if !strings.Contains(out, "FLEET FLIP: HALTED: wave 1 halted") {
		t.Errorf("fleet status does not show the halt:\n%s", out)
	}

	// The port closed by hand again, the flip goes on from where it halted.
	hand("-D")
	st = op("flip on e2ewb, e2ewc, e2ewd", "flip")
	for _, want := range []string{"fleet flip: wave 0: e2ewa", "fleet flip: wave 1: e2ewb", "fleet flip: wave 2: e2ewc, e2ewd"} {
		if !strings.Contains(strings.Join(st.Events, "\n"), want) {
			t.Errorf("no event %q:\n%s", want, strings.Join(st.Events, "\n"))
		}
	}
	for _, n := range nodes {
		waitPhase(t, n, workflows.PhaseConverged, 90*time.Second)
		if !reachable(t, n, 80) {
			t.Errorf("%s converged without serving its module", n.Name)
		}
	}
}
