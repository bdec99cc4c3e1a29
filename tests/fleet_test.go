package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

const fleetNodePlan = `modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
flip:
  confirm_timeout: 30s
`

// TestFleetControlNodeFirst: a three-node fleet on the dev server with
// real namespaces. The control node starts first and the pipeline is said
// to be frozen; the second node does not start before the first has
// migrated its module; every node converges after three flips.
func TestFleetControlNodeFirst(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	var nodes []*node
	for i, name := range []string{"e2efa", "e2efb", "e2efc"} {
		role := "member"
		if i == 0 {
			role = "control"
		}
		n := upNodeWith(t, sandbox.Spec{Name: name, Index: 125 + i, Role: role, Fleet: "e2efleet",
			Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), fleetNodePlan)
		startWorker(t, n)
		nodes = append(nodes, n)
	}
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	body := temporalYAML(srv) + "name: e2efleet\nnodes:\n"
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

	waitPhase(t, nodes[0], workflows.PhaseAdopted, 90*time.Second)
	time.Sleep(2 * time.Second) // time enough for a wrong fleet to start the next node
	st := fleetStatus()
	if st.Nodes[1].Started || st.Nodes[2].Started {
		t.Fatalf("a member started before the control node migrated: %+v", st.Nodes)
	}
	if _, err := status(t, nodes[1]); err == nil {
		t.Fatal("the second node has a workflow before the first migrated its module")
	}
	if !strings.Contains(st.Frozen, "pipeline is frozen") {
		t.Fatalf("the fleet does not say the predecessor's pipeline is frozen: %q", st.Frozen)
	}
	out, _, _ := adopt(t, "fleet", "status", "--fleet", fleetFile)
	if !strings.Contains(out, "e2efb") || !strings.Contains(out, "waiting") {
		t.Fatalf("fleet status table:\n%s", out)
	}
	// A retry the fleet would turn away (a node waiting, a name not in the
	// fleet) is refused at once, exit 2, and nothing is sent.
	for _, c := range []struct{ node, why string }{{"e2efb", "it has not failed (waiting)"}, {"nosuch", "not a node of this fleet"}} {
		if _, errs, code := adopt(t, "fleet", "retry", c.node, "--fleet", fleetFile); code != 2 || !strings.Contains(errs, c.why) || !strings.Contains(errs, "nothing was sent") {
			t.Errorf("fleet retry %s: exit %d, want 2 saying %q\n%s", c.node, code, c.why, errs)
		}
	}
	if st := fleetStatus(); strings.Contains(strings.Join(st.Events, "\n"), "retry") {
		t.Errorf("a refused retry reached the fleet: %q", st.Events)
	}

	for i, n := range nodes {
		if i > 0 {
			waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
		}
		if _, errs, code := adopt(t, "migrate", n.Name, "web", "--config", n.cfg); code != 0 {
			t.Fatalf("migrate %s: %s", n.Name, errs)
		}
		waitFor(t, n, n.Name+" to migrate", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleMigrated })
		if i == 0 {
			deadline := time.Now().Add(30 * time.Second)
			for fleetStatus().Frozen != "" && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if f := fleetStatus().Frozen; f != "" {
				t.Fatalf("still frozen after the control node migrated: %q", f)
			}
		}
	}
	for _, n := range nodes {
		if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
			t.Fatalf("flip %s: %s%s", n.Name, out, errs)
		}
	}
	for _, n := range nodes {
		waitPhase(t, n, workflows.PhaseConverged, 90*time.Second)
		if !reachable(t, n, 80) || !strings.Contains(ruleset(t, n), "table inet adoption") {
			t.Fatalf("%s converged without the mesh's ruleset serving its module", n.Name)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st = fleetStatus()
		if st.Nodes[2].Phase == workflows.PhaseConverged && st.Nodes[0].Phase == workflows.PhaseConverged {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the fleet does not show every node converged: %+v", st.Nodes)
}
