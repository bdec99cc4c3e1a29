package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"adoption/config"
	"adoption/internal/ufwfixture"
	"adoption/internal/wait"
	"adoption/sandbox"
	"adoption/workflows"
)

const flipPlan = `modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost mesh\n"
flip:
  confirm_timeout: %s
`

// The boot-time files of a Debian ufw node, as found.
const (
	foundNftablesConf = "#!/usr/sbin/nft -f\n\nflush ruleset\n\ntable inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter;\n\t}\n}\n"
	foundUfwConf      = "# /etc/ufw/ufw.conf\n#\n\n# Set to yes to start on boot. If setting this remotely, be sure to add a rule\n# to allow your remote connection before starting ufw.\nENABLED=yes\n\n# Please use the 'ufw' command to set the loglevel instead of editing this file.\nLOGLEVEL=low\n"
)

func flipNode(t *testing.T, name string, index int, srv *devServer, confirm string) *node {
	t.Helper()
	return flipNodeAs(t, name, index, srv, confirm, "member")
}

// flipFoundation is the foundation port of a control flip node: nothing
// listens there, so it "passes" (a reset, not a timeout) once opened.
const flipFoundation = 5000

// flipNodeAs is flipNode with a role; a control node also raises the
// foundation (one port) at genesis.
func flipNodeAs(t *testing.T, name string, index int, srv *devServer, confirm, role string) *node {
	t.Helper()
	plan := strings.Replace(flipPlan, "%s", confirm, 1)
	if role == "control" {
		plan = fmt.Sprintf("foundation:\n  ports:\n    registry: %d/tcp\n", flipFoundation) + plan
	}
	n := upNodeWith(t, sandbox.Spec{
		Name: name, Index: index, Role: role,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "8080/tcp", "53/udp"}),
		Closed:  config.MustPorts([]string{"8081/tcp"}),
		Files: map[string]string{"/etc/hosts": "127.0.0.1 localhost predecessor\n",
			"/etc/nftables.conf": foundNftablesConf, "/etc/ufw/ufw.conf": foundUfwConf},
	}, srv.Addr(), plan)
	t.Cleanup(func() { stopWatchdog(n) })
	return n
}

