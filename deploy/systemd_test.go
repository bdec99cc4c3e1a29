package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"adoption/internal/testenv"
)

var units = []string{"adopt-agent.service", "adopt-orchestrator.service", "adopt-watchdog.service"}

// installed runs `make install` into a fresh prefix (with real paths, so
// that systemd-analyze finds the binaries the units execute).
func installed(t *testing.T) (unitDir, stateDir string) {
	t.Helper()
	// Needs no root: runs in the unit-only pass too.
	if msg := testenv.Missing("make", "go"); msg != "" {
		t.Fatal(msg)
	}
	dir := t.TempDir()
	stateDir = filepath.Join(dir, "state")
	cmd := exec.Command("make", "-s", "install", "PREFIX="+filepath.Join(dir, "usr"),
		"SYSCONFDIR="+filepath.Join(dir, "etc"), "STATEDIR="+stateDir)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/bin/adopt", "usr/bin/adopt-worker", "etc/adoption/node.example.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	return filepath.Join(dir, "usr/lib/systemd/system"), stateDir
}

// Every unit passes systemd-analyze verify with no complaint at all (it
// only warns about an unknown key, so any output fails the test too); it
// opens each man: page of Documentation= too, from the installed pages.
func TestUnitsVerify(t *testing.T) {
	testenv.NeedTools(t, "systemd-analyze")
	dir, _ := installed(t)
	for _, u := range units {
		cmd := exec.Command("systemd-analyze", "verify", filepath.Join(dir, u))
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(dir, "..", "..", "..", "share", "man")+":") // and the system's
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, out)
		}
	}
}

// The watchdog outlives the agent: no unit dependency ties it to the agent
// in either direction, the agent's stop kills only its main process, and
// the watchdog starts at boot when a flip record exists. Where systemd is
// not PID 1 (CI containers) this is what can be asserted; the agent's
// command line for starting the unit is asserted in worker/.
func TestWatchdogUnitIsIndependentOfTheAgent(t *testing.T) {
	dir, stateDir := installed(t)
	agent, watchdog := parseUnit(t, filepath.Join(dir, "adopt-agent.service")), parseUnit(t, filepath.Join(dir, "adopt-watchdog.service"))
	for _, key := range []string{"Unit.Requires", "Unit.BindsTo", "Unit.PartOf", "Unit.Requisite", "Unit.Wants", "Unit.Upholds", "Unit.PropagatesStopTo", "Unit.StopPropagatedFrom"} {
		if v := watchdog[key]; strings.Contains(v, "adopt-agent") {
			t.Errorf("adopt-watchdog.service %s=%s: stopping the agent would stop a pending revert", key, v)
		}
		if v := agent[key]; strings.Contains(v, "adopt-watchdog") {
			t.Errorf("adopt-agent.service %s=%s ties the watchdog to the agent", key, v)
		}
	}
	want := map[string]map[string]string{
		"adopt-agent.service": {"Service.KillMode": "process", "Service.Restart": "on-failure",
			"Service.Environment": "ADOPT_WATCHDOG_UNIT=adopt-watchdog.service", "Service.User": "root"},
		"adopt-watchdog.service": {"Unit.ConditionPathExists": filepath.Join(stateDir, "flip.json"),
			"Service.Restart": "on-failure", "Install.WantedBy": "multi-user.target", "Unit.StartLimitIntervalSec": "0"},
	}
	got := map[string]map[string]string{"adopt-agent.service": agent, "adopt-watchdog.service": watchdog}
	for u, kv := range want {
		for k, v := range kv {
			if got[u][k] != v {
				t.Errorf("%s: %s=%q, want %q", u, k, got[u][k], v)
			}
		}
	}
	// Custody restores a file exactly (owner, setgid bit, file
	// capabilities) in the agent and in the watchdog's revert; a cutover
	// binds a port below 1024 to see that it is free.
	for u, caps := range map[string][]string{
		"adopt-agent.service": {"CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_DAC_OVERRIDE", "CAP_CHOWN", "CAP_FOWNER",
			"CAP_FSETID", "CAP_SETFCAP", "CAP_NET_BIND_SERVICE"},
		"adopt-watchdog.service": {"CAP_NET_ADMIN", "CAP_DAC_OVERRIDE", "CAP_CHOWN", "CAP_FOWNER", "CAP_FSETID", "CAP_SETFCAP"},
	} {
		have := strings.Fields(got[u]["Service.CapabilityBoundingSet"])
		for _, c := range caps {
			if !slices.Contains(have, c) {
				t.Errorf("%s lacks %s in CapabilityBoundingSet", u, c)
			}
		}
	}
	orch := parseUnit(t, filepath.Join(dir, "adopt-orchestrator.service"))
	if !strings.Contains(orch["Service.ExecStart"], "adopt-worker orchestrate") {
		t.Errorf("adopt-orchestrator.service ExecStart=%q", orch["Service.ExecStart"])
	}
}

