package tests

// The operator's CLI against a real dev server, on its failure paths: a
// request to a node whose agent or worker is down is delivered and said so,
// or reported as not delivered and never runs; refusals are synchronous
// with exit 2; a converged node stays converged; the overview answers with
// most nodes agentless; a typo in wait fails at once.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/internal/wait"
	"adoption/workflows"
)

// cliError is what the CLI prints under --json when it fails.
type cliError struct {
	Error    string   `json:"error"`
	Kind     string   `json:"kind"`
	ExitCode int      `json:"exit_code"`
	Reasons  []string `json:"reasons"`
}

// adoptBounded runs the CLI and fails the test if it has not returned
// within bound: the point is that it never hangs, not how fast it is.
func adoptBounded(t *testing.T, bound time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var out, errb strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "adopt"), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("adopt %s did not return within %s (it must never hang)\n%s%s", strings.Join(args, " "), bound, out.String(), errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func hasEventText(st workflows.State, text string) bool {
	for _, e := range st.Events {
		if strings.Contains(e.Text, text) {
			return true
		}
	}
	return false
}

func moduleState(st workflows.State, name string) string {
	for _, m := range st.Modules {
		if m.Name == name {
			return m.State
		}
	}
	return "absent"
}

// TestCLIDeliverOrSaySo: (1) a node whose agent never started: status says
// so at once (no agent polling, the pending probe, NEXT starts the agent);
// a migrate is accepted and says it runs when the agent is back, and it
// does. (2) Every worker killed: a release is reported as not delivered
// within its bound, and when the workers come back it never runs.
func TestCLIDeliverOrSaySo(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	a := upNode(t, "clia", 200, srv.Addr())
	b := upNode(t, "clib", 201, srv.Addr())
	wb := startWorker(t, b) // serves the workflow queue; node a has no agent yet

	if out, errs, code := adopt(t, "start", a.Name, "--config", a.cfg); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errs)
	}
	// The workflow runs (b's worker) and waits for a's agent.
	var out, errs string
	var code int
	wait.Until(t, 60*time.Second, "status to show the pending probe", func() (bool, string) {
		out, errs, code = adoptBounded(t, 60*time.Second, nil, "status", a.Name, "--config", a.cfg)
		return code == 0 && strings.Contains(out, "PENDING: step Probe"), fmt.Sprintf("exit %d\n%s%s", code, out, errs)
	})
	for _, want := range []string{"AGENT: no agent polls task queue adoption-node-clia", "NEXT: start node clia's agent"} {
		if !strings.Contains(out, want) {
			t.Errorf("status of an agentless node lacks %q:\n%s", want, out)
		}
	}

	out, errs, code = adoptBounded(t, 60*time.Second, nil, "migrate", a.Name, "app", "--config", a.cfg)
	if code != 0 || !strings.Contains(out, "accepted") || !strings.Contains(out, "it runs when node clia's agent is back") {
		t.Fatalf("migrate with the agent down: exit %d, want 0 with \"accepted; it runs when node clia's agent is back\"\n%s%s", code, out, errs)
	}
	wa := startWorker(t, a)
	waitFor(t, a, "the accepted migrate to run once the agent is back", func(st workflows.State) bool {
		return moduleState(st, "app") == workflows.ModuleMigrated
	})

	// Every worker down: nothing can accept a request. The release is
	// reported as not delivered, within its bound.
	wa.kill()
	wb.kill()
	srv.orch.kill() // the workflows run in the orchestrator: it is a worker too
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "release", a.Name, "--config", a.cfg, "--accept-timeout", "4s")
	if code != 1 || !strings.Contains(errs, "not delivered") || !strings.Contains(errs, "will not run") {
		t.Fatalf("release with every worker down: exit %d, want 1 and \"not delivered ... will not run\"\n%s%s", code, out, errs)
	}
	srv.orch = startOrchestrator(t, srv.Addr())
	startWorker(t, a)
	startWorker(t, b)
	// Once a worker serves the workflow again, a request is answered: a
	// retry with nothing to retry is refused, which proves the workflow
	// has taken in what was waiting for it, the late release included.
	wait.Until(t, 60*time.Second, "retry with nothing failed to be refused once the workers were back", func() (bool, string) {
		out, errs, code = adoptBounded(t, 60*time.Second, nil, "retry", a.Name, "--config", a.cfg)
		return code == 2, fmt.Sprintf("exit %d\n%s%s", code, out, errs)
	})
	st, err := status(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != workflows.PhaseAdopted || hasEventText(st, "queued release") || len(st.Queue) != 0 {
		t.Fatalf("the release reported as not delivered ran anyway: phase %s, queue %+v, events %+v", st.Phase, st.Queue, st.Events)
	}
	if len(st.Marks) == 0 {
		t.Fatal("node clia has no marked rules: the release check above would prove nothing")
	}
}

