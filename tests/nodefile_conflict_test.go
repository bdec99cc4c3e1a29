package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

const nodeFilePlan = `drift:
  interval: 2s
modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
node_files:
  - path: /etc/ssh/sshd_config.d/10-mesh.conf
    format: spaced
    keep: [Port]
    content: "Port 22\nPasswordAuthentication no\nX11Forwarding no\n"
flip:
  confirm_timeout: 30s
  drop: ["8080/tcp", "53/udp"]
`

// TestFlipNodeFileConflictResolved: a node file (an sshd drop-in) with a
// kept key (Port) and a key the node changed since custody that the mesh
// sets otherwise (PasswordAuthentication). The edit is drift, accepted: the
// node's edit stays a conflict all the same. The preview names the node
// file's fates (kept, changed, the conflict) with no value and refuses; the
// flip is refused before the firewall changes; `adopt resolve --take node`
// decides it; the preview then approves, the flip converges with the
// node's Port and PasswordAuthentication and the mesh's X11Forwarding, and
// is committed, never reverted. No value reaches the history.
func TestFlipNodeFileConflictResolved(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	const (
		sshd      = "/etc/ssh/sshd_config.d/10-mesh.conf"
		nodeValue = "nodecanary7719"
		found     = "Port 2222\nPasswordAuthentication yes\nX11Forwarding yes\n"
		edited    = "Port 2200\nPasswordAuthentication " + nodeValue + "\nX11Forwarding yes\n"
	)
	n := upNodeWith(t, sandbox.Spec{Name: "e2enfile", Index: 193,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "8080/tcp", "53/udp"}),
		Files:   map[string]string{sshd: found, "/etc/nftables.conf": foundNftablesConf, "/etc/ufw/ufw.conf": foundUfwConf},
	}, srv.Addr(), nodeFilePlan)
	t.Cleanup(func() { stopWatchdog(n) })
	startWorker(t, n)
	adoptAndMigrate(t, n)

	path := filepath.Join(n.Root, sshd)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, n, "the edit to show as drift", func(st workflows.State) bool { return driftOf(st, "file") })
	if out, errs, code := adopt(t, "drift", "accept", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("drift accept: %s%s", out, errs)
	}
	waitFor(t, n, "the drift accepted", func(st workflows.State) bool { return len(st.Drift) == 0 })

	out, errs, code := adopt(t, "preview", n.Name, "--config", n.cfg)
	for _, want := range []string{"REFUSED", "NODE FILES", sshd + " (spaced, per key)", "keeps the node's port", "changes passwordauthentication, x11forwarding",
		"CONFLICT on passwordauthentication", "adopt resolve " + n.Name + " " + sshd + " passwordauthentication --take node|mesh"} {
		if !strings.Contains(out, want) {
			t.Errorf("the preview does not say %q: exit %d\n%s%s", want, code, out, errs)
		}
	}
	if strings.Contains(out, nodeValue) {
		t.Fatalf("the preview shows the node's value:\n%s", out)
	}
	brief, errs, code := adopt(t, "brief", n.Name, "--config", n.cfg)
	if code != 0 || !strings.Contains(brief, "CONFLICT on passwordauthentication") || strings.Contains(brief, nodeValue) {
		t.Fatalf("adopt brief: exit %d %s\n%s", code, errs, brief)
	}

	before := ruleset(t, n)
	out, errs, code = adopt(t, "flip", n.Name, "--config", n.cfg)
	t.Logf("flip with the conflict undecided: exit %d\n%s%s", code, out, errs)
	st := waitFor(t, n, "the flip refused", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && strings.Contains(st.LastError, sshd+" key passwordauthentication")
	})
	if st.Flip != nil && st.Flip.State != "" {
		t.Fatalf("a flip refused on a node file's conflict was attempted: %+v", st.Flip)
	}
	if ruleset(t, n) != before || read(t, path) != edited {
		t.Fatal("a flip refused on a node file's conflict changed the node")
	}

	if _, errs, code := adopt(t, "resolve", n.Name, sshd, "port", "--take", "mesh", "--config", n.cfg); code != 2 || !strings.Contains(errs, "has no conflict") {
		t.Fatalf("resolve of a kept key: exit %d %s", code, errs)
	}
	out, errs, code = adopt(t, "resolve", n.Name, sshd, "passwordauthentication", "--take", "node", "--config", n.cfg)
	if code != 0 || !strings.Contains(out, "recorded for the node files") || !strings.Contains(out, "adopt flip "+n.Name) {
		t.Fatalf("resolve: exit %d %s%s", code, out, errs)
	}
	out, errs, code = adopt(t, "preview", n.Name, "--config", n.cfg)
	if code != 0 || !strings.Contains(out, "APPROVED") || !strings.Contains(out, "would hold hmac-sha256:") || strings.Contains(out, "CONFLICT") {
		t.Fatalf("preview after the decision: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: %s%s", out, errs)
	}
	st = waitPhase(t, n, workflows.PhaseConverged, 90*time.Second)
	if st.Flip == nil || st.Flip.State != "committed" || st.FlipAttempts != 1 {
		t.Fatalf("flip status: %+v, attempts %d", st.Flip, st.FlipAttempts)
	}
	if got, want := read(t, path), "Port 2200\nPasswordAuthentication "+nodeValue+"\nX11Forwarding no\n"; got != want {
		t.Fatalf("the node file converged to %q, want %q", got, want)
	}
	raw, err := proto.Marshal(history(t, srv, n.Name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), nodeValue) {
		t.Error("the node's value reached the workflow history")
	}
}