// stopWatchdog ends a watchdog the test left behind (one that never gives
// up would retry against a deleted namespace): its pid is in its lock.
func stopWatchdog(n *node) {
	b, err := os.ReadFile(filepath.Join(n.StateDir, "watchdog.lock"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.HasSuffix(exe, "adopt-worker") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func setDrop(t *testing.T, n *node, drop string) {
	t.Helper()
	b, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "flip:\n", "flip:\n  drop: ["+drop+"]\n", 1)
	if err := os.WriteFile(n.cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func adoptAndMigrate(t *testing.T, n *node) {
	t.Helper()
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if _, errs, code := adopt(t, "migrate", n.Name, "web", "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitFor(t, n, "web to migrate", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleMigrated })
}

// TestFlipEndToEnd: the preview names every open port that would close and
// refuses until each is declared or dropped; then the flip replaces the
// found firewall with the mesh's in one step while a client hammers a
// declared port from the peer namespace: no refused or timed-out
// connection, a connection held across the flip still carries data, the
// dropped port stops answering, the node files converge, the predecessor's
// firewall is saved and removed, the node is converged.
func TestFlipEndToEnd(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNodeAs(t, "e2eflip", 120, srv, "30s", "control")
	startWorker(t, n)
	adoptAndMigrate(t, n)
	if !reachable(t, n, 8080) || !reachable(t, n, 80) {
		t.Fatal("the found firewall does not serve 80 and 8080")
	}
	// The node's own records, which its flip gates read: web's cutover is
	// confirmed by the node, and the found firewall's baseline recorded.
	var cutovers map[string]struct{ State string }
	if b, err := os.ReadFile(filepath.Join(n.StateDir, "cutovers.json")); err != nil || json.Unmarshal(b, &cutovers) != nil || cutovers["web"].State != "confirmed" {
		t.Fatalf("the node did not record web's cutover as confirmed: %v %+v", err, cutovers)
	}
	if _, err := os.Stat(filepath.Join(n.StateDir, "baseline.json")); err != nil {
		t.Fatalf("the node recorded no firewall baseline at adoption: %v", err)
	}
	if !passes(t, n, flipFoundation) {
		t.Fatal("the foundation's port does not pass the found firewall after genesis")
	}

	out, errs, code := adopt(t, "preview", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "8080/tcp") || !strings.Contains(out, "53/udp") {
		t.Fatalf("preview should refuse naming 8080/tcp and 53/udp: exit %d\n%s%s", code, out, errs)
	}
	for _, r := range previewReasons(t, n) {
		if strings.HasPrefix(r, "80/tcp") {
			t.Fatalf("80/tcp is declared by module web, yet the preview names it: %s", r)
		}
	}

	setDrop(t, n, `"8080/tcp", "53/udp"`)
	out, _, _ = adopt(t, "preview", n.Name, "--config", n.cfg)
	if !strings.Contains(out, "APPROVED") {
		t.Fatalf("preview with the drops should approve:\n%s", out)
	}

	// Hammer port 80 from the peer for the whole flip.
	hammer := exec.Command("ip", "netns", "exec", n.Peer, filepath.Join(bin, "adopt-sandbox"), "hammer",
		n.Addr+":80", "--every", "5ms", "--for", "8s")
	var hout strings.Builder
	hammer.Stdout, hammer.Stderr = &hout, &hout
	if err := hammer.Start(); err != nil {
		t.Fatal(err)
	}
	answered(t, n.Peer, 80, hammer.Process.Pid)
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: %s%s", out, errs)
	}
	st := waitPhase(t, n, workflows.PhaseConverged, 90*time.Second)
	if err := hammer.Wait(); err != nil {
		t.Fatalf("hammer: %v %s", err, hout.String())
	}
	var h sandbox.HammerResult
	if err := json.Unmarshal([]byte(hout.String()), &h); err != nil {
		t.Fatalf("hammer output %q: %v", hout.String(), err)
	}
	t.Logf("during the flip: %d connections ok, %d refused, %d timed out; held connection alive: %v", h.OK, h.Refused, h.TimedOut, h.Held)
	if h.OK < 100 || h.Refused != 0 || h.TimedOut != 0 || !h.Held {
		t.Fatalf("the flip disturbed a declared port: %+v", h)
	}

	if !reachable(t, n, 80) || !reachable(t, n, 22) || !passes(t, n, flipFoundation) {
		t.Fatal("a declared, management or foundation port stopped answering after the flip")
	}
	if passes(t, n, 8080) || passes(t, n, 8081) {
		t.Fatal("a dropped or undeclared port passes after the flip")
	}
	if st.Flip == nil || st.Flip.State != "committed" || st.Flip.Listing == "" {
		t.Fatalf("flip status: %+v", st.Flip)
	}
	saved, err := os.ReadFile(st.Flip.Listing)
	if err != nil || !strings.Contains(string(saved), "ufw-user-input") {
		t.Fatalf("the predecessor's listing was not saved: %v", err)
	}
	rs := ruleset(t, n)
	if !strings.Contains(rs, "table inet adoption") || strings.Contains(rs, "ufw-user-input") {
		t.Fatalf("after the commit the mesh's table should be in force and ufw's chains gone:\n%s", rs)
	}
	if b, _ := os.ReadFile(filepath.Join(n.Root, "etc/hosts")); string(b) != "127.0.0.1 localhost mesh\n" {
		t.Fatalf("node file not converged: %q", b)
	}
	recordHistory(t, srv, n.Name, "ADOPT_RECORD_FLIP_HISTORY")
	reboot(t, n)
}

// reboot does to the node's firewall what a Debian boot does: the ruleset
// starts empty, nftables.service loads /etc/nftables.conf, then
// ufw.service restores ufw's rules if /etc/ufw/ufw.conf says ENABLED=yes.
// After it, the declared and management ports answer and every port the
// flip dropped stays closed. The files the commit replaced are in custody,
// byte-exact.
func reboot(t *testing.T, n *node) {
	t.Helper()
	ufwConf, err := os.ReadFile(filepath.Join(n.Root, "etc/ufw/ufw.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ufwConf), "\nENABLED=no\n") || strings.Contains(string(ufwConf), "ENABLED=yes") {
		t.Fatalf("after the commit ufw.conf still enables ufw at boot:\n%s", ufwConf)
	}
	if want := strings.Replace(foundUfwConf, "ENABLED=yes", "ENABLED=no", 1); string(ufwConf) != want {
		t.Fatalf("ufw.conf changed beyond ENABLED:\n%s", ufwConf)
	}
	nftConf := filepath.Join(n.Root, "etc/nftables.conf")
	for _, step := range [][]string{{"nft", "flush", "ruleset"}, {"nft", "-f", nftConf}} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", n.Netns}, step...)...).CombinedOutput(); err != nil {
			t.Fatalf("boot step %v: %v\n%s", step, err, out)
		}
	}
	if strings.Contains(string(ufwConf), "ENABLED=yes") {
		for _, fam := range []string{"iptables-restore", "ip6tables-restore"} {
			cmd := exec.Command("ip", "netns", "exec", n.Netns, fam)
			cmd.Stdin = strings.NewReader(ufwfixture.DefaultDeny(config.MustPorts([]string{"22/tcp", "80/tcp", "8080/tcp", "53/udp"})))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ufw at boot: %v\n%s", err, out)
			}
		}
	}
	t.Logf("after the reboot:\n%s", ruleset(t, n))
	if !reachable(t, n, 80) || !reachable(t, n, 22) {
		t.Fatal("after a reboot a declared or management port does not answer")
	}
	if n.Role == "control" && !passes(t, n, flipFoundation) {
		t.Fatal("after a reboot the foundation's port does not pass")
	}
	if passes(t, n, 8080) || passes(t, n, 8081) {
		t.Fatal("after a reboot a dropped or undeclared port passes")
	}
	for p, want := range map[string]string{"/etc/nftables.conf": foundNftablesConf, "/etc/ufw/ufw.conf": foundUfwConf} {
		idx, err := os.ReadFile(filepath.Join(n.StateDir, "custody", "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		var recs map[string]struct {
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal(idx, &recs); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(n.StateDir, "custody", recs[p].SHA256))
		if err != nil || string(b) != want {
			t.Fatalf("custody copy of %s is not the file found: %q %v", p, b, err)
		}
	}
}

func previewReasons(t *testing.T, n *node) []string {
	t.Helper()
	st, err := status(t, n)
	if err != nil || st.LastPreview == nil {
		t.Fatalf("no preview in status: %v", err)
	}
	return st.LastPreview.Reasons
}

// TestFlipRevertsWhenCutOff: the worker dies right after applying the flip,
// so nothing confirms it; the node's watchdog, which needs neither Temporal
// nor the worker, reverts it within confirm_timeout: the listing is
// byte-identical to the one before the flip and the node files are back.
// The workflow, once a worker returns, says the flip was reverted.
func TestFlipRevertsWhenCutOff(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "e2ecut2", 121, srv, "10s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	w1 := startWorker(t, n, "ADOPT_FAILPOINTS=flip-applied")
	adoptAndMigrate(t, n)
	before := ruleset(t, n)
	hostsBefore, _ := os.ReadFile(filepath.Join(n.Root, "etc/hosts"))
	if _, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	select {
	case <-w1.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never reached the flip-applied failpoint:\n%s", w1.log)
	}
	if !strings.Contains(ruleset(t, n), "table inet adoption") {
		t.Fatal("the flip was not in force after the worker died: the test would prove nothing")
	}
	wait.Until(t, 30*time.Second, "the watchdog to restore the ruleset byte for byte", func() (bool, string) {
		got := ruleset(t, n)
		return got == before, "before:\n" + before + "\nnow:\n" + got
	})
	if got := ruleset(t, n); got != before {
		t.Fatalf("the watchdog did not restore the ruleset byte for byte:\nbefore:\n%s\nnow:\n%s", before, got)
	}
	if b, _ := os.ReadFile(filepath.Join(n.Root, "etc/hosts")); string(b) != string(hostsBefore) {
		t.Fatalf("node file not restored: %q", b)
	}
	if !reachable(t, n, 8080) {
		t.Fatal("the found firewall's ports do not answer after the revert")
	}
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startWorker(t, n, "ADOPT_METRICS_LISTEN="+listen)
	st := waitFor(t, n, "the workflow to see the revert", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && st.Flip != nil && st.Flip.State == "reverted"
	})
	if !strings.Contains(st.LastError, "reverted") {
		t.Fatalf("status does not say the flip was reverted: %q", st.LastError)
	}
	// The returning agent reports what the watchdog did while it was gone.
	body := httpGet(t, "http://"+listen+"/metrics")
	node := fmt.Sprintf("node=%q", n.Name)
	if !hasSeries(body, "adoption_flip_state{", node, `state="reverted"`, "} 1") || !hasSeries(body, "adoption_watchdog_reverts_total{", node, "} 1") {
		t.Fatalf("/metrics does not show the watchdog's revert:\n%s", body)
	}
}

// TestFlipRefusedWhenStale: a rule changed by hand between the preview and
// the flip makes the flip refuse as stale, and nothing changes; status says
// not-applied, and the node's record agrees.
func TestFlipRefusedWhenStale(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "e2estale", 122, srv, "30s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	startWorker(t, n, "ADOPT_FAILPOINTS=flip-before-apply=sleep:4s")
	adoptAndMigrate(t, n)
	if _, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitFor(t, n, "the flip to start", func(st workflows.State) bool { return st.Phase == workflows.PhaseFlipping })
	// The node previews inside the flip: edit only once its record says
	// applying (the preview approved, the transaction sleeps in the
	// failpoint), so that the edit falls between the two.
	wait.For(t, 30*time.Second, "the node to record the flip as applying", func() bool {
		var rec struct{ State string }
		b, err := os.ReadFile(filepath.Join(n.StateDir, "flip.json"))
		return err == nil && json.Unmarshal(b, &rec) == nil && rec.State == "applying"
	})
	if out, err := exec.Command("ip", "netns", "exec", n.Netns, "iptables", "-I", "ufw-user-input", "-p", "tcp", "--dport", "9999", "-j", "ACCEPT").CombinedOutput(); err != nil {
		t.Fatalf("hand edit: %v %s", err, out)
	}
	before := ruleset(t, n)
	// Not applied, not "reverted": the node was never changed.
	st := waitFor(t, n, "the stale refusal", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && st.Flip != nil && st.Flip.State == workflows.FlipStateNotApplied
	})
	if rec := flipRecord(t, n); rec["state"] != "not-applied" {
		t.Fatalf("the node's record says %v; want not-applied", rec["state"])
	}
	if !strings.Contains(strings.ToLower(st.LastError), "preview") {
		t.Fatalf("refusal does not say the preview is stale: %q", st.LastError)
	}
	// Stale on the node's own preview, the flip is previewed apart once
	// more: that preview sees the hand-added port, which would close.
	if !strings.Contains(st.LastError, "9999/tcp") {
		t.Fatalf("the second preview does not name the hand-added port: %q", st.LastError)
	}
	if got := ruleset(t, n); got != before {
		t.Fatalf("a stale flip changed the ruleset:\n%s", got)
	}
}

// TestFlipWatchdogRevertsWithoutTemporal: the worker dies between the
// batch and the record that says flipped (failpoint flip-after-batch) and
// Temporal is unreachable: the watchdog, from the record written before
// the batch, reverts by the deadline to the byte-identical ruleset and
// puts the node file back. Once Temporal and a worker are back, the
// workflow says reverted because the node says so.
func TestFlipWatchdogRevertsWithoutTemporal(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "e2ewdog", 123, srv, "10s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	w1 := startWorker(t, n, "ADOPT_FAILPOINTS=flip-after-batch")
	adoptAndMigrate(t, n)
	before := ruleset(t, n)
	hostsBefore, _ := os.ReadFile(filepath.Join(n.Root, "etc/hosts"))
	if _, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	select {
	case <-w1.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never reached the flip-after-batch failpoint:\n%s", w1.log)
	}
	if !strings.Contains(w1.log.String(), "failpoint flip-after-batch: exiting") {
		t.Fatalf("the worker died elsewhere:\n%s", w1.log)
	}
	srv.stop() // Temporal unreachable from here on
	if !strings.Contains(ruleset(t, n), "table inet adoption") {
		t.Fatal("the flip was not in force after the worker died: the test would prove nothing")
	}
	rec := flipRecord(t, n)
	if rec["state"] != "applying" {
		t.Fatalf("the record says %v after a death between batch and record; want applying", rec["state"])
	}
	deadline, err := time.Parse(time.RFC3339Nano, rec["deadline"].(string))
	if err != nil {
		t.Fatal(err)
	}
	waitReverted(t, n, before, deadline.Add(30*time.Second))
	if b, _ := os.ReadFile(filepath.Join(n.Root, "etc/hosts")); string(b) != string(hostsBefore) {
		t.Fatalf("node file not restored: %q", b)
	}
	if !reachable(t, n, 8080) {
		t.Fatal("the found firewall's ports do not answer after the revert")
	}
	if log, _ := os.ReadFile(filepath.Join(n.StateDir, "watchdog.log")); !strings.Contains(string(log), "the watchdog put the firewall") {
		t.Fatalf("the watchdog's log does not say it reverted:\n%s", log)
	}
	srv.start()
	startWorker(t, n)
	st := waitFor(t, n, "the workflow to see the revert", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && st.Flip != nil && st.Flip.State == "reverted"
	})
	if !strings.Contains(st.LastError, "reverted") {
		t.Fatalf("status does not say the flip was reverted: %q", st.LastError)
	}
	if got := ruleset(t, n); got != before {
		t.Fatalf("after the workflow caught up the ruleset is not the one before the flip:\n%s", got)
	}
}

