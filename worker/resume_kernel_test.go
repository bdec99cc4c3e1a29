package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/config"
	"adoption/firewall/marks"
	"adoption/internal/devserver"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
	"adoption/internal/ufwfixture"
	"adoption/internal/wait"
	"adoption/metrics"
	"adoption/nodestate"
	"adoption/workflows"
)

// An agent restarted while Temporal is out of reach: `adopt-worker run`
// resumes the watch its loop kept under state_dir before it dials and, the
// dial failing, keeps running: a marked rule removed while the agent was
// down, and removed again and again while it dials, is put back in the
// node's ruleset (ufw in its own namespace) on each of the watch's
// intervals. Once a dev server starts on the address the agent connects
// and serves the node's activities; when the server goes again the watch
// runs on. /metrics says which of the two the agent is in.
func TestAgentResumesItsWatchWithoutTemporal(t *testing.T) {
	n := fwtest.NewNamedNet(t, "rsm-", "rs", "3a")
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	devserver.Bin(t) // before anything runs: the last part needs it
	for _, cmd := range []string{"iptables-nft-restore", "ip6tables-nft-restore"} {
		fwtest.Run(t, ufwfixture.DefaultDeny(config.MustPorts([]string{"22/tcp"})), "ip", "netns", "exec", n.Node, cmd)
	}
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	port, metricsPort := devserver.FreePort(t), devserver.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	root, state, cfgPath := filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "n1.yaml")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	const every = 2 * time.Second // the watch's interval
	yaml := fmt.Sprintf(`temporal: {address: %q}
docker: {host: "unix://%s/no-docker.sock"}
node: {name: n1, role: member, netns: %s, root: %s, state_dir: %s, management_ports: ["22/tcp"]}
modules:
  - name: web
    ports: ["8080/tcp"]
firewall: {reconcile_interval: %s}
drift: {interval: 5m}
authority: {unsigned: true}
metrics: {listen: "127.0.0.1:%d"}
`, addr, dir, n.Path(n.Node), root, state, every, metricsPort)
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
	if err := st.RecordOpened("web"); err != nil { // web's ports were opened by the node
		t.Fatal(err)
	}

	// The agent before its restart: the workflow's watch keeps web's mark.
	acts := nodeActivities(cfg, cfgPath, io.Discard)
	loop := &watch.Loop{Checks: activities.Checks{Activities: acts}, Records: st, Local: acts.Local, Store: st}
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

	// Down, the mark goes; the agent restarts with no Temporal and stays.
	remove := func() {
		t.Helper()
		if removed, err := m.Close("n1", "web"); err != nil || len(removed) != len(kept) {
			t.Fatalf("remove web's mark: %v, %v", removed, err)
		}
	}
	remove()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--config", cfgPath}, &out, &errb) }()
	// back waits until web's mark is in the ruleset again and the agent
	// logged its repair, the repairs'th, within two of the watch's
	// intervals, the agent running all along.
	const repaired = "marked rule(s) of node n1 had vanished and were put back"
	back := func(what string, repairs int) {
		t.Helper()
		wait.Until(t, 2*every+time.Second, what+": web's mark back and its repair logged", func() (bool, string) {
			select {
			case err := <-done:
				t.Fatalf("%s: the agent exited: %v\n%s", what, err, errb.String())
			default:
			}
			got, err := m.List("n1")
			logged := strings.Count(errb.String(), repaired)
			return err == nil && len(got) == len(kept) && got[0].Mark == kept[0].Mark && logged >= repairs,
				fmt.Sprintf("marks %+v (%v), %d repairs logged\n%s", got, err, logged, errb.String())
		})
	}
	back("at the start", 1)
	for i := range 3 {
		remove()
		back(fmt.Sprintf("removal %d while Temporal is out of reach", i+1), i+2)
	}
	// The agent keeps dialling all the while, and says so.
	wait.For(t, 5*every, "the agent to log two failed dials of Temporal", func() bool {
		return strings.Count(errb.String(), "Temporal is out of reach") >= 2
	})
	log := errb.String()
	if !strings.Contains(log, "resumed the watch of workflow "+wf) {
		t.Fatalf("the agent's log does not say it resumed its watch:\n%s", log)
	}
	if k := strings.Count(log, repaired); k < 4 {
		t.Fatalf("%d repairs logged, want 4 (the start and 3 removals):\n%s", k, log)
	}
	if k := strings.Count(log, "Temporal is out of reach"); k < 2 || !strings.Contains(log, "temporal="+addr) {
		t.Fatalf("%d dial failures logged over %s, want several naming %s:\n%s", k, 5*every, addr, log)
	}
	if got := dialled(t, metricsPort); got != "0" {
		t.Fatalf("adoption_temporal_dialled while dialling: %q, want 0", got)
	}

	// Temporal comes: the agent connects and serves the node's activities.
	srv := devserver.Start(t, port)
	wait.For(t, 90*time.Second, "the agent to connect to the dev server (adopt-worker running)", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the agent exited once Temporal came: %v\n%s", err, errb.String())
		default:
		}
		return strings.Contains(errb.String(), "adopt-worker running")
	})
	if got := dialled(t, metricsPort); got != "1" {
		t.Fatalf("adoption_temporal_dialled once connected: %q, want 1", got)
	}
	plan := planThroughTemporal(t, srv.Addr, wf, "n1")
	if plan.Ref() != cfg.Plan().Ref() {
		t.Fatalf("the plan the agent served: %+v, want %+v", plan.Ref(), cfg.Plan().Ref())
	}

	// Temporal goes again: the connection is lost, the watch runs on.
	srv.Stop()
	remove()
	back("removal after Temporal went away", 5)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the agent stopped by its signal: %v\n%s", err, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the agent did not stop within 15 s of its signal:\n%s", errb.String())
	}
}

// dialled is adoption_temporal_dialled{node="n1"} as the agent's /metrics
// says it now.
func dialled(t *testing.T, port int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, metrics.DialledMetric+`{node="n1"} `); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s:\n%s", metrics.DialledMetric, b)
	return ""
}

// planOfNode is a workflow of this test's own: it asks the node's agent,
// on the node's queue, for its plan (the Plan activity).
func planOfNode(ctx workflow.Context, node string) (*config.Plan, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.NodeQueue(node),
		StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var p config.Plan
	err := workflow.ExecuteActivity(ctx, "Plan", activities.PlanInput{Node: node}).Get(ctx, &p)
	return &p, err
}

// planThroughTemporal runs planOfNode as workflow wf (the one the node's
// owner record names, whose requests the agent serves) and returns what
// the agent answered.
func planThroughTemporal(t *testing.T, addr, wf, node string) *config.Plan {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const queue = "agentloop-test"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(planOfNode, workflow.RegisterOptions{Name: "PlanOfNode"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wf, TaskQueue: queue, WorkflowExecutionTimeout: time.Minute}, "PlanOfNode", node)
	if err != nil {
		t.Fatal(err)
	}
	var p config.Plan
	if err := we.Get(ctx, &p); err != nil {
		t.Fatalf("the node's agent did not serve Plan: %v", err)
	}
	return &p
}
