package deploy

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"adoption/metrics"
	"adoption/workflows"
)

// The rules and the dashboard are parsed (promtool_test.go has promtool
// check them too), each rule is checked for its parts, and every series
// they name must be one the binaries export (adoption_* from a real registry, temporal_* from
// the SDK's own list of names) or Prometheus' own `up`.
func TestAlertRulesAndDashboardNameRealSeries(t *testing.T) {
	known := exportedSeries(t)
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	var exprs []string
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity or summary", r)
			}
			alerts[r.Alert] = true
			exprs = append(exprs, r.Expr)
		}
	}
	// What the rules must cover.
	for _, want := range []string{"AdoptionFlipPendingPastWindow", "AdoptionWatchdogReverted", "AdoptionDriftPending",
		"AdoptionReconcileRepairs", "AdoptionAgentNotPolling", "AdoptionAgentCutOffFromTemporal"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err = os.ReadFile("grafana/adoption.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana/adoption.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	name := regexp.MustCompile(`\b(adoption_[a-z_]+|temporal_[a-z_]+|up)\b`)
	for _, e := range exprs {
		if strings.Count(e, "(") != strings.Count(e, ")") || strings.Count(e, "{") != strings.Count(e, "}") {
			t.Errorf("unbalanced expression %q", e)
		}
		for _, n := range name.FindAllString(e, -1) {
			if !known[n] {
				t.Errorf("%q names %s, which no binary exports", e, n)
			}
		}
	}
}

// exportedSeries is every series name the registry serves once each
// recorder method ran, the workflow-side phase, the SDK's temporal_* names
// (with the exporter's _total on counters), and `up`.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	body := exposition(t)
	known := map[string]bool{"up": true}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			known[f[2]] = true
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("go list -m go.temporal.io/sdk: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal/common/metrics/constants.go"))
	if err != nil {
		t.Fatal(err)
	}
	// Names are built as TemporalMetricsPrefix + "x" or Other + "_y".
	consts := map[string]string{"TemporalMetricsPrefix": "temporal_"}
	def := regexp.MustCompile(`(?m)^\s*(\w+)\s*=\s*(\w+)\s*\+\s*"([a-z_]+)"`)
	for i := 0; i < 3; i++ {
		for _, d := range def.FindAllStringSubmatch(string(b), -1) {
			if base, ok := consts[d[2]]; ok {
				consts[d[1]] = base + d[3]
			}
		}
	}
	for _, n := range consts {
		known[n], known[n+"_total"] = true, true
	}
	for _, must := range []string{"adoption_phase", "adoption_build_info", "adoption_flip_state", "temporal_num_pollers"} {
		if !known[must] {
			t.Fatalf("%s missing from the exported series: the list is wrong\n%s", must, body)
		}
	}
	return known
}

// exposition is the /metrics text of a real registry once each recorder
// method ran, the workflow-side phase was set and the agent dialled.
func exposition(t *testing.T) string {
	t.Helper()
	m, err := metrics.New("n1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := m.Recorder()
	r.MarkedRules("mail", 1)
	r.ReconcileRepairs(1)
	r.Drift(1)
	r.CutoverStep("mail", "swap", "ok", 0)
	r.PreviewRefused()
	r.WatchdogRevert("n1-1")
	m.SDK().WithTags(map[string]string{"node": "n1", "phase": "adopted"}).Gauge(workflows.PhaseMetric).Update(1)
	m.Dialled(true)
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	return rr.Body.String()
}

// The dashboard has a node variable, every adoption_* series it queries
// that carries a node label (in a real registry's exposition) is filtered
// by it, and a panel shows whether each agent reached Temporal.
func TestDashboardFiltersByNode(t *testing.T) {
	byNode := map[string]bool{}
	for _, line := range strings.Split(exposition(t), "\n") {
		if name, labels, ok := strings.Cut(line, "{"); ok && !strings.HasPrefix(line, "#") && strings.Contains(labels, `node="n1"`) {
			byNode[name] = true
		}
	}
	if !byNode[metrics.DialledMetric] || !byNode["adoption_drift_items"] {
		t.Fatalf("the exposition's node-labelled series are misread: %v", byNode)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name, Type, Definition string }
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile("grafana/adoption.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	variable := false
	for _, v := range dash.Templating.List {
		variable = variable || (v.Name == "node" && v.Type == "query" && strings.Contains(v.Definition, "node"))
	}
	if !variable {
		t.Errorf("the dashboard has no $node variable: %+v", dash.Templating.List)
	}
	dialled := false
	use := regexp.MustCompile(`\b(adoption_[a-z_]+)(\{[^}]*\})?`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range use.FindAllStringSubmatch(tg.Expr, -1) {
				dialled = dialled || m[1] == metrics.DialledMetric
				if byNode[m[1]] && !strings.Contains(m[2], `node=~"$node"`) {
					t.Errorf("panel %q: %s is not filtered by $node: %s", p.Title, m[1], tg.Expr)
				}
			}
		}
	}
	if !dialled {
		t.Errorf("no panel shows %s", metrics.DialledMetric)
	}
}
