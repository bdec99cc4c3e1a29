package deploy

import (
	"path/filepath"
	"strings"
	"testing"
)

// The agent and the orchestrator check their file (adopt-worker check,
// every problem at once) before they start, with the --config they start
// with; the watchdog does not: its revert must never wait on a check.
func TestUnitsCheckBeforeStart(t *testing.T) {
	for u, check := range map[string]string{
		"adopt-agent.service":        "adopt-worker check --config ",
		"adopt-orchestrator.service": "adopt-worker check --orchestrator --config ",
	} {
		got := parseUnit(t, filepath.Join("systemd", u))
		pre, start := got["Service.ExecStartPre"], got["Service.ExecStart"]
		_, cfg, _ := strings.Cut(start, "--config ")
		if !strings.Contains(pre, check) || cfg == "" || !strings.HasSuffix(pre, "--config "+cfg) {
			t.Errorf("%s: ExecStartPre=%q, want %q with ExecStart's file (ExecStart=%q)", u, pre, check, start)
		}
	}
	if pre := parseUnit(t, filepath.Join("systemd", "adopt-watchdog.service"))["Service.ExecStartPre"]; pre != "" {
		t.Errorf("adopt-watchdog.service: ExecStartPre=%q: a pending flip's revert must not wait on a check", pre)
	}
}
