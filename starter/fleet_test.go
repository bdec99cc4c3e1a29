// `adopt fleet next` and `adopt fleet retry` read the fleet's state before
// they signal: what the fleet would turn away (or would change nothing)
// exits 2 and sends nothing; what it takes is signalled and exits 0.
package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"adoption/workflows"
)

// fleetFake is a running fleet of n1 (control), n2 and n3 in state st.
func fleetFake(st workflows.FleetState) *fakeClient {
	f := newFake()
	id := workflows.FleetID("f1")
	f.runs[id] = execution(id, "", "", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	f.answers[id] = st
	return f
}

func fleetOf(next, grants int, nodes ...workflows.FleetNode) workflows.FleetState {
	return workflows.FleetState{Name: "f1", Nodes: nodes, Next: next, Grants: grants}
}

func fnode(name string, started bool, ended string, done bool) workflows.FleetNode {
	return workflows.FleetNode{NodeProgress: workflows.NodeProgress{Node: name, Phase: workflows.PhaseAdopted, Modules: 1}, Started: started, Ended: ended, Done: done}
}

func TestFleetRetryRefusedBeforeItIsSent(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	st := fleetOf(3, 0, fnode("n1", true, "converged", true), fnode("n2", true, "failed: boom", false), fnode("n3", false, "", false))
	for _, c := range []struct {
		node string
		want []string
	}{
		{"n9", []string{"retry of node n9 refused", "not a node of this fleet", "lists the fleet's nodes"}},
		{"n1", []string{"retry of node n1 refused", "it has not failed (converged)"}},
		{"n3", []string{"retry of node n3 refused", "it has not failed (waiting)", "starts in its turn"}},
	} {
		f := fleetFake(st)
		code, out, errs := runCLI(t, f, "fleet", "retry", c.node, "--fleet", path)
		if code != exitRefused || len(f.signals) != 0 {
			t.Errorf("retry %s: exit %d, %d signal(s) sent, want 2 and none\n%s%s", c.node, code, len(f.signals), out, errs)
		}
		mustContain(t, "retry "+c.node, errs, c.want...)
	}

	f := fleetFake(st)
	code, out, errs := runCLI(t, f, "fleet", "retry", "n2", "--fleet", path, "--json")
	if code != exitOK || len(f.signals) != 1 || f.signals[0].name != workflows.SignalFleetRetry || f.signals[0].arg != (workflows.FleetRetry{Node: "n2"}) {
		t.Fatalf("retry of a failed node: exit %d, signals %+v, want 0 and one retry of n2\n%s%s", code, f.signals, out, errs)
	}
}

// A node started and not known to have ended may have ended unseen: the
// fleet takes its retry, and refuses it at the start while its workflow
// still runs. The CLI asks that workflow and says so at once.
func TestFleetRetryOfANodeStillRunningIsRefused(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	st := fleetOf(2, 0, fnode("n1", true, "converged", true), fnode("n2", true, "", false))
	f := fleetFake(st)
	f.runs[workflows.WorkflowID("n2")] = execution(workflows.WorkflowID("n2"), "n2", "migrating", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	code, out, errs := runCLI(t, f, "fleet", "retry", "n2", "--fleet", path)
	if code != exitRefused || len(f.signals) != 0 {
		t.Fatalf("retry of a running node: exit %d, %d signal(s), want 2 and none\n%s%s", code, len(f.signals), out, errs)
	}
	mustContain(t, "retry of a running node", errs, "still running, phase migrating", "adopt status n2")

	// Its workflow has ended unseen (terminated): the retry goes.
	f = fleetFake(st)
	f.runs[workflows.WorkflowID("n2")] = execution(workflows.WorkflowID("n2"), "n2", "migrating", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED)
	if code, out, errs := runCLI(t, f, "fleet", "retry", "n2", "--fleet", path); code != exitOK || len(f.signals) != 1 {
		t.Fatalf("retry of a node ended unseen: exit %d, %d signal(s), want 0 and one\n%s%s", code, len(f.signals), out, errs)
	}
}

func TestFleetNextRefusedWhenItWouldStartNothing(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	for _, c := range []struct {
		what string
		st   workflows.FleetState
		want string
	}{
		{"every node started", fleetOf(3, 0, fnode("n1", true, "", true), fnode("n2", true, "", false), fnode("n3", true, "", false)),
			"every node has started (the last: n3)"},
		{"the next node starts by itself", fleetOf(2, 0, fnode("n1", true, "", true), fnode("n2", true, "", true), fnode("n3", false, "", false)),
			"node n3 starts by itself: node n2 before it is done"},
		{"every node left already granted", fleetOf(2, 1, fnode("n1", true, "", true), fnode("n2", false, "", false), fnode("n3", false, "", false)),
			"already granted its start (1 grant(s) not yet spent)"},
	} {
		f := fleetFake(c.st)
		code, out, errs := runCLI(t, f, "fleet", "next", "--fleet", path)
		if code != exitRefused || len(f.signals) != 0 {
			t.Errorf("%s: exit %d, %d signal(s), want 2 and none\n%s%s", c.what, code, len(f.signals), out, errs)
		}
		mustContain(t, c.what, errs, "fleet f1: next refused", c.want, "nothing was sent")
	}

	// Held on a failed node: next goes on without it, and names the node.
	f := fleetFake(fleetOf(2, 0, fnode("n1", true, "", true), fnode("n2", true, "failed: boom", false), fnode("n3", false, "", false)))
	code, out, errs := runCLI(t, f, "fleet", "next", "--fleet", path, "--json")
	var res struct {
		Node       string   `json:"node"`
		PassedOver []string `json:"passed_over"`
	}
	if code != exitOK || len(f.signals) != 1 || f.signals[0].name != workflows.SignalFleetNext || json.Unmarshal([]byte(out), &res) != nil || res.Node != "n3" || len(res.PassedOver) != 1 || res.PassedOver[0] != "n2" {
		t.Fatalf("next past a failed node: exit %d, signals %+v, output %q, want 0, one signal, node n3, n2 passed over\n%s", code, f.signals, out, errs)
	}
	// Every node started, the last one failed: next lets the fleet end
	// without it (the fleet passes it over), starting none.
	f = fleetFake(fleetOf(3, 0, fnode("n1", true, "", true), fnode("n2", true, "", true), fnode("n3", true, "failed: boom", false)))
	code, out, errs = runCLI(t, f, "fleet", "next", "--fleet", path)
	if code != exitOK || len(f.signals) != 1 {
		t.Fatalf("next past the last, failed node: exit %d, %d signal(s), want 0 and one\n%s%s", code, len(f.signals), out, errs)
	}
	mustContain(t, "next past the last, failed node", out, "goes on without n3")
	if strings.Contains(out, "may start now") {
		t.Errorf("next past the last node says a node starts:\n%s", out)
	}
}

// A fleet that does not answer gets nothing (exit 1): what it would say
// cannot be known. A finished one refuses (exit 2).
func TestFleetRequestsSendNothingBlind(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	f := fleetFake(workflows.FleetState{})
	f.queryErr = errors.New("query failed: no worker")
	code, out, errs := runCLI(t, f, "fleet", "next", "--fleet", path)
	if code != exitError || len(f.signals) != 0 {
		t.Errorf("next to a fleet that does not answer: exit %d, %d signal(s), want 1 and none\n%s%s", code, len(f.signals), out, errs)
	}
	mustContain(t, "next to a fleet that does not answer", errs, "nothing was sent")

	f = newFake()
	id := workflows.FleetID("f1")
	f.runs[id] = execution(id, "", "", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
	code, out, errs = runCLI(t, f, "fleet", "retry", "n2", "--fleet", path)
	if code != exitRefused || len(f.signals) != 0 {
		t.Errorf("retry on a finished fleet: exit %d, %d signal(s), want 2 and none\n%s%s", code, len(f.signals), out, errs)
	}
	mustContain(t, "retry on a finished fleet", errs, "fleet f1 has finished")
}

// A name that cannot be a node's is a usage error, asked of nobody.
func TestFleetRetryOfAnInvalidNameIsUsage(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	f := fleetFake(fleetOf(2, 0, fnode("n1", true, "", true), fnode("n2", true, "failed: boom", false)))
	if code, out, errs := runCLI(t, f, "fleet", "retry", "n2'; rm -rf /", "--fleet", path); code != exitUsage || f.called("QueryWorkflow")+len(f.signals) != 0 {
		t.Fatalf("retry of an invalid name: exit %d, want 3 with nothing asked\n%s%s", code, out, errs)
	}
}
