package tests

// Bad input on the reference node: a node whose own Docker
// engine stops answering. Its chains stay in the node's ruleset; the
// probe and the preview must name the engine, never read it as "no
// containers" or approve published ports' fates, and change nothing.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"adoption/sandbox"
	"adoption/workflows"
)

const refBadPlan = `modules: []
flip:
  drop: ["18025/tcp", "19100/tcp", "9100/tcp"]
  confirm_timeout: 1m
`

// TestReferenceNodeEngineStopped: with the engine up and every published
// port dropped the preview approves; once the node's dockerd is stopped,
// the probe (run on the node) lists the unreachable engine among what it
// cannot judge and the preview refuses naming it; the node's ruleset is
// the same before and after both.
func TestReferenceNodeEngineStopped(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	r := upRefNode(t, "refbad", 162, srv, []sandbox.Service{
		refService("mail", 18025, 8025, true),
		refService("metrics", 19100, 9100, false),
	}, refBadPlan)
	startAgent(t, r)
	n := r.node
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: %s", errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if out, errs, _ := adopt(t, "preview", n.Name, "--config", n.cfg); !strings.Contains(out, "APPROVED") {
		t.Fatalf("with the engine up and every published port dropped the preview should approve (else the test proves nothing):\n%s%s", out, errs)
	}

	stopNodeEngine(t, r)
	before := ruleset(t, n)
	if !strings.Contains(before, "chain DOCKER") {
		t.Fatalf("the stopped engine's chains should still be in the node's ruleset (else the test proves nothing):\n%s", before)
	}

	rep, raw := probeOnNode(t, r)
	if rep.Containers.Available {
		t.Fatalf("the probe reached a stopped engine: %+v", rep.Containers)
	}
	named := false
	for _, u := range rep.Unknowns {
		named = named || strings.Contains(u, "Docker engine cannot be reached") && strings.Contains(u, r.DockerHost())
	}
	if !named {
		t.Errorf("the probe does not name the unreachable engine among what it cannot judge: %q\n%s", rep.Unknowns, raw)
	}
	text, err := r.OnNode(filepath.Join(bin, "adopt-worker"), "probe", "--config", r.cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(text), "UNKNOWN, not judged open or closed") || !strings.Contains(string(text), "Docker engine cannot be reached") {
		t.Errorf("the probe's text does not name the unreachable engine: %v\n%s", err, text)
	}

	out, errs, code := adopt(t, "preview", n.Name, "--config", n.cfg)
	if code == 0 || !strings.Contains(out, "REFUSED") {
		t.Fatalf("with the node's engine stopped the preview must refuse: exit %d\n%s%s", code, out, errs)
	}
	named = false
	for _, reason := range previewReasons(t, n) {
		named = named || strings.Contains(reason, "Docker engine cannot be reached") && strings.Contains(reason, r.DockerHost())
	}
	if !named {
		t.Errorf("the preview does not name the unreachable engine: %q", previewReasons(t, n))
	}
	if after := ruleset(t, n); after != before {
		t.Errorf("the probe or the preview changed the node's ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// stopNodeEngine stops the node's dockerd (it stops its containers and
// keeps its chains) and waits until its socket no longer answers.
func stopNodeEngine(t *testing.T, r *refNode) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.RunDir, "docker.pid"))
	if err != nil {
		t.Fatalf("the node engine's pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("the node engine's pid file holds %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop the node's engine (pid %d): %v", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the node's engine (pid %d) did not stop within 30s", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
