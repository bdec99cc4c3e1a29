package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"adoption/workflows"
)

// TestAdoptEndToEnd: `adopt start` takes a default-deny sandbox node to
// adopted; status shows the probed firewall and the custody records; the
// custody store holds the bytes and the history does not; the found
// firewall is left exactly as it was and keeps serving.
func TestAdoptEndToEnd(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "e2ea", 101, srv.Addr())
	before := ruleset(t, n)
	if !reachable(t, n, 80) || reachable(t, n, 8081) {
		t.Fatal("sandbox firewall is not default-deny with 80/tcp allowed")
	}
	startWorker(t, n)

	out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg)
	if code != 0 || !strings.Contains(out, "started node-migration/e2ea") {
		t.Fatalf("adopt start: exit %d\n%s%s", code, out, errs)
	}
	st := waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)

	// The probed firewall, as the kernel holds it.
	if st.Probe == nil || st.Probe.Firewall.Kind != "iptables-nft" {
		t.Fatalf("probe firewall: %+v", st.Probe)
	}
	open := map[string]bool{}
	for _, o := range st.Probe.Firewall.Open {
		if o.Family == "ip" && o.Direction == "input" && o.PortEnd == 0 {
			open[strings.Join([]string{itoa(int(o.Port)), o.Proto}, "/")] = true
		}
	}
	for _, p := range []string{"22/tcp", "80/tcp", "53/udp"} {
		if !open[p] {
			t.Errorf("probe misses open port %s: %+v", p, st.Probe.Firewall.Open)
		}
	}
	if open["8081/tcp"] {
		t.Error("probe reports 8081/tcp open; the firewall drops it")
	}
	if len(st.Probe.Firewall.Tables) < 2 {
		t.Errorf("probe lists %d tables, want ip and ip6 filter", len(st.Probe.Firewall.Tables))
	}

	// Custody: every declared file recorded with the hash of its bytes, the
	// bytes in the store (0600), the state_dir 0700, the adopted marker.
	if len(st.Custody) != len(e2eFiles) {
		t.Fatalf("custody has %d records, want %d: %+v", len(st.Custody), len(e2eFiles), st.Custody)
	}
	for _, r := range st.Custody {
		content, ok := e2eFiles[r.Path]
		if !ok || !r.Found || r.SHA256 != "" || r.Digest != keyedDigest(t, n, content) || r.Size != int64(len(content)) {
			t.Errorf("custody record %+v does not match the file found (by the node's keyed digest, with no plain hash)", r)
			continue
		}
		blob := filepath.Join(n.StateDir, "custody", sha256Hex([]byte(content)))
		b, err := os.ReadFile(blob)
		if err != nil || string(b) != content {
			t.Errorf("custody blob for %s: %v %q", r.Path, err, b)
		}
		if fi, err := os.Stat(blob); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("custody blob mode for %s: %v", r.Path, fi.Mode())
		}
	}
	if fi, err := os.Stat(n.StateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state_dir mode: %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(n.StateDir, "adopted.json")); err != nil {
		t.Errorf("adopted marker missing: %v", err)
	}

	// The found firewall stays exactly as found, and keeps serving.
	if after := ruleset(t, n); after != before {
		t.Errorf("adoption changed the ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !reachable(t, n, 80) || reachable(t, n, 8081) {
		t.Error("the found firewall no longer behaves as before adoption")
	}

	// A request the workflow cannot serve is refused by name, synchronously.
	if _, errs, code := adopt(t, "migrate", n.Name, "nosuch", "--config", n.cfg); code == 0 || !strings.Contains(errs, `module "nosuch" is not in node e2ea's plan`) {
		t.Errorf("migrate of an unknown module: exit %d, %s", code, errs)
	}

	// Every node, from visibility; --details asks each for its modules.
	out, errs, code = adopt(t, "status", "--config", n.cfg, "--details")
	if code != 0 || !strings.Contains(out, "e2ea") || !strings.Contains(out, "adopted") || !strings.Contains(out, "0/1") {
		t.Errorf("status of every node: exit %d\n%s%s", code, out, errs)
	}

	// The secret planted in a declared file is nowhere in the history.
	hist := history(t, srv, n.Name)
	js, err := protojson.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), secretCanary) || strings.Contains(string(raw), secretCanary) {
		t.Fatal("a declared file's content reached the workflow history")
	}
	// Nor is the plain hash of a found file, from which a short secret
	// could be guessed: the node's keyed digest stands for it.
	if strings.Contains(string(raw), sha256Hex([]byte(e2eFiles["/srv/app/app.env"]))) {
		t.Fatal("the plain sha256 of a found file reached the workflow history")
	}
	if !strings.Contains(string(raw), keyedDigest(t, n, e2eFiles["/srv/app/app.env"])) {
		t.Fatal("the history lacks the custody digest: the checks above would prove nothing")
	}
	recordHistory(t, srv, n.Name, "ADOPT_RECORD_HISTORY")
}