// TestFlipWatchdogRetriesFailedRevert: the worker dies after the flip, and
// the watchdog's first revert fails (injected): it says so loudly, tries
// again and succeeds, byte-identically.
func TestFlipWatchdogRetriesFailedRevert(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "e2ewdretry", 124, srv, "10s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	w1 := startWorker(t, n, "ADOPT_FAILPOINTS=flip-applied,watchdog-revert=fail:1")
	adoptAndMigrate(t, n)
	before := ruleset(t, n)
	if _, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	select {
	case <-w1.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker never reached the flip-applied failpoint:\n%s", w1.log)
	}
	if !strings.Contains(ruleset(t, n), "table inet adoption") {
		t.Fatal("the flip was not in force after the worker died: the test would prove nothing")
	}
	deadline, err := time.Parse(time.RFC3339Nano, flipRecord(t, n)["deadline"].(string))
	if err != nil {
		t.Fatal(err)
	}
	waitReverted(t, n, before, deadline.Add(60*time.Second))
	log, _ := os.ReadFile(filepath.Join(n.StateDir, "watchdog.log"))
	if !strings.Contains(string(log), "REVERT OF FLIP "+n.Name+"-1 FAILED (attempt 1)") || !strings.Contains(string(log), "failpoint watchdog-revert: injected failure") {
		t.Fatalf("the watchdog's log does not show the failed first revert:\n%s", log)
	}
	if !strings.Contains(string(log), "the watchdog put the firewall") {
		t.Fatalf("the watchdog's log does not show the revert that succeeded:\n%s", log)
	}
	if rec := flipRecord(t, n); rec["state"] != "reverted" {
		t.Fatalf("record %v", rec)
	}
}

func flipRecord(t *testing.T, n *node) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.StateDir, "flip.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitReverted waits (until limit, a bound on the wait, not a speed
// assertion) for the ruleset to be the one before the flip, byte for byte.
func waitReverted(t *testing.T, n *node, before string, limit time.Time) {
	t.Helper()
	if d := time.Until(limit); d > 0 {
		wait.Until(t, d, "the ruleset to be the one before the flip, byte for byte", func() (bool, string) {
			got := ruleset(t, n)
			return got == before, "now:\n" + got
		})
	}
	if dl, err := time.Parse(time.RFC3339Nano, flipRecord(t, n)["deadline"].(string)); err == nil {
		t.Logf("ruleset back byte for byte %s after the flip's deadline (a figure, not an assertion)", time.Since(dl).Round(10*time.Millisecond))
	}
	if got := ruleset(t, n); got != before {
		log, _ := os.ReadFile(filepath.Join(n.StateDir, "watchdog.log"))
		t.Fatalf("the watchdog did not restore the ruleset byte for byte:\nbefore:\n%s\nnow:\n%s\nwatchdog log:\n%s", before, got, log)
	}
}
