// Completions: enums from the values the commands check, node names from
// the running node workflows.
package main

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"adoption/workflows"
)

func TestCompletions(t *testing.T) {
	f := newFake()
	for _, n := range []string{"n2", "n1", "web1"} {
		f.list = append(f.list, execution(workflows.WorkflowID(n), n, "adopted", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
	}
	f.runs[workflows.WorkflowID("n1")] = f.list[1]
	f.polled[workflows.TaskQueue] = true
	f.answers[workflows.WorkflowID("n1")] = workflows.State{Node: "n1", Phase: workflows.PhaseAdopted,
		Modules: []workflows.ModuleState{{Name: "app"}, {Name: "mail"}}}
	complete := func(args ...string) []string {
		t.Helper()
		code, out, errs := runCLI(t, f, append([]string{"__complete"}, args...)...)
		if code != exitOK {
			t.Fatalf("__complete %v: exit %d\n%s%s", args, code, out, errs)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, ":") { // the last line is the directive
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return got
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"wait", ""}, "n1 n2 web1"},
		{[]string{"migrate", "n"}, "n1 n2"},
		{[]string{"flip", "w"}, "web1"},
		{[]string{"status", ""}, "n1 n2 web1"},
		{[]string{"start", ""}, ""},
		{[]string{"migrate", "n1", ""}, "app mail"},
		{[]string{"retry", "n1", "m"}, "mail"},
		{[]string{"migrate", "n1", "app", ""}, ""},
		{[]string{"migrate", "nosuch", ""}, ""},
		{[]string{"wait", "n1", "--phase", ""}, strings.Join(phaseNames(), " ")},
		// Fixed lists are filtered by the shell, not here.
		{[]string{"wait", "n1", "--state", "m"}, strings.Join(moduleStates, " ")},
		{[]string{"wait", "n1", "--genesis", ""}, "done failed"},
		{[]string{"status", "--phase", "f"}, phaseList()},
		{[]string{"resolve", "n1", "/etc/a", "K", "--take", ""}, "node mesh"},
		{[]string{"status", "-o", ""}, "text json jsonl"},
	} {
		got := strings.Join(complete(c.args...), " ")
		if got != c.want && strings.ReplaceAll(c.want, ",", "") != got {
			t.Errorf("complete %v: %q, want %q", c.args, got, c.want)
		}
	}
}
