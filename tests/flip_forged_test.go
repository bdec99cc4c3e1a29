package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/intent"
	"adoption/internal/opkey"
	"adoption/nodestate"
	"adoption/witness"
	"adoption/workflows"
)

// TestFlipRevertsOnAForgedVerdict: while a flip that cuts the management
// port off from outside runs (the witness dials it from the node's peer
// namespace, where the port is dropped from then on), a rogue client with
// namespace access heartbeats forged verdicts on the pending Witness
// activity, over and over: "answered" for this very flip, in clear and
// unsigned, and signed by a key the node does not list. The node takes
// neither: the flip reverts, the ruleset is back byte for byte, and the
// node's record says why.
func TestFlipRevertsOnAForgedVerdict(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "e2eforge", 211, srv, "30s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	startWorker(t, n)
	adoptAndMigrate(t, n)
	before := ruleset(t, n)

	// The way in is cut from outside: the witness's dials to 22/tcp from
	// the peer namespace are dropped.
	cut := []string{
		"add table inet e2ecut",
		"add chain inet e2ecut out { type filter hook output priority 0; policy accept; }",
		"add rule inet e2ecut out ip daddr " + n.Addr + " tcp dport 22 drop",
	}
	for _, c := range cut {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", n.Peer, "nft"}, strings.Fields(c)...)...).CombinedOutput(); err != nil {
			t.Fatalf("nft %s in %s: %v %s", c, n.Peer, err, out)
		}
	}

	stranger, err := opkey.Generate(t.TempDir(), "stranger", "mallory@elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := intent.SignerFromFile(stranger.Path)
	if err != nil {
		t.Fatal(err)
	}
	id := n.Name + "-1" // the node's first flip
	forged := []witness.Verdict{{ID: id, State: witness.Answered, Why: "22/tcp on " + n.Addr}}
	if v, err := (witness.Verdict{ID: id, State: witness.Answered}).Sign(signer, n.Name, "", time.Now()); err == nil {
		forged = append(forged, v)
	} else {
		t.Fatal(err)
	}

	// The rogue: a client of its own, no codec, no key the node lists.
	c := srv.client(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	recorded := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		wfID := workflows.WorkflowID(n.Name)
		for i := 0; ctx.Err() == nil; i++ {
			if act, run := pendingActivity(ctx, c, wfID, "Witness"); act != "" {
				v := forged[i%len(forged)]
				v.At = time.Now().UTC()
				if err := c.RecordActivityHeartbeatByID(ctx, "default", wfID, run, act, v); err == nil {
					mu.Lock()
					recorded++
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	if _, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 && code != 2 {
		stop()
		wg.Wait()
		t.Fatalf("adopt flip: exit %d: %s", code, errs)
	}
	st := waitFor(t, n, "the flip to end", func(st workflows.State) bool {
		return st.Flip != nil && st.Flip.ID == id && st.Flip.State != workflows.FlipStateFlipping
	})
	stop()
	wg.Wait()

	if recorded == 0 {
		t.Fatal("no forged verdict was recorded on a pending Witness activity: the test proves nothing")
	}
	if st.Flip.State != workflows.FlipStateReverted || st.Phase != workflows.PhaseAdopted {
		t.Fatalf("the flip is %s (phase %s, %s) after %d forged verdicts: it must revert", st.Flip.State, st.Phase, st.LastError, recorded)
	}
	rec, err := nodestate.New(n.StateDir).Flip()
	if err != nil || rec == nil {
		t.Fatalf("the node's flip record: %+v %v", rec, err)
	}
	if rec.ID != id || rec.State != nodestate.FlipReverted || !strings.Contains(rec.Reason, "the way in") {
		t.Fatalf("the node's record of flip %s: %s, %q; want reverted for the way in", id, rec.State, rec.Reason)
	}
	if got := ruleset(t, n); got != before {
		t.Fatalf("the ruleset after the revert is not the one before the flip:\nbefore:\n%s\nnow:\n%s", before, got)
	}
	if b, err := os.ReadFile(filepath.Join(n.Root, "etc/ufw/ufw.conf")); err != nil || string(b) != foundUfwConf {
		t.Fatalf("the boot files changed: %q %v", b, err)
	}
	t.Logf("%d forged verdicts recorded on the pending witness; the node reverted: %s", recorded, rec.Reason)
}

// pendingActivity is the ID of the workflow's pending activity of type
// typ, and the run, or "".
func pendingActivity(ctx context.Context, c client.Client, wfID, typ string) (string, string) {
	d, err := c.DescribeWorkflowExecution(ctx, wfID, "")
	if err != nil {
		return "", ""
	}
	for _, p := range d.GetPendingActivities() {
		if p.GetActivityType().GetName() == typ {
			return p.GetActivityId(), d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		}
	}
	return "", ""
}
