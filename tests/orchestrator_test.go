package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"adoption/workflows"
	"adoption/workflows/fleet"
)

// TestOrchestratorAndAgents: a node agent (adopt-worker run) polls only its
// node's activity queue, so with agents alone a started workflow never has
// a workflow task completed; one orchestrator (adopt-worker orchestrate)
// runs it as a version of Worker Deployment `adoption`, AutoUpgrade; a
// second build made current takes the running workflow over when the first
// stops (the rolling upgrade of docs/fleet.md).
func TestOrchestratorAndAgents(t *testing.T) {
	needE2E(t)
	srv := startDevServerOnly(t)
	c := srv.client(t)
	ctx := context.Background()
	n := upNode(t, "e2eorch", 190, srv.Addr())
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: exit %d\n%s%s", code, out, errs)
	}
	id := workflows.WorkflowID(n.Name)

	// Once the agent is seen polling its queue, nothing polls the workflow
	// queue: no workflow task can have been started, let alone completed.
	pollers := func(queue string, typ enumspb.TaskQueueType) []string {
		t.Helper()
		res, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: "default", TaskQueue: &taskqueuepb.TaskQueue{Name: queue}, TaskQueueType: typ,
		})
		if err != nil {
			t.Fatalf("describe task queue %s: %v", queue, err)
		}
		var out []string
		for _, p := range res.Pollers {
			out = append(out, p.GetIdentity()+"@"+p.GetDeploymentOptions().GetBuildId())
		}
		return out
	}
	waitUntil(t, "the agent polls "+workflows.NodeQueue(n.Name), func() bool {
		return len(pollers(workflows.NodeQueue(n.Name), enumspb.TASK_QUEUE_TYPE_ACTIVITY)) > 0
	})
	if p := pollers(workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW); len(p) != 0 {
		t.Fatalf("with only the node agent running, the workflow queue has pollers: %v", p)
	}
	if p := pollers(workflows.NodeQueue(n.Name), enumspb.TASK_QUEUE_TYPE_WORKFLOW); len(p) != 0 {
		t.Fatalf("the node agent polls workflow tasks on its own queue: %v", p)
	}
	if evs := historyTypes(t, c, id); evs[enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED] != 0 || evs[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED] != 0 {
		t.Fatalf("a workflow task ran with no orchestrator: %v", evs)
	}

	// The orchestrator, with the binary's own build ID, runs it to adopted.
	a := startOrchestrator(t, srv.Addr())
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	first := versionOf(t, c, id)
	if first.behavior != enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE || first.build == "" {
		t.Fatalf("workflow versioning after adoption: %+v, want AutoUpgrade on the orchestrator's build", first)
	}
	if cur := currentBuild(t, c); cur != first.build {
		t.Fatalf("deployment %s current version %q, the workflow ran on %q", workflows.DeploymentName, cur, first.build)
	}

	// A new build joins without --make-current: it polls, but the current
	// version stays (only a deployment's first build promotes itself).
	plain := startOrchestrator(t, srv.Addr(), "--build-id", "upgrade-plain")
	waitUntil(t, "build upgrade-plain polls", func() bool {
		return strings.Contains(strings.Join(pollers(workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW), " "), "@upgrade-plain")
	})
	// It decides once, at start, and says so: only then is "it did not
	// take the deployment" a finding rather than "not yet".
	waitUntil(t, "build upgrade-plain says it leaves the current version", func() bool {
		return strings.Contains(plain.log.String(), declined)
	})
	if cur := currentBuild(t, c); cur != first.build {
		t.Fatalf("a build started without --make-current took the deployment: current %q, want %q", cur, first.build)
	}
	plain.kill()
	// An upgrade says so: --make-current makes it current; the old one
	// stops. The running workflow's next task (a prune request) runs on
	// the new build.
	upB := startOrchestrator(t, srv.Addr(), "--build-id", "upgrade-b", "--make-current")
	waitUntil(t, "build upgrade-b becomes current", func() bool { return currentBuild(t, c) == "upgrade-b" })
	// Only after replaying the one open workflow's history on its code.
	if l := upB.log.String(); !strings.Contains(l, `msg="replay check" build_id=upgrade-b open=1 replayed=1 closed_meanwhile=0 failed=0`) {
		t.Fatalf("build upgrade-b became current without the replay check of the open workflow:\n%s", l)
	}
	a.kill()
	// The old build restarted (its unit's Restart=on-failure) must not
	// take the workflows back.
	old := startOrchestrator(t, srv.Addr(), "--build-id", first.build)
	waitUntil(t, "the old build polls again", func() bool {
		return strings.Contains(strings.Join(pollers(workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW), " "), "@"+first.build)
	})
	waitUntil(t, "the old build says it leaves the current version", func() bool {
		return strings.Contains(old.log.String(), declined)
	})
	if cur := currentBuild(t, c); cur != "upgrade-b" {
		t.Fatalf("the old build, restarted, made itself current again: %q", cur)
	}
	old.kill()
	if out, errs, code := adopt(t, "prune", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt prune: exit %d\n%s%s", code, out, errs)
	}
	waitUntil(t, "the prune runs on build upgrade-b", func() bool {
		st, err := status(t, n)
		return err == nil && versionOf(t, c, id).build == "upgrade-b" && eventPrefixed(st, "pruned")
	})

	// A fleet naming this node, whose workflow runs outside any fleet, is
	// refused by the CLI, naming the node; no fleet starts.
	b, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctl := strings.NewReplacer("name: e2eorch\n", "name: e2eorchctl\n", "role: member\n", "role: control\n").Replace(string(b))
	dir := t.TempDir()
	ctlCfg := filepath.Join(dir, "ctl.yaml")
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(ctlCfg, []byte(ctl), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetFile, []byte(fmt.Sprintf("temporal:\n  address: %s\nname: orch\nnodes:\n  - %s\n  - %s\n", srv.Addr(), ctlCfg, n.cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := adopt(t, "fleet", "start", "--fleet", fleetFile)
	if code == 0 || !strings.Contains(errs, "node e2eorch already has a running workflow") {
		t.Fatalf("fleet start with a node already running: exit %d\n%s%s", code, out, errs)
	}
	if _, err := c.DescribeWorkflow(ctx, fleet.FleetID("orch"), ""); err == nil {
		t.Fatal("the refused fleet was started anyway")
	}
}

func eventPrefixed(st workflows.State, prefix string) bool {
	for _, e := range st.Events {
		if strings.HasPrefix(e.Text, prefix) {
			return true
		}
	}
	return false
}

type wfVersion struct {
	behavior enumspb.VersioningBehavior
	build    string
}

func versionOf(t *testing.T, c client.Client, id string) wfVersion {
	t.Helper()
	d, err := c.DescribeWorkflow(context.Background(), id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	vi := d.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo()
	return wfVersion{behavior: vi.GetBehavior(), build: vi.GetDeploymentVersion().GetBuildId()}
}

func currentBuild(t *testing.T, c client.Client) string {
	t.Helper()
	d, err := c.WorkerDeploymentClient().GetHandle(workflows.DeploymentName).Describe(context.Background(), client.WorkerDeploymentDescribeOptions{})
	if err != nil || d.Info.RoutingConfig.CurrentVersion == nil {
		return ""
	}
	return d.Info.RoutingConfig.CurrentVersion.BuildID
}

func historyTypes(t *testing.T, c client.Client, id string) map[enumspb.EventType]int {
	t.Helper()
	out := map[enumspb.EventType]int{}
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		out[ev.GetEventType()]++
	}
	return out
}

// declined is what an orchestrator started without --make-current logs
// once it has found another build current and left it so (promote in
// worker/orchestrate.go).
const declined = `msg="not making this build current`

// waitUntil polls cond until it holds (2 minutes at most; a wait, not an
// assertion on speed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
