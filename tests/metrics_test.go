package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/internal/testenv"
	"adoption/sandbox"
	"adoption/workflows"
)

// TestMetricsDuringMigration: the agent started with metrics.listen (and
// log.format json, both through the environment) serves /metrics while a
// module migrates; the scrape finds the SDK's temporal_* series and
// adoption's own with the node's label: the phase, the cutover's steps,
// the module's marked rules, the flip record's state. Its log lines are
// JSON, carry the node, and the cutover's carry module and step.
func TestMetricsDuringMigration(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2emet", 18520
	predecessor(t, name, port)
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 150, Files: cutoverFiles(name),
		Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), cutoverPlan(name, port, ""))
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The phase is the workflow's: it is served by the orchestrator, which
	// runs the workflows, at its own metrics.listen.
	olisten := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv.orch.kill()
	os.Setenv("ADOPT_METRICS_LISTEN", olisten)
	srv.orch = startOrchestrator(t, srv.Addr())
	os.Unsetenv("ADOPT_METRICS_LISTEN")
	w := startWorker(t, n, "ADOPT_METRICS_LISTEN="+listen, "ADOPT_LOG_FORMAT=json")
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	// Scrape while the migration runs, until the status says it is done;
	// the last scrape (after) must have every series.
	var during []string
	st := waitFor(t, n, "the migration", func(st workflows.State) bool {
		during = append(during, httpGet(t, "http://"+listen+"/metrics"))
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("migration failed: %q", st.Modules[0].LastError)
	}
	if len(during) == 0 || !strings.Contains(during[0], "temporal_") {
		t.Fatalf("no scrape during the migration had temporal_ series")
	}
	body := httpGet(t, "http://"+listen+"/metrics")
	node := fmt.Sprintf("node=%q", name)
	orch := httpGet(t, "http://"+olisten+"/metrics")
	for _, want := range [][]string{
		{"temporal_workflow_task", ""},
		{"adoption_phase{", node, `phase="migrating"`},
		{"adoption_phase{", node, `phase="adopted"`, "} 1"},
	} {
		if !hasSeries(orch, want[0], want[1:]...) {
			t.Errorf("the orchestrator's /metrics has no series %s with %v", want[0], want[1:])
		}
	}
	if t.Failed() {
		t.Logf("orchestrator /metrics:\n%s", orch)
	}
	// A restarted orchestrator replays nothing until a node's phase
	// changes: it serves the phase read from visibility at once.
	srv.orch.kill()
	os.Setenv("ADOPT_METRICS_LISTEN", olisten)
	srv.orch = startOrchestrator(t, srv.Addr())
	os.Unsetenv("ADOPT_METRICS_LISTEN")
	var again string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if again = httpGetOK(olisten); hasSeries(again, "adoption_phase{", node, `phase="migrated"`, "} 1") ||
			hasSeries(again, "adoption_phase{", node, `phase="adopted"`, "} 1") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !hasSeries(again, "adoption_phase{", node, "} 1") {
		t.Errorf("the restarted orchestrator serves no adoption_phase for %s:\n%s", name, again)
	}
	for _, want := range [][]string{
		{"temporal_request_total{", ""},
		{"temporal_activity_execution_latency", ""},
		{"adoption_cutover_steps_total{", node, `step="swap"`, `outcome="ok"`, "} 1"},
		{"adoption_cutover_steps_total{", node, `step="healthy"`, `outcome="ok"`},
		{"adoption_cutover_step_seconds_total{", node, `step="swap"`},
		{"adoption_build_info{", "version="},
		// One marked rule per family (ip and ip6) for the module's one port
		// on the input path, and the same on the forward path (its
		// container publishes it).
		{"adoption_marked_rules{", node, fmt.Sprintf("owner=%q", name), "} 4"},
		{"adoption_flip_state{", node, `state="none"`, "} 1"},
		{"adoption_drift_items{", node},
	} {
		if !hasSeries(body, want[0], want[1:]...) {
			t.Errorf("/metrics has no series %s with %v", want[0], want[1:])
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	// Prometheus' own lint of both live expositions: HELP on every
	// series, counters' _total, base units.
	testenv.NeedTools(t, "promtool")
	for who, text := range map[string]string{"the agent's": body, "the orchestrator's": again} {
		if out, err := testenv.PromtoolCheckMetrics(text); err != nil {
			t.Errorf("%s /metrics: %v\n%s", who, err, out)
		}
	}

	w.kill()
	var sawNode, sawStep bool
	sc := bufio.NewScanner(bytes.NewReader(w.log.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line is not JSON (log.format json): %q", sc.Text())
		}
		if rec["node"] == name {
			sawNode = true
		}
		if rec["msg"] == "cutover step done" && rec["node"] == name && rec["module"] == name && rec["step"] == "swap" {
			sawStep = true
		}
	}
	if !sawNode || !sawStep {
		t.Fatalf("log lines with node (%v) and a cutover line with module and step (%v) expected:\n%s", sawNode, sawStep, w.log.String())
	}
}

// httpGetOK is httpGet that tolerates a server not answering yet.
func httpGetOK(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// hasSeries finds a sample line of metric whose text holds every part.
func hasSeries(body, metric string, parts ...string) bool {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, metric) {
			continue
		}
		ok := true
		for _, p := range parts {
			if p != "" && !strings.Contains(line, p) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
