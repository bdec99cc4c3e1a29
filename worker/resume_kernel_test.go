package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/config"
	"adoption/firewall/fwtest"
	"adoption/firewall/marks"
	"adoption/internal/testenv"
	"adoption/internal/ufwfixture"
	"adoption/nodestate"
)

// An agent restarted while Temporal is out of reach: `adopt-worker run`
// resumes the watch its loop kept under state_dir before it dials, so a
// marked rule removed while the agent was down is back in the node's
// ruleset (ufw in its own namespace) by the time it gives up dialling.
func TestAgentResumesItsWatchWithoutTemporal(t *testing.T) {
	n := fwtest.NewNamedNet(t, "rsm-", "rs", "3a")
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	for _, cmd := range []string{"iptables-nft-restore", "ip6tables-nft-restore"} {
		fwtest.Run(t, ufwfixture.DefaultDeny(config.MustPorts([]string{"22/tcp"})), "ip", "netns", "exec", n.Node, cmd)
	}
	dir := t.TempDir()
	root, state, cfgPath := filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "n1.yaml")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`temporal: {address: "127.0.0.1:1"}
docker: {host: "unix://%s/no-docker.sock"}
node: {name: n1, role: member, netns: %s, root: %s, state_dir: %s, management_ports: ["22/tcp"]}
modules:
  - name: web
    ports: ["8080/tcp"]
firewall: {reconcile_interval: 1m}
drift: {interval: 5m}
authority: {unsigned: true}
`, dir, n.Path(n.Node), root, state)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	const wf = "node-migration/n1"
	st := nodestate.New(state)
	if err := st.MarkAdopted(nodestate.Marker{Node: "n1", Workflow: wf}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetOwner(nodestate.Owner{Namespace: "default", Workflow: wf}); err != nil {
		t.Fatal(err)
	}

	// The agent before its restart: the workflow's watch keeps web's mark.
	acts := nodeActivities(cfg, cfgPath, io.Discard)
	loop := &watch.Loop{Checks: acts, Records: st, Local: acts.Local, Store: st}
	in := watch.Input{Plan: cfg.Plan().Ref(), Owners: map[string][]config.Port{"web": config.MustPorts([]string{"8080/tcp"})}, Reconcile: true, Bound: time.Second}
	if _, err := (&watch.Watcher{Loop: loop}).Watch(activities.WithWorkflow(context.Background(), wf), in); err != nil {
		t.Fatal(err)
	}
	m := marks.NewMarker(cfg.Node.Netns)
	kept, err := m.List("n1")
	if err != nil || len(kept) == 0 {
		t.Fatalf("web's marks after the watch: %v, %v", kept, err)
	}
	for _, r := range kept {
		if r.Mark != (marks.Mark{Node: "n1", Owner: "web", Port: 8080, Proto: "tcp"}) {
			t.Fatalf("a mark that is not web's: %+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "watch.json")); err != nil {
		t.Fatalf("the watch was not kept: %v", err)
	}

	// Down, the mark goes; the agent restarts with no Temporal.
	if removed, err := m.Close("n1", "web"); err != nil || len(removed) != len(kept) {
		t.Fatalf("remove web's mark: %v, %v", removed, err)
	}
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	err = run(ctx, []string{"run", "--config", cfgPath}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "cannot reach Temporal") {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "resumed the watch of workflow "+wf) || !strings.Contains(errb.String(), "marked rule(s) of node n1 had vanished and were put back") {
		t.Fatalf("the agent's log does not say it resumed and repaired:\n%s", errb.String())
	}
	if got, err := m.List("n1"); err != nil || len(got) != len(kept) || got[0].Mark != kept[0].Mark {
		t.Fatalf("web's marks after the restart: %+v, %v (before: %+v)", got, err, kept)
	}
}
