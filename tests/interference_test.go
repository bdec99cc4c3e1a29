package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/internal/ufwfixture"
	"adoption/internal/wait"
	"adoption/sandbox"
	"adoption/workflows"
)

// Interference while adopted: someone else touches the node between the
// mesh's steps. Short intervals, so each reaction shows within seconds.
const interferencePlan = `foundation:
  ports:
    registry: 18690/tcp
    store: 18691/tcp
firewall:
  reconcile_interval: 2s
drift:
  interval: 2s
modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
%s
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost mesh\n"
flip:
  confirm_timeout: 30s
`

var interferenceFound = map[string]string{
	"/etc/hosts":        "127.0.0.1 localhost predecessor\n",
	"/srv/web/web.conf": "predecessor web\n",
}

// ifNode raises a control node that serves 22 and 80, adopts it (genesis
// opens the foundation's two ports) and migrates module web (80/tcp): six
// marks, three per family.
func ifNode(t *testing.T, srv *devServer, name string, index int, webFiles string) *node {
	t.Helper()
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: index, Role: "control", Files: interferenceFound,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"})}, srv.Addr(), fmt.Sprintf(interferencePlan, webFiles))
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: %s%s", out, errs)
	}
	waitFor(t, n, "genesis", func(st workflows.State) bool { return st.Genesis.State == "done" })
	if out, errs, code := adopt(t, "migrate", n.Name, "web", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate web: %s%s", out, errs)
	}
	waitFor(t, n, "web to migrate", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && st.Modules[0].State == workflows.ModuleMigrated
	})
	return n
}

func ifMarks(node string) []string {
	return []string{"adoption:" + node + ":foundation:18690/tcp", "adoption:" + node + ":foundation:18691/tcp", "adoption:" + node + ":web:80/tcp"}
}

// marksOnce checks every expected mark is in ip and ip6 exactly once.
func marksOnce(t *testing.T, n *node) {
	t.Helper()
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		save := iptablesSave(t, n, tool)
		for _, m := range ifMarks(n.Name) {
			if c := strings.Count(save, `"`+m+`"`); c != 1 {
				t.Errorf("%s shows %s %d times, want once:\n%s", tool, m, c, save)
			}
		}
	}
}

func restoreFound(t *testing.T, n *node, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		cmd := exec.Command("ip", "netns", "exec", n.Netns, tool)
		cmd.Stdin = strings.NewReader(ufwfixture.DefaultDeny(n.Allowed))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s of the found firewall: %v %s", tool, err, out)
		}
	}
}

func driftOf(st workflows.State, kind string) bool {
	for _, d := range st.Drift {
		if d.Kind == kind {
			return true
		}
	}
	return false
}

