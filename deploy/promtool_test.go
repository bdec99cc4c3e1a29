package deploy

import (
	"os/exec"
	"strings"
	"testing"

	"adoption/internal/testenv"
)

// promtool (Debian's prometheus package, installed by make deps) accepts
// the alert rules as Prometheus would load them, with no warning.
func TestPromtoolCheckRules(t *testing.T) {
	testenv.NeedTools(t, "promtool")
	out, err := exec.Command("promtool", "check", "rules", "prometheus/alerts.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") || strings.Contains(strings.ToLower(string(out)), "warn") {
		t.Fatalf("promtool check rules prometheus/alerts.yml: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "rules found"); n != 1 {
		t.Fatalf("promtool found no rules:\n%s", out)
	}
}

// promtool check metrics lints the exposition the agent and the
// orchestrator serve (every adoption_* series once each recorder method ran,
// the phase gauge, the build info): names, units, help texts, counters'
// _total. The binaries' live /metrics go through the same check in
// tests/metrics_test.go.
func TestPromtoolCheckMetrics(t *testing.T) {
	testenv.NeedTools(t, "promtool")
	text := exposition(t)
	if out, err := testenv.PromtoolCheckMetrics(text); err != nil {
		t.Fatalf("%v\n%s\n/metrics:\n%s", err, out, text)
	}
	// The check can fail: a counter without _total is named.
	if out, err := testenv.PromtoolCheckMetrics("# HELP adoption_bad a counter\n# TYPE adoption_bad counter\nadoption_bad 1\n"); err == nil {
		t.Fatalf("promtool check metrics accepted a counter without _total:\n%s", out)
	}
}
