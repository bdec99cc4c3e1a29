package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"adoption/workflows"
)

func TestGroupFamiliesOneLineForIPAndIP6(t *testing.T) {
	in := []string{
		"8080/tcp (input, ip) is open now and would close: declare it in a module or add it to flip.drop",
		"8080/tcp (input, ip6) is open now and would close: declare it in a module or add it to flip.drop",
		"53/udp (input, ip, from 10.0.0.0/8) is open now and would close: declare it in a module or add it to flip.drop",
		"1 drift(s) not reviewed",
	}
	got := groupFamilies(in)
	want := []string{
		"8080/tcp (input, ip and ip6) is open now and would close: declare it in a module or add it to flip.drop",
		"53/udp (input, ip, from 10.0.0.0/8) is open now and would close: declare it in a module or add it to flip.drop",
		"1 drift(s) not reviewed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestExplainReasonsNamesTheModuleNotMigrated(t *testing.T) {
	var st workflows.State
	if err := json.Unmarshal([]byte(`{"plan":{"modules":[{"name":"mail","ports":[{"port":25,"proto":"tcp"}]}]},"modules":[{"name":"mail","state":"pending"}]}`), &st); err != nil {
		t.Fatal(err)
	}
	got := explainReasons([]string{"25/tcp (input, ip) is open now and would close: declare it"}, &st)
	if len(got) != 1 || !strings.Contains(got[0], "module mail declares 25/tcp but is pending, not migrated yet") {
		t.Fatalf("got %q", got)
	}
}

func TestWrapLine(t *testing.T) {
	got := wrapLine("NEXT: ", "one two three four five six seven eight nine ten eleven twelve", 40)
	for _, l := range strings.Split(got, "\n") {
		if len(l) > 40 {
			t.Fatalf("line longer than 40: %q", l)
		}
	}
	if !strings.HasPrefix(got, "NEXT: one") || !strings.Contains(got, "\n      ") {
		t.Fatalf("not wrapped under the text: %q", got)
	}
	if wrapLine("- ", "a b", 0) != "- a b" {
		t.Fatal("width 0 must not wrap")
	}
}

func TestWaitGoalRejectsUnknownValues(t *testing.T) {
	for _, g := range []waitGoal{
		{phase: "convergd"},
		{module: "mail", state: "migratd"},
		{genesis: "ok"},
		{module: "mail"},
		{},
	} {
		if err := g.check(); exitCode(err) != exitUsage {
			t.Errorf("%+v: exit %d (%v), want usage", g, exitCode(err), err)
		}
	}
	if err := (waitGoal{phase: "converged", module: "mail", state: "migrated", genesis: "done"}).check(); err != nil {
		t.Fatal(err)
	}
}

func TestWaitEndsOnWhatCannotLeadThere(t *testing.T) {
	reverted := workflows.State{Phase: workflows.PhaseAdopted, Flip: &workflows.FlipStatus{ID: "n1-1", State: "reverted", Error: "not confirmed"}}
	if ok, _, never := waitMet(&reverted, waitGoal{phase: "converged"}, true); ok || !strings.Contains(never, "reverted") {
		t.Errorf("reverted flip: ok %v never %q", ok, never)
	}
	reverted.Queue = []workflows.Request{{Kind: workflows.SignalFlip}}
	if _, _, never := waitMet(&reverted, waitGoal{phase: "converged"}, true); never != "" {
		t.Errorf("a flip queued again may still converge: never %q", never)
	}
	failed := workflows.State{Phase: workflows.PhaseAdopted, Modules: []workflows.ModuleState{{Name: "mail", State: workflows.ModuleFailed, LastError: "boom"}}}
	if _, _, never := waitMet(&failed, waitGoal{module: "mail", state: "migrated"}, true); !strings.Contains(never, "module mail failed") {
		t.Errorf("failed module: never %q", never)
	}
	if ok, _, _ := waitMet(&failed, waitGoal{module: "mail", state: "failed"}, true); !ok {
		t.Error("waiting for failed must be met by failed")
	}
	pf := workflows.State{Phase: workflows.PhaseFailed, LastError: "adoption: daemon running"}
	if _, _, never := waitMet(&pf, waitGoal{phase: "adopted"}, true); !strings.Contains(never, "phase failed") {
		t.Errorf("phase failed: never %q", never)
	}
}

// Usage errors exit 3 and, under --json, are JSON on stderr (stdout stays
// empty); nothing is dialled.
func TestUsageErrorsExit3AsJSON(t *testing.T) {
	for _, args := range [][]string{
		{"wait", "n1", "--state", "migratd", "--module", "m", "--json"},
		{"migrate", "n1", "--json"},
		{"nosuchcommand", "--json"},
		{"status", "--nosuchflag", "--json"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		var je jsonError
		if code != exitUsage || out.Len() != 0 || json.Unmarshal(errb.Bytes(), &je) != nil || je.Kind != "usage" || je.ExitCode != 3 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

func TestEveryCommandHasAnExample(t *testing.T) {
	var out, errb bytes.Buffer
	for _, cmd := range []string{"start", "status", "preview", "migrate", "retry", "flip", "release", "prune", "drift", "wait", "fleet"} {
		out.Reset()
		if code := run(context.Background(), []string{cmd, "--help"}, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		if !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%s --help has no example:\n%s", cmd, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "3  usage") {
		t.Errorf("--help lacks the exit codes:\n%s", out.String())
	}
}