func hasEvent(st workflows.State, since time.Time, text string) bool {
	for _, e := range st.Events {
		if !e.At.Before(since.Add(-time.Second)) && strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

// checkEvery is interferencePlan's drift.interval and
// firewall.reconcile_interval: how often the node looks.
const checkEvery = 2 * time.Second

// quietWindow is how long "no drift" must hold for it to mean something:
// two and a half of the node's drift checks, each of which would have
// shown a drift by then. The node's checks run in its own loop and report
// a change only, so the window is measured, polling the observable.
const quietWindow = 5 * time.Second

// noDriftFor checks that no drift shows, polling status, for d.
func noDriftFor(t *testing.T, n *node, d time.Duration, why string) {
	t.Helper()
	wait.Quiet(t, d, why+", yet status reports drift", func() bool {
		st, err := status(t, n)
		if err == nil && len(st.Drift) > 0 {
			t.Logf("drift reported: %+v", st.Drift)
			return true
		}
		return false
	})
}

// TestInterference: an adopted control node under three kinds of outside
// interference, each on its own node, side by side on one dev server.
func TestInterference(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)

	// `nft flush ruleset` in the node: every table gone, the found firewall
	// with it, and the node unfiltered. The mesh cannot put back what it
	// never owned (it keeps the found firewall's fingerprint, not its
	// rules), and a mark has no place without ufw's chains. What the
	// product guarantees: the vanished firewall is reported as drift of the
	// found firewall (which blocks the flip), the node stays adopted, and
	// once the owner loads the found firewall again, reconcile puts every
	// mark back, once, and the drift resolves by itself.
	// The first two side by side; the third alone after them: its control
	// daemon is a process on the host, which any adoption running meanwhile
	// would (rightly) refuse for.
	t.Run("firewall", func(t *testing.T) {
		t.Run("nft-flush", func(t *testing.T) {
			t.Parallel()
			n := ifNode(t, srv, "e2eif1", 170, "")
			noDriftFor(t, n, quietWindow, "nothing changed since adoption")
			marksOnce(t, n)
			flushed := time.Now()
			if out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "flush", "ruleset").CombinedOutput(); err != nil {
				t.Fatalf("nft flush ruleset: %v %s", err, out)
			}
			if !passes(t, n, 8081) {
				t.Fatal("after the flush the node still filters: the test would prove nothing")
			}
			st := waitFor(t, n, "the vanished firewall to show as drift", func(st workflows.State) bool { return driftOf(st, "firewall") })
			if !hasEvent(st, flushed, "drift: the found firewall's own rules changed since adoption") {
				t.Errorf("no event names the firewall's drift: %+v", st.Events)
			}
			// Two more reconciles: what does the mesh say about its marks now?
			// No mark may be put anywhere meanwhile, the found firewall gone.
			wait.Quiet(t, 2*checkEvery+time.Second, "a mark was put somewhere with the found firewall gone", func() bool {
				got := ruleset(t, n)
				if strings.Contains(got, "adoption:") {
					t.Logf("ruleset:\n%s", got)
					return true
				}
				return false
			})
			st, err := status(t, n)
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != workflows.PhaseAdopted {
				t.Fatalf("phase %s after the flush, want adopted", st.Phase)
			}
			rec := st.LastReconcile
			t.Logf("after the flush: %d mark(s) in status, last reconcile %+v, drift %+v", len(st.Marks), rec, st.Drift)
			if rec == nil || rec.At.Before(flushed) {
				t.Fatalf("no reconcile since the flush: %+v", rec)
			}
			if got := ruleset(t, n); strings.Contains(got, "adoption:") {
				t.Fatalf("a mark was put somewhere with the found firewall gone:\n%s", got)
			}
			if out, _, _ := adopt(t, "preview", n.Name, "--config", n.cfg); !strings.Contains(out, "REFUSED") || !strings.Contains(out, "drift") {
				t.Errorf("the preview should refuse naming the drift:\n%s", out)
			}

			// The owner loads the found firewall again (ip, then ip6, as found).
			restored := time.Now()
			restoreFound(t, n, "iptables-restore", "ip6tables-restore")
			st = waitFor(t, n, "every mark back and the drift resolved", func(st workflows.State) bool {
				return len(st.Marks) == 6 && len(st.Drift) == 0 && st.LastReconcile != nil && st.LastReconcile.At.After(restored)
			})
			if !hasEvent(st, restored, "put back") {
				t.Errorf("no event says the marks were put back: %+v", st.Events)
			}
			marksOnce(t, n)
			if !passes(t, n, 18690) || !passes(t, n, 18691) || !reachable(t, n, 80) || passes(t, n, 8081) {
				t.Error("after the restore the node does not pass exactly the found ports and the marks")
			}
			custodyIntact(t, n, st, map[string]string{"/etc/hosts": interferenceFound["/etc/hosts"]})
			for p, want := range interferenceFound {
				if b, _ := os.ReadFile(filepath.Join(n.Root, p)); string(b) != want {
					t.Errorf("%s changed: %q", p, b)
				}
			}
		})

		// The found firewall's owner reloads it (iptables-restore of the same
		// rules, as its boot-time service does): the ip marks vanish and
		// reconcile puts them back. The found firewall's own rules are what
		// they were, so this is no drift.
		t.Run("owner-reload", func(t *testing.T) {
			t.Parallel()
			n := ifNode(t, srv, "e2eif2", 171, "")
			noDriftFor(t, n, quietWindow, "nothing changed since adoption")
			reloaded := time.Now()
			restoreFound(t, n, "iptables-restore")
			if passes(t, n, 18690) {
				t.Fatal("18690 still passes after the reload: the marks did not vanish")
			}
			st := waitFor(t, n, "reconcile after the reload", func(st workflows.State) bool {
				return st.LastReconcile != nil && st.LastReconcile.At.After(reloaded) && len(st.LastReconcile.Restored) == 3
			})
			if !hasEvent(st, reloaded, "3 marked rule(s) had vanished and were put back") {
				t.Errorf("no event reports the marks put back: %+v", st.Events)
			}
			marksOnce(t, n)
			if !passes(t, n, 18690) || !passes(t, n, 18691) {
				t.Fatal("reconcile did not restore the marks")
			}
			noDriftFor(t, n, quietWindow+checkEvery/2, "the found firewall was reloaded with exactly its own rules")
		})
	})

	// A predecessor control daemon comes back and rewrites a file in
	// custody: drift within drift.interval, named in status; the flip's
	// preview refuses naming the drift until `adopt drift accept`, after
	// which the preview no longer names it. The daemon's content stays on
	// the node (the operator accepted it), and the content found at
	// adoption stays in the custody store.
	t.Run("control-daemon-rewrite", func(t *testing.T) {
		n := ifNode(t, srv, "e2eif3", 172, "")
		noDriftFor(t, n, quietWindow, "nothing changed since adoption")
		_ = fakeDaemon(t, "predecessor-sync")
		rewritten := "127.0.0.1 localhost predecessor rewritten-by-sync\n"
		hosts := filepath.Join(n.Root, "etc/hosts")
		changed := time.Now()
		if err := os.WriteFile(hosts, []byte(rewritten), 0o640); err != nil {
			t.Fatal(err)
		}
		st := waitFor(t, n, "the rewrite to show as drift", func(st workflows.State) bool { return driftOf(st, "file") })
		if took := time.Since(changed); took > 8*time.Second {
			t.Errorf("drift took %s to show with drift.interval 2s", took)
		}
		if d := st.Drift[0]; d.Path != "/etc/hosts" || d.Now != keyedDigest(t, n, rewritten) || d.Recorded != keyedDigest(t, n, interferenceFound["/etc/hosts"]) {
			t.Errorf("drift item: %+v", d)
		}
		if !hasEvent(st, changed, "drift: /etc/hosts changed since adoption; accept with adopt drift accept "+n.Name) {
			t.Errorf("no event names the drifted file and what to do: %+v", st.Events)
		}
		out, _, _ := adopt(t, "status", n.Name, "--config", n.cfg)
		if !strings.Contains(out, "/etc/hosts") {
			t.Errorf("status does not show the drifted file:\n%s", out)
		}
		out, errs, code := adopt(t, "preview", n.Name, "--config", n.cfg)
		if !strings.Contains(out, "REFUSED") || !strings.Contains(out, "drift(s) not reviewed") || !strings.Contains(out, "adopt drift accept "+n.Name) {
			t.Fatalf("the preview does not refuse naming the drift: exit %d\n%s%s", code, out, errs)
		}
		// The flip is refused at once (exit 2) with the drift as reason.
		if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 2 || !strings.Contains(errs, "drift(s) not reviewed") {
			t.Fatalf("flip with drift pending: exit %d, want 2 naming the drift\n%s%s", code, out, errs)
		}
		stNow, serr := status(t, n)
		if serr != nil {
			t.Fatal(serr)
		}
		st = stNow
		if st.Phase != workflows.PhaseAdopted || !strings.Contains(ruleset(t, n), "ufw-user-input") {
			t.Fatalf("a flip refused for drift changed the node: phase %s", st.Phase)
		}

		if out, errs, code := adopt(t, "drift", "accept", n.Name, "--config", n.cfg); code != 0 {
			t.Fatalf("drift accept: %s%s", out, errs)
		}
		st = waitFor(t, n, "the drift accepted", func(st workflows.State) bool {
			return len(st.Drift) == 0 && hasEvent(st, changed, "drift accepted")
		})
		out, _, _ = adopt(t, "preview", n.Name, "--config", n.cfg)
		if strings.Contains(strings.ToLower(out), "drift") {
			t.Fatalf("after drift accept the preview still names drift:\n%s", out)
		}
		if !strings.Contains(out, "APPROVED") {
			t.Errorf("with web migrated and the drift accepted the preview should approve:\n%s", out)
		}
		noDriftFor(t, n, quietWindow, "the drift was accepted")
		if b, _ := os.ReadFile(hosts); string(b) != rewritten {
			t.Errorf("the accepted content was not kept on the node: %q", b)
		}
		for _, r := range st.Custody {
			if r.Path == "/etc/hosts" && r.Digest != keyedDigest(t, n, rewritten) {
				t.Errorf("custody of /etc/hosts not renewed by the accept: %+v", r)
			}
		}
		if b, err := os.ReadFile(filepath.Join(n.StateDir, "custody", sha256Hex([]byte(interferenceFound["/etc/hosts"])))); err != nil || string(b) != interferenceFound["/etc/hosts"] {
			t.Errorf("the content found at adoption is gone from the custody store: %v", err)
		}
		marksOnce(t, n)
	})
}

// TestInterferenceMigratedFileIsNotDrift: migrating a module converges its
// declared files to the mesh's content. That is the mesh's own approved
// change, not drift: status must not report it, and it must not block the
// flip's preview.
func TestInterferenceMigratedFileIsNotDrift(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := ifNode(t, srv, "e2eif4", 173, `    files:
      - path: /srv/web/web.conf
        content: "mesh web\n"`)
	if b, _ := os.ReadFile(filepath.Join(n.Root, "srv/web/web.conf")); string(b) != "mesh web\n" {
		t.Fatalf("web's file was not converged: %q", b)
	}
	noDriftFor(t, n, quietWindow+checkEvery, "the only change since adoption is module web's own file, converged by its migration")
	out, _, _ := adopt(t, "preview", n.Name, "--config", n.cfg)
	if strings.Contains(strings.ToLower(out), "drift") {
		t.Fatalf("the preview names drift for a migrated module's own file:\n%s", out)
	}
}
