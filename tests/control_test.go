package tests

// The predecessor's control daemon while the node is adopted: started by
// hand, it is reported within one watch round; migrate and flip are
// refused naming it; stopped again, they go on.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// TestControlDaemonWhileAdopted: with module web migrated and module api
// not, a control daemon started by hand shows in status (pid, how to stop
// it) within one watch round (drift.interval 2s); `adopt migrate api` and
// `adopt flip` are refused naming it, nothing changed; once it is stopped
// the watch says so, and migrate and flip go on.
func TestControlDaemonWhileAdopted(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNodeWith(t, sandbox.Spec{Name: "e2eif6", Index: 175, Role: "control", Files: interferenceFound,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), fmt.Sprintf(interferencePlan, `  - name: api
    ports: ["8081/tcp"]`))
	w := startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: %s%s", out, errs)
	}
	waitFor(t, n, "genesis", func(st workflows.State) bool { return st.Genesis.State == "done" })
	if out, errs, code := adopt(t, "migrate", n.Name, "web", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate web: %s%s", out, errs)
	}
	waitFor(t, n, "web to migrate", func(st workflows.State) bool { return moduleOf(st, "web").State == workflows.ModuleMigrated })
	defer func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", w.log.String())
		}
	}()
	const round = 2 * time.Second // drift.interval of the interference plan
	if st, err := status(t, n); err != nil || len(st.Control) != 0 {
		t.Fatalf("a control daemon before one was started: %+v %v", st.Control, err)
	}
	daemon := fakeDaemon(t, "predecessor-sync")
	pid := itoa(daemon.Process.Pid)
	started := time.Now()
	st := waitFor(t, n, "the control daemon in status", func(st workflows.State) bool { return len(st.Control) > 0 })
	took := time.Since(started)
	t.Logf("control daemon pid %s reported after %s (watch round %s)", pid, took.Round(time.Millisecond), round)
	// One round, plus the relay of its answer to the workflow and the
	// status poll's own interval (300 ms).
	if took > round+time.Second {
		t.Errorf("the control daemon took %s to show, more than one watch round (%s)", took, round)
	}
	if d := st.Control[0]; itoa(d.PID) != pid || d.Exe != "predecessor-sync" || d.Stop == "" {
		t.Errorf("status names %+v, want predecessor-sync pid %s and how to stop it", d, pid)
	}
	out, _, _ := adopt(t, "status", n.Name, "--config", n.cfg)
	if !strings.Contains(out, "predecessor-sync") || !strings.Contains(out, pid) {
		t.Errorf("adopt status does not name the daemon and its pid %s:\n%s", pid, out)
	}

	// migrate: refused at once, naming it; api's port stays closed.
	out, errs, code := adopt(t, "migrate", n.Name, "api", "--config", n.cfg)
	refusal := out + errs
	if code != 2 || !strings.Contains(refusal, "predecessor-sync") || !strings.Contains(refusal, pid) {
		t.Fatalf("migrate api with the control daemon running: exit %d, want 2 naming predecessor-sync pid %s:\n%s", code, pid, refusal)
	}
	t.Logf("migrate refused: %s", headLine(refusal))
	if strings.Contains(iptablesSave(t, n, "iptables-save"), "adoption:"+n.Name+":api:") {
		t.Fatal("a refused migration opened api's port")
	}
	// flip: refused, naming it; the found firewall stays.
	out, errs, code = adopt(t, "flip", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(out+errs, "predecessor-sync") {
		t.Fatalf("flip with the control daemon running: exit %d, want a refusal naming it:\n%s%s", code, out, errs)
	}
	t.Logf("flip refused (exit %d): %s", code, headLine(errs+out))
	if st, _ := status(t, n); st.Phase != workflows.PhaseAdopted || !strings.Contains(ruleset(t, n), "ufw-user-input") {
		t.Fatalf("a refused flip changed the node: phase %s", st.Phase)
	}

	// Stopped: the watch says so, and both go on.
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	stopped := time.Now()
	waitFor(t, n, "the control daemon gone from status", func(st workflows.State) bool { return len(st.Control) == 0 })
	t.Logf("control daemon's stop reported after %s", time.Since(stopped).Round(time.Millisecond))
	if out, errs, code := adopt(t, "migrate", n.Name, "api", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate api after the daemon stopped: exit %d\n%s%s", code, out, errs)
	}
	waitFor(t, n, "api migrated", func(st workflows.State) bool { return moduleOf(st, "api").State == workflows.ModuleMigrated })
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip after the daemon stopped: exit %d\n%s%s", code, out, errs)
	}
	waitPhase(t, n, workflows.PhaseConverged, 120*time.Second)
}

func moduleOf(st workflows.State, name string) workflows.ModuleState {
	for _, m := range st.Modules {
		if m.Name == name {
			return m
		}
	}
	return workflows.ModuleState{}
}

func headLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
