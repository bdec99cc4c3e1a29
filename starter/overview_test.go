// `adopt status` with no node lists from visibility alone: no node's
// workflow is queried and no node's queue described, the node and its
// phase are AdoptionNode and AdoptionPhase. --details asks each node,
// at most detailsParallel at a time, within its bounds.
package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"adoption/workflows"
)

// listFake lists one running node workflow per phase given, named n00...,
// each of whose workflows would answer (if asked) that it is flipping.
func listFake(phases ...string) *fakeClient {
	f := newFake()
	f.polled[workflows.TaskQueue] = true
	for i, p := range phases {
		node := fmt.Sprintf("n%02d", i)
		f.list = append(f.list, execution(workflows.WorkflowID(node), node, p, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
		f.answers[workflows.WorkflowID(node)] = workflows.State{Node: node, Phase: workflows.PhaseFlipping,
			Modules: []workflows.ModuleState{{Name: "app", State: workflows.ModuleMigrated}, {Name: "db", State: workflows.ModulePending}}}
	}
	return f
}

func TestOverviewAsksNoNodeByDefault(t *testing.T) {
	f := listFake("adopted", "probing")
	// A run that has no AdoptionNode yet is named by its workflow ID.
	f.list = append(f.list, execution(workflows.WorkflowID("n02"), "", "migrating", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
	code, out, errs := runCLI(t, f, "status")
	if code != exitOK {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	if n := f.called("QueryWorkflow"); n != 0 {
		t.Errorf("the overview queried %d node workflow(s), want none", n)
	}
	if n := f.called("DescribeTaskQueue"); n > 1 {
		t.Errorf("the overview described %d task queues, want at most the workflow queue", n)
	}
	for _, row := range []string{"n00  adopted", "n01  probing", "n02  migrating"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), row) {
			t.Errorf("overview lacks %q (phase from visibility):\n%s", row, out)
		}
	}
	mustContain(t, "overview's hint (stderr)", errs, "`adopt status NODE`", "`adopt status --details`")

	code, out, errs = runCLI(t, f, "status", "--json")
	var sums []map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 3 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errs)
	}
	for _, s := range sums {
		if s["phase"] == string(workflows.PhaseFlipping) || s["migrated"] != nil || s["agent"] != nil {
			t.Errorf("status --json asked the node: %v", s)
		}
	}
	if n := f.called("QueryWorkflow"); n != 0 {
		t.Errorf("status --json queried %d node workflow(s), want none", n)
	}
}

// With no worker on the workflow queue, the overview says so on each
// running node, from one question.
func TestOverviewSaysWhenNoWorkerServesAny(t *testing.T) {
	f := listFake("adopted", "adopted")
	f.polled[workflows.TaskQueue] = false
	code, out, errs := runCLI(t, f, "status")
	if code != exitOK || strings.Count(out, "no worker polls task queue "+workflows.TaskQueue) != 2 || f.called("DescribeTaskQueue") != 1 {
		t.Fatalf("status with no worker: exit %d, %d task queue call(s)\n%s%s", code, f.called("DescribeTaskQueue"), out, errs)
	}
}

func TestOverviewDetailsAsksEachNodeAtMostSixteenAtATime(t *testing.T) {
	phases := make([]string, 40)
	for i := range phases {
		phases[i] = "adopted"
	}
	f := listFake(phases...)
	f.queryWait = 20 * time.Millisecond
	f.polled[workflows.NodeQueue("n00")] = true
	code, out, errs := runCLI(t, f, "status", "--details", "--json")
	var sums []NodeSummary
	if code != exitOK || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 40 {
		t.Fatalf("status --details: exit %d\n%s%s", code, out, errs)
	}
	if n := f.called("QueryWorkflow"); n != 40 {
		t.Errorf("--details queried %d node workflows, want 40", n)
	}
	if f.maxFlight > detailsParallel || f.maxFlight < 2 {
		t.Errorf("--details ran %d queries at once, want 2 to %d", f.maxFlight, detailsParallel)
	}
	for _, s := range sums {
		want := "no"
		if s.Node == "n00" {
			want = "yes"
		}
		if s.Phase != "adopted" || s.Migrated == nil || *s.Migrated != 1 || *s.Modules != 2 || s.Agent != want || !strings.Contains(s.Note, "its workflow says phase flipping") {
			t.Errorf("node %s: %+v (migrated %v), want phase adopted from visibility, 1/2, agent %s, a note on the phase", s.Node, s, s.Migrated, want)
		}
	}
}

// --details-timeout bounds every node together: a node not asked by then
// says so, and the overview returns on time.
func TestOverviewDetailsIsBoundedInTime(t *testing.T) {
	phases := make([]string, 40)
	for i := range phases {
		phases[i] = "probing"
	}
	f := listFake(phases...)
	f.queryWait = time.Minute
	start := time.Now()
	code, out, errs := runCLI(t, f, "status", "--details", "--details-timeout", "200ms", "--ask-timeout", "10s")
	if took := time.Since(start); code != exitOK || took > 5*time.Second {
		t.Fatalf("status --details with slow nodes: exit %d after %s\n%s%s", code, took, out, errs)
	}
	mustContain(t, "status --details with slow nodes", out, "no answer before --details-timeout 200ms ran out", "not asked: --details-timeout 200ms spent")
}

func TestOverviewFlagsCheckedBeforeAsking(t *testing.T) {
	for _, args := range [][]string{
		{"status", "n1", "--details"},
		{"status", "--details", "--details-timeout", "0s"},
	} {
		f := newFake()
		f.list = []*workflowpb.WorkflowExecutionInfo{}
		if code, out, errs := runCLI(t, f, args...); code != exitUsage || f.called("ListWorkflow")+f.called("DescribeWorkflow") != 0 {
			t.Errorf("%v: exit %d, want 3 with nothing asked\n%s%s", args, code, out, errs)
		}
	}
}

// --attention asks visibility for every running workflow whose
// AdoptionAttention is set, in one query, and shows why for each; a
// fleet holding a wave is listed by its workflow ID.
func TestOverviewAttention(t *testing.T) {
	f := listFake("adopted", "adopted")
	f.list[0].SearchAttributes.IndexedFields[workflows.AttrAttention.GetName()] = keywordPayload(workflows.AttentionCutoverFailed)
	f.list[1].SearchAttributes.IndexedFields[workflows.AttrAttention.GetName()] = keywordPayload(workflows.AttentionDrift)
	fl := execution("fleet/prod", "", "", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	fl.SearchAttributes.IndexedFields[workflows.AttrAttention.GetName()] = keywordPayload(workflows.AttentionWaveHeld)
	f.list = append(f.list, fl)
	code, out, errs := runCLI(t, f, "status", "--attention")
	if code != exitOK {
		t.Fatalf("status --attention: exit %d\n%s%s", code, out, errs)
	}
	if len(f.listed) != 1 || f.listed[0] != "AdoptionAttention != '' AND ExecutionStatus = 'Running'" {
		t.Errorf("asked visibility %q, want the one attention query", f.listed)
	}
	rows := strings.Join(strings.Fields(out), "  ")
	for _, row := range []string{"ATTENTION", "n00  adopted  cutover-failed", "n01  adopted  drift", "fleet/prod  ?  wave-held"} {
		if !strings.Contains(rows, row) {
			t.Errorf("status --attention lacks %q:\n%s", row, out)
		}
	}
	code, out, _ = runCLI(t, f, "status", "--attention", "--json")
	var sums []NodeSummary
	if code != exitOK || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 3 || sums[1].Node != "n00" || sums[1].Attention != workflows.AttentionCutoverFailed {
		t.Fatalf("status --attention --json: exit %d\n%s", code, out)
	}
}