// parseUnit reads a unit file into "Section.Key" → value (the last one
// wins, which is enough for these units: none repeats a key it asserts).
func parseUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, section := map[string]string{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			m[section+"."+k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// Agent and watchdog score under 5 in systemd-analyze security (lower is
// more confined), the orchestrator under 2; each is read offline from the
// installed file, so no systemd as PID 1 is needed.
func TestUnitsSecurityScore(t *testing.T) {
	testenv.NeedTools(t, "systemd-analyze")
	dir, _ := installed(t)
	score := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)
	for u, most := range map[string]float64{"adopt-agent.service": 5, "adopt-watchdog.service": 5, "adopt-orchestrator.service": 2} {
		out, _ := exec.Command("systemd-analyze", "security", "--offline=true", filepath.Join(dir, u)).CombinedOutput()
		m := score.FindSubmatch(out)
		if m == nil {
			t.Fatalf("systemd-analyze security %s gave no score:\n%s", u, out)
		}
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v >= most {
			t.Errorf("%s: exposure %s, want under %v", u, m[1], most)
		}
	}
}

// The units behave the systemd way: agent and orchestrator are ready only
// once they poll (Type=notify), a bad flag or configuration stops after one
// try (adopt-worker exits 64 or 78 for them, see worker/exit.go), and the
// agent's state directory is made 0700.
func TestUnitsLifecycle(t *testing.T) {
	dir, _ := installed(t)
	for u, want := range map[string]map[string]string{
		"adopt-agent.service": {"Service.Type": "notify", "Service.RestartPreventExitStatus": "64 78",
			"Service.StateDirectory": "adoption", "Service.StateDirectoryMode": "0700"},
		"adopt-orchestrator.service": {"Service.Type": "notify", "Service.RestartPreventExitStatus": "64 78"},
		"adopt-watchdog.service":     {"Service.Type": "exec", "Service.RestartPreventExitStatus": "64 78"},
	} {
		got := parseUnit(t, filepath.Join(dir, u))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", u, k, got[k], v)
			}
		}
	}
}

// Every unit says where it is documented: the manual page of the
// adopt-worker command its ExecStart runs (as the installed binary writes
// it with `man DIR`, what the packages ship) and a heading of
// docs/operations.md.
func TestUnitsDocumented(t *testing.T) {
	dir, _ := installed(t)
	man := t.TempDir()
	if out, err := exec.Command(filepath.Join(dir, "..", "..", "..", "bin", "adopt-worker"), "man", man).CombinedOutput(); err != nil {
		t.Fatalf("adopt-worker man: %v\n%s", err, out)
	}
	anchors := map[string]map[string]bool{}
	for _, u := range units {
		unit := parseUnit(t, filepath.Join(dir, u))
		docs := strings.Fields(unit["Unit.Documentation"])
		argv := strings.Fields(unit["Service.ExecStart"])
		page := "man:adopt-worker-" + argv[1] + "(1)"
		if !slices.Contains(docs, page) {
			t.Errorf("%s: Documentation=%q lacks %s, the page of the command it runs", u, unit["Unit.Documentation"], page)
		} else if _, err := os.Stat(filepath.Join(man, "adopt-worker-"+argv[1]+".1")); err != nil {
			t.Errorf("%s: Documentation= names %s, which adopt-worker man does not write: %v", u, page, err)
		}
		links := 0
		for _, d := range docs {
			if strings.HasPrefix(d, "https://") {
				links++
				if err := checkRunbookLink(d, anchors); err != "" {
					t.Errorf("%s: Documentation=%s: %s", u, d, err)
				}
			}
		}
		if links == 0 {
			t.Errorf("%s: Documentation=%q links no page of docs/", u, unit["Unit.Documentation"])
		}
	}
}