// TestCLIRefusesAtOnce: on an adopted node with a module not migrated,
// flip, retry with nothing failed, preview and migrate of an unknown
// module are refused at once with exit 2 and the reasons; a typo in wait
// fails at once with exit 3; no configuration, an unknown host and a
// missing namespace are said plainly.
func TestCLIRefusesAtOnce(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "clir", 202, srv.Addr())
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	before := ruleset(t, n)

	out, errs, code := adoptBounded(t, 60*time.Second, nil, "flip", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(errs, "module app is pending, not migrated") {
		t.Errorf("flip before migration: exit %d, want 2 naming module app\n%s%s", code, out, errs)
	}
	// The CLI tells a refusal from a failure by asking the server for the
	// Update's outcome again: a refused one must be unknown there
	// (NotFound), not merely "taken as a refusal" for want of an answer.
	if strings.Contains(errs, "taken as a refusal") {
		t.Errorf("the server did not say the refused flip was refused (NotFound for its outcome):\n%s", errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "flip", n.Name, "--config", n.cfg, "--json")
	var je cliError
	if err := json.Unmarshal([]byte(errs), &je); err != nil || out != "" || code != 2 || je.Kind != "refused" || je.ExitCode != 2 || len(je.Reasons) == 0 {
		t.Errorf("flip --json: exit %d, %v, %+v\n%s%s", code, err, je, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "retry", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(errs, "nothing to retry") {
		t.Errorf("retry with nothing failed: exit %d, want 2\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "preview", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "module app") {
		t.Errorf("a refusing preview: exit %d, want 2\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "migrate", n.Name, "nosuch", "--config", n.cfg)
	if code != 2 || !strings.Contains(errs, `module "nosuch" is not in node clir's plan`) || strings.Contains(errs, "taken as a refusal") {
		t.Errorf("migrate of an unknown module: exit %d, want 2, known refused\n%s%s", code, out, errs)
	}
	st, err := status(t, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Queue) != 0 || st.Phase != workflows.PhaseAdopted || moduleState(st, "app") != workflows.ModulePending {
		t.Errorf("a refused request changed the workflow: phase %s, queue %+v, modules %+v", st.Phase, st.Queue, st.Modules)
	}
	if after := ruleset(t, n); after != before {
		t.Errorf("refused requests changed the node's ruleset:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// wait: a value that is no phase or state fails at once, naming it.
	for _, bad := range [][]string{
		{"--module", "app", "--state", "migratd"},
		{"--phase", "convergd"},
		{"--genesis", "ok"},
	} {
		args := append([]string{"wait", n.Name, "--config", n.cfg, "--timeout", "10m"}, bad...)
		out, errs, code := adoptBounded(t, 60*time.Second, nil, args...)
		if code != 3 || !strings.Contains(errs, bad[len(bad)-1]) {
			t.Errorf("adopt %s: exit %d, want 3 naming %q\n%s%s", strings.Join(args, " "), code, bad[len(bad)-1], out, errs)
		}
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "wait", n.Name, "--config", n.cfg, "--module", "nosuch", "--state", "migrated", "--timeout", "10m")
	if code != 3 || !strings.Contains(errs, `no module "nosuch"`) {
		t.Errorf("wait for an unknown module: exit %d, want 3\n%s%s", code, out, errs)
	}

	// Plain messages.
	out, errs, code = adoptBounded(t, 60*time.Second, []string{"ADOPT_CONFIG="}, "start", n.Name)
	if code != 3 || !strings.Contains(errs, "no configuration given") {
		t.Errorf("start with no configuration: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "status", n.Name, "--config", n.cfg, "--namespace", "nosuchns")
	if code != 1 || !strings.Contains(errs, `namespace "nosuchns" (from --namespace) does not exist`) {
		t.Errorf("status in a missing namespace: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, []string{"TEMPORAL_TLS=false"}, "status", n.Name, "--address", "nosuchhost.invalid:7233")
	if code != 1 || !strings.Contains(errs, `cannot resolve host "nosuchhost.invalid"`) {
		t.Errorf("status at an unknown host: exit %d\n%s%s", code, out, errs)
	}
	// TEMPORAL_NAMESPACE is read as Temporal's tools read it, and the
	// --namespace flag wins over it.
	out, errs, code = adoptBounded(t, 60*time.Second, []string{"TEMPORAL_NAMESPACE=nosuchns"}, "status", n.Name, "--config", n.cfg)
	if code != 1 || !strings.Contains(errs, "TEMPORAL_NAMESPACE") {
		t.Errorf("TEMPORAL_NAMESPACE not honoured: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, []string{"TEMPORAL_NAMESPACE=nosuchns"}, "status", n.Name, "--config", n.cfg, "--namespace", "default")
	if code != 0 || !strings.Contains(out, "/namespaces/default/workflows/") {
		t.Errorf("--namespace over TEMPORAL_NAMESPACE: exit %d\n%s%s", code, out, errs)
	}
}

// TestCLIConvergedStaysConverged: once a node converged, `adopt start`
// refuses (exit 2), a request says the node is converged and suggests no
// start; --readopt starts, and the adoption refuses the mesh's own table as
// a found firewall, changing nothing.
func TestCLIConvergedStaysConverged(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := flipNode(t, "clic", 203, srv, "30s")
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	startWorker(t, n)
	adoptAndMigrate(t, n)
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: exit %d\n%s%s", code, out, errs)
	}
	waitPhase(t, n, workflows.PhaseConverged, 120*time.Second)
	converged := ruleset(t, n)

	out, errs, code := adoptBounded(t, 60*time.Second, nil, "start", n.Name, "--config", n.cfg)
	if code != 2 || !strings.Contains(errs, "converged") || !strings.Contains(errs, "--readopt") {
		t.Fatalf("start on a converged node: exit %d, want 2\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "migrate", n.Name, "web", "--config", n.cfg)
	if code != 2 || !strings.Contains(errs, "converged") || strings.Contains(errs, "adopt start") {
		t.Fatalf("migrate on a converged node: exit %d, want 2, saying converged and suggesting no start\n%s%s", code, out, errs)
	}
	if after := ruleset(t, n); after != converged {
		t.Fatalf("refused requests changed the converged node's ruleset")
	}

	out, errs, code = adoptBounded(t, 60*time.Second, nil, "start", n.Name, "--config", n.cfg, "--readopt")
	if code != 0 {
		t.Fatalf("start --readopt: exit %d\n%s%s", code, out, errs)
	}
	st := waitPhase(t, n, workflows.PhaseFailed, 90*time.Second)
	if !strings.Contains(st.LastError, "table inet adoption, the mesh's own firewall") {
		t.Fatalf("re-adoption did not refuse the mesh's table as a found firewall: %q", st.LastError)
	}
	if after := ruleset(t, n); after != converged {
		t.Fatalf("the refused re-adoption changed the ruleset:\nbefore:\n%s\nafter:\n%s", converged, after)
	}
}

// TestCLIStatusOverview: 50 node workflows whose agents never started and
// one real node: `adopt status` returns (bounded generously: it must not
// hang), lists every node with "?"-free phases from visibility and asks no
// node; `--details` says which agents poll; it filters by phase; status of
// one agentless node names the missing agent.
func TestCLIStatusOverview(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNode(t, "clio", 204, srv.Addr())
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: exit %d\n%s%s", code, out, errs)
	}
	c := srv.client(t)
	const agentless = 50
	for i := range agentless {
		node := fmt.Sprintf("clio%02d", i)
		plan := config.Plan{Node: node, Role: "member", Modules: []config.ModulePlan{{Name: "web", Ports: config.MustPorts([]string{"80/tcp"})}}}
		if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: workflows.WorkflowID(node), TaskQueue: workflows.TaskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrNode.ValueSet(node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
		}, workflows.NodeWorkflow, workflows.Input{Plan: plan}); err != nil {
			t.Fatal(err)
		}
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)

	type summary struct {
		Node, Phase, Agent string
		Migrated, Modules  *int
	}
	var sums []summary
	overview := func(args ...string) {
		t.Helper()
		// Visibility may lag the starts and the phase a little.
		wait.Until(t, 60*time.Second, fmt.Sprintf("status overview %v to list %d nodes, %s adopted", args, agentless+1, n.Name), func() (bool, string) {
			out, errs, code := adoptBounded(t, 120*time.Second, nil, append([]string{"status", "--config", n.cfg, "--json"}, args...)...)
			if code != 0 {
				t.Fatalf("status overview %v: exit %d\n%s%s", args, code, out, errs)
			}
			sums = nil
			if err := json.Unmarshal([]byte(out), &sums); err != nil {
				t.Fatalf("status overview --json %v: %v\n%s", args, err, out)
			}
			mine := slices.IndexFunc(sums, func(s summary) bool { return s.Node == n.Name })
			return len(sums) == agentless+1 && mine >= 0 && sums[mine].Phase == "adopted", fmt.Sprintf("%+v", sums)
		})
		if len(sums) != agentless+1 {
			t.Fatalf("status overview %v lists %d nodes, want %d: %+v", args, len(sums), agentless+1, sums)
		}
	}
	// Visibility alone: every node and its phase, no node asked.
	overview()
	for _, s := range sums {
		if s.Agent != "" || s.Migrated != nil || (s.Node != n.Name && s.Phase != "probing") || (s.Node == n.Name && s.Phase != "adopted") {
			t.Errorf("overview without --details: %+v", s)
		}
	}
	overview("--details")
	// "?" is the honest answer when the server does not say in time; "no"
	// must still be what most agentless nodes show.
	noAgent := 0
	for _, s := range sums {
		switch {
		case s.Node == n.Name:
			if s.Phase != "adopted" || s.Agent != "yes" || (s.Modules != nil && *s.Modules != 1) {
				t.Errorf("real node: %+v", s)
			}
		case s.Phase != "probing" || (s.Agent != "no" && s.Agent != "?"):
			t.Errorf("agentless node %s: phase %q agent %q, want probing and no", s.Node, s.Phase, s.Agent)
		case s.Agent == "no":
			noAgent++
		}
	}
	if noAgent < agentless/2 {
		t.Errorf("only %d of %d agentless nodes show agent \"no\"", noAgent, agentless)
	}
	out, errs, code := adoptBounded(t, 120*time.Second, nil, "status", "--config", n.cfg, "--phase", "adopted")
	if code != 0 || !strings.Contains(out, n.Name) || strings.Contains(out, "clio07") {
		t.Errorf("status --phase adopted: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 120*time.Second, nil, "status", "--config", n.cfg, "--phase", "adoptd")
	if code != 3 || !strings.Contains(errs, `"adoptd" is not a phase`) {
		t.Errorf("status --phase with a typo: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = adoptBounded(t, 60*time.Second, nil, "status", "clio07", "--config", n.cfg)
	for _, want := range []string{"AGENT: no agent polls task queue adoption-node-clio07", "PENDING: step Probe", "NEXT: start node clio07's agent"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status of an agentless node: exit %d, lacks %q\n%s%s", code, want, out, errs)
		}
	}
}