// recordHistory writes the node's workflow history to the file named by
// the environment variable, for the replay test (tests/testdata).
func recordHistory(t *testing.T, srv *devServer, node, env string) {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		return
	}
	js, err := protojson.Marshal(history(t, srv, node))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, js, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptRefusedWhileControlDaemonRuns: the predecessor's control daemon
// still running makes adoption refuse, naming it, with nothing taken; once
// it is stopped, `adopt retry NODE` adopts.
func TestAdoptRefusedWhileControlDaemonRuns(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "e2eb", 102, srv.Addr())
	daemon := fakeDaemon(t, "predecessor-sync")
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	st := waitPhase(t, n, workflows.PhaseFailed, 60*time.Second)
	if !strings.Contains(st.LastError, "predecessor-sync") || !strings.Contains(st.LastError, itoa(daemon.Process.Pid)) {
		t.Fatalf("refusal does not name the daemon and its pid %d: %q", daemon.Process.Pid, st.LastError)
	}
	if _, err := os.Stat(filepath.Join(n.StateDir, "custody")); !os.IsNotExist(err) {
		t.Fatalf("a refused adoption took custody anyway: %v", err)
	}
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	if out, errs, code := adopt(t, "retry", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: %s%s", out, errs)
	}
	st = waitPhase(t, n, workflows.PhaseAdopted, 60*time.Second)
	if len(st.Custody) != len(e2eFiles) {
		t.Fatalf("custody after retry: %+v", st.Custody)
	}
}

// TestWorkerKilledMidProbe: the worker dies in the middle of the probe; a
// new worker picks the activity up again and the node reaches adopted.
func TestWorkerKilledMidProbe(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "e2ec", 103, srv.Addr())
	w1 := startWorker(t, n, "ADOPT_FAILPOINTS=probe")
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	select {
	case <-w1.done:
		if code := w1.cmd.ProcessState.ExitCode(); code != 42 {
			t.Fatalf("worker exited with %d, want the failpoint's 42:\n%s", code, w1.log)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not reach the probe failpoint:\n%s", w1.log)
	}
	if st, err := status(t, n); err == nil && st.Phase == workflows.PhaseAdopted {
		t.Fatal("adopted although the only worker died mid-probe")
	}
	startWorker(t, n)
	st := waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if st.Probe == nil || len(st.Custody) != len(e2eFiles) {
		t.Fatalf("state after resume: %+v", st)
	}
}

// TestDevServerRestart: the dev server restarted on the same database file
// still answers status with the same state, and the node keeps its phase.
func TestDevServerRestart(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "e2ed", 104, srv.Addr())
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	before := waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	srv.stop()
	if _, err := status(t, n); err == nil {
		t.Fatal("status answered with the server down: the restart proves nothing")
	}
	srv.start()
	after := waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if len(after.Custody) != len(before.Custody) || after.Custody[0].Digest != before.Custody[0].Digest ||
		after.FirewallKind != before.FirewallKind || len(after.Events) < len(before.Events) {
		t.Fatalf("state changed across the restart:\nbefore %+v\nafter %+v", before, after)
	}
}

func fakeDaemon(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, name)
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func history(t *testing.T, srv *devServer, node string) *historypb.History {
	t.Helper()
	c := srv.client(t)
	it := c.GetWorkflowHistory(context.Background(), workflows.WorkflowID(node), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	return h
}

func itoa(i int) string { return strconv.Itoa(i) }
