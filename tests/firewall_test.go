package tests

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/internal/ufwfixture"
	"adoption/internal/wait"
	"adoption/sandbox"
	"adoption/workflows"
)

const controlPlan = `foundation:
  ports:
    registry: 5001/tcp
    store: 5432/tcp
firewall:
  reconcile_interval: 2s
` + e2eModules

// TestGenesisMarksReconcileRelease is the firewall story of a control node,
// end to end: a foundation port collision is reported with its holder and
// nothing is opened; the fixed configuration, sent with `adopt retry`,
// opens the foundation's ports through the found firewall as marked rules
// that real packets pass and iptables-save reads; a marked rule deleted by
// hand is put back by reconcile; release leaves the ruleset byte-identical
// to the one found.
func TestGenesisMarksReconcileRelease(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNodeWith(t, sandbox.Spec{
		Name: "e2ef", Index: 106, Role: "control",
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp"}),
		Closed:  config.MustPorts([]string{"5001/tcp"}), // the predecessor's registry holds the foundation's port
	}, srv.Addr(), controlPlan)
	found := ruleset(t, n)
	if passes(t, n, 5002) || passes(t, n, 5432) {
		t.Fatal("the found firewall already passes the foundation's ports: the test would prove nothing")
	}
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	st := waitFor(t, n, "genesis to fail on the collision", func(st workflows.State) bool { return st.Genesis.State == "failed" })
	if !regexp.MustCompile(`foundation port registry 5001/tcp is held by pid \d+ \(adopt-sandbox\); set foundation.ports.registry`).MatchString(st.Genesis.Error) {
		t.Fatalf("collision not named with holder and key: %q", st.Genesis.Error)
	}
	if strings.Contains(st.Genesis.Error, "5432") {
		t.Fatalf("a free port reported as colliding: %q", st.Genesis.Error)
	}
	if got := ruleset(t, n); got != found {
		t.Fatalf("a failed genesis changed the ruleset:\n%s", got)
	}

	// The operator fixes the configuration and retries: the plan travels.
	fixed, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.cfg, []byte(strings.Replace(string(fixed), "registry: 5001/tcp", "registry: 5002/tcp", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := adopt(t, "retry", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "genesis to succeed", func(st workflows.State) bool { return st.Genesis.State == "done" })
	if len(st.Marks) != 4 { // two ports, in ip and ip6
		t.Fatalf("marks after genesis: %+v", st.Marks)
	}
	if !passes(t, n, 5002) || !passes(t, n, 5432) || passes(t, n, 5001) {
		t.Fatal("the marked rules do not let exactly the foundation's ports through")
	}
	if !reachable(t, n, 80) || !reachable(t, n, 22) {
		t.Fatal("the predecessor's allowed ports stopped answering")
	}
	save := iptablesSave(t, n, "iptables-save")
	if strings.Count(save, `--comment "adoption:e2ef:foundation:5002/tcp"`) != 1 {
		t.Fatalf("iptables-save does not show the mark once:\n%s", save)
	}
	if !strings.Contains(iptablesSave(t, n, "ip6tables-save"), `adoption:e2ef:foundation:5432/tcp`) {
		t.Fatal("ip6tables-save lacks the ip6 mark")
	}

	// Someone deletes a marked rule by hand; reconcile puts it back.
	handle := markHandle(t, n, "adoption:e2ef:foundation:5432/tcp")
	if out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "delete", "rule", "ip", "filter", "ufw-user-input", "handle", handle).CombinedOutput(); err != nil {
		t.Fatalf("delete by hand: %v %s", err, out)
	}
	if passes(t, n, 5432) {
		t.Fatal("5432 still passes after its mark was deleted")
	}
	waitFor(t, n, "reconcile to put the mark back", func(st workflows.State) bool {
		return st.LastReconcile != nil && len(st.LastReconcile.Restored) == 1
	})
	if !passes(t, n, 5432) {
		t.Fatal("reconcile did not restore 5432")
	}
	if c := strings.Count(iptablesSave(t, n, "iptables-save"), "adoption:e2ef:foundation:5432/tcp"); c != 1 {
		t.Fatalf("mark present %d times after reconcile, want 1", c)
	}

	// The found firewall's owner reloads it (as its boot-time service
	// would): every ip mark vanishes at once; reconcile puts them back.
	reload := exec.Command("ip", "netns", "exec", n.Netns, "iptables-restore")
	reload.Stdin = strings.NewReader(ufwfixture.DefaultDeny(n.Allowed))
	if out, err := reload.CombinedOutput(); err != nil {
		t.Fatalf("reload the found firewall: %v %s", err, out)
	}
	if passes(t, n, 5002) {
		t.Fatal("5002 still passes after the reload: the marks did not vanish")
	}
	waitFor(t, n, "reconcile after a reload", func(st workflows.State) bool {
		return st.LastReconcile != nil && len(st.LastReconcile.Restored) == 2
	})
	if !passes(t, n, 5002) || !passes(t, n, 5432) {
		t.Fatal("reconcile did not restore the marks after the reload")
	}

	// Release: every mark gone, the ruleset as found.
	if out, errs, code := adopt(t, "release", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("release: %s%s", out, errs)
	}
	waitPhase(t, n, workflows.PhaseReleased, 60*time.Second)
	// The reload above recreated table ip filter, which moves it after ip6
	// filter in the listing; the order of tables is the reload's doing, so
	// tables are compared in a stable order, each byte for byte.
	if got := ruleset(t, n); sortTables(got) != sortTables(found) {
		t.Fatalf("after release the ruleset differs from the one found:\nfound:\n%s\nnow:\n%s", found, got)
	}
	if _, err := os.Stat(n.StateDir + "/adopted.json"); !os.IsNotExist(err) {
		t.Fatalf("adopted marker still there after release: %v", err)
	}
}

func waitFor(t *testing.T, n *node, what string, ok func(workflows.State) bool) workflows.State {
	t.Helper()
	var st workflows.State
	wait.Until(t, 90*time.Second, what, func() (bool, string) {
		var err error
		if st, err = status(t, n); err == nil && ok(st) {
			return true, ""
		}
		return false, fmt.Sprintf("phase %q, genesis %+v, last error %q, err %v", st.Phase, st.Genesis, st.LastError, err)
	})
	return st
}

func iptablesSave(t *testing.T, n *node, tool string) string {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", n.Netns, tool)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s: %v, stderr %q", tool, err, stderr.String())
	}
	return string(out)
}

func markHandle(t *testing.T, n *node, comment string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "-a", "list", "chain", "ip", "filter", "ufw-user-input").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list chain: %v %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, comment) {
			if i := strings.LastIndex(line, "# handle "); i >= 0 {
				return strings.TrimSpace(line[i+len("# handle "):])
			}
		}
	}
	t.Fatalf("no rule with %q:\n%s", comment, out)
	return ""
}

// sortTables orders the tables of an nft listing (each with the warning
// comment iptables-nft puts above it) by their text.
func sortTables(listing string) string {
	var blocks []string
	var cur strings.Builder
	prevWarning := false
	for _, line := range strings.SplitAfter(listing, "\n") {
		starts := strings.HasPrefix(line, "# Warning") || (strings.HasPrefix(line, "table ") && !prevWarning)
		if starts && cur.Len() > 0 {
			blocks = append(blocks, cur.String())
			cur.Reset()
		}
		cur.WriteString(line)
		prevWarning = strings.HasPrefix(line, "# Warning")
	}
	blocks = append(blocks, cur.String())
	sort.Strings(blocks)
	return strings.Join(blocks, "")
}
