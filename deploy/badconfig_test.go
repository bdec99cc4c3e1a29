package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A bad configuration under the unit stops after one try, the key named in
// the journal. systemd is not PID 1 where the tests run, so what it would
// do is shown from its parts: each unit's own ExecStart (from make install,
// with JOURNAL_STREAM set as systemd sets it) runs the real adopt-worker on
// a file with a bad key; it exits with a status the unit's
// RestartPreventExitStatus lists (so Restart=on-failure does not restart
// it), and its first stderr line is one journal entry at priority err
// (<3>) naming the key, the value and what to do. TestUnitsVerify has
// systemd-analyze verify the same units.
func TestBadConfigurationStopsTheUnit(t *testing.T) {
	dir, stateDir := installed(t)
	etc := filepath.Join(filepath.Dir(stateDir), "etc", "adoption")
	files := map[string]string{
		"node.yaml":         "node: {name: n1, role: chief}\nauthority: {unsigned: true}\n",
		"orchestrator.yaml": "temporal: {address: 127.0.0.1:7233}\nlog: {level: loud}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for u, want := range map[string][]string{
		"adopt-agent.service":        {"node.role", `"chief"`},
		"adopt-watchdog.service":     {"node.role", `"chief"`},
		"adopt-orchestrator.service": {"log.level", `"loud"`},
	} {
		unit := parseUnit(t, filepath.Join(dir, u))
		if unit["Service.Restart"] != "on-failure" {
			t.Errorf("%s: Restart=%q: the test assumes on-failure", u, unit["Service.Restart"])
		}
		argv := strings.Fields(unit["Service.ExecStart"])
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "JOURNAL_STREAM=8:12345")
		if e := unit["Service.Environment"]; e != "" {
			cmd.Env = append(cmd.Env, e)
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %s ran without failing: %v\n%s", u, argv, err, out)
		}
		code := strconv.Itoa(ee.ExitCode())
		if !slices.Contains(strings.Fields(unit["Service.RestartPreventExitStatus"]), code) {
			t.Errorf("%s: a bad configuration exits %s, which RestartPreventExitStatus=%q does not list: systemd would restart it forever",
				u, code, unit["Service.RestartPreventExitStatus"])
		}
		first, _, _ := strings.Cut(string(out), "\n")
		if !strings.HasPrefix(first, "<3>adopt-worker: ") {
			t.Errorf("%s: the first line is not one journal entry at priority err: %q", u, first)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: the journal lines do not name %s:\n%s", u, w, out)
			}
		}
		t.Logf("%s: exit %s (RestartPreventExitStatus=%s), journal: %s", u, code, unit["Service.RestartPreventExitStatus"], strings.TrimSpace(string(out)))
	}
}
