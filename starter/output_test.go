package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"adoption/workflows"
)

// -o json is --json (the temporal CLI's and kubectl's habit); -o jsonl is
// one document on one line; any other format is a usage error that points
// brief's file at --out, so an old `adopt brief n1 -o n1.md` fails loudly.
func TestOutputFormats(t *testing.T) {
	f := listFake("adopted", "probing")
	_, want, _ := runCLI(t, f, "status", "--json")
	for _, args := range [][]string{{"status", "-o", "json"}, {"status", "--output=json"}, {"-ojson", "status"}} {
		if code, out, errs := runCLI(t, f, args...); code != exitOK || out != want {
			t.Errorf("%v: exit %d, output differs from --json:\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, f, "status", "-o", "jsonl")
	var sums []map[string]any
	if code != exitOK || strings.Count(strings.TrimSpace(out), "\n") != 0 || json.Unmarshal([]byte(out), &sums) != nil || len(sums) != 2 {
		t.Errorf("-o jsonl: exit %d, want one line holding 2 nodes:\n%s%s", code, out, errs)
	}
	code, _, errs = runCLI(t, f, "brief", "n00", "-o", "n00.md")
	if code != exitUsage || !strings.Contains(errs, "--out") {
		t.Errorf("brief -o FILE: exit %d, want a usage error naming --out:\n%s", code, errs)
	}
	code, out, errs = runCLI(t, f, "status", "-o", "yaml", "--json")
	var e map[string]any
	if code != exitUsage || json.Unmarshal([]byte(errs), &e) != nil || out != "" {
		t.Errorf("-o yaml --json: exit %d, want a usage error as JSON on stderr:\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, f, "status", "--json", "-o", "text")
	if code != exitUsage || out != "" || !strings.Contains(errs, "--json and --output text contradict each other") {
		t.Errorf("--json -o text: exit %d, want a usage error:\n%s%s", code, out, errs)
	}
	if code, out, errs = runCLI(t, f, "status", "--json", "-o", "json"); code != exitOK || out != want {
		t.Errorf("--json -o json: exit %d:\n%s%s", code, out, errs)
	}
}

// The table has an AGE column; an empty list says so on stderr, leaving
// stdout to the table a script reads.
func TestOverviewAgeAndHintOnStderr(t *testing.T) {
	f := listFake("adopted")
	f.list[0].StartTime = timestamppb.New(time.Now().Add(-3 * time.Hour))
	code, out, errs := runCLI(t, f, "status")
	if code != exitOK || !strings.Contains(out, "AGE") || !strings.Contains(strings.Join(strings.Fields(out), " "), "n00 adopted running 3h") {
		t.Errorf("status: exit %d, want an AGE of 3h:\n%s%s", code, out, errs)
	}
	f = listFake()
	code, out, errs = runCLI(t, f, "status")
	if code != exitOK || strings.Contains(out, "(no ") || !strings.Contains(errs, "(no running node workflows") {
		t.Errorf("empty status: exit %d; the hint belongs on stderr:\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// adopt status writes every time as timefmt does: UTC with Z (never the
// host's zone unnamed), or with --local the host's zone with its offset.
func TestStatusTimesAreUTCWithZ(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.FixedZone("CET", 3600)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ns := &nodeStatus{StateFrom: "visibility", Next: "wait"}
	ns.Node, ns.Phase = "n1", "adopted"
	ns.Run.Status, ns.Run.Closed = "completed", at
	ns.Events = []workflows.Event{{At: at, Text: "adopted"}}
	ns.Pending = []pendingActivity{{Type: "Probe", State: "scheduled", Attempt: 1, Scheduled: at}}
	for local, want := range map[bool][]string{
		false: {"RUN: completed at 2026-01-02 03:04:05Z", "waiting since 03:04:05Z", "  03:04:05Z  adopted"},
		true:  {"RUN: completed at 2026-01-02 04:04:05+01:00", "waiting since 04:04:05+01:00", "  04:04:05+01:00  adopted"},
	} {
		var b strings.Builder
		printStatus(&b, ns, 200, zone{local: local})
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("local=%v: want %q in:\n%s", local, w, b.String())
			}
		}
	}
}

// adopt wait says what it sees as it changes, on stderr, once per change;
// stdout holds only the result.
func TestWaitShowsProgressOnStderr(t *testing.T) {
	f := listFake("flipping")
	f.runs[workflows.WorkflowID("n00")] = f.list[0]
	f.polled[workflows.NodeQueue("n00")] = true
	code, out, errs := runCLI(t, f, "wait", "n00", "--phase", "converged", "--timeout", "1500ms")
	if code == exitOK || out != "" {
		t.Fatalf("wait: exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errs, "Z node n00: phase flipping\n") || !strings.Contains(errs, "last seen: phase flipping") {
		t.Errorf("want the progress line and the last seen state, got:\n%s", errs)
	}
	if n := strings.Count(errs, "Z node n00:"); n != 1 {
		t.Errorf("the unchanged state was shown %d times, want once:\n%s", n, errs)
	}
}

// --watch shows the overview again until interrupted, each round stamped
// on stderr.
func TestStatusWatch(t *testing.T) {
	t.Setenv("ADOPT_CONFIG", "")
	f := listFake("adopted")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	x := &cli{stdout: &out, stderr: &errb, c: f}
	done := make(chan int)
	go func() { done <- x.execute(ctx, []string{"status", "--watch", "--watch-every", "1s"}) }()
	// Two rounds, one --watch-every apart; the bound is room for a loaded
	// machine.
	const rounds = 10 * time.Second
	for deadline := time.Now().Add(rounds); f.called("ListWorkflow") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no second round of the overview within %s", rounds)
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "NODE"); n < 2 || len(regexp.MustCompile(`(?m)^--- \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$`).FindAllString(errb.String(), -1)) < 2 {
		t.Errorf("want the table at least twice, each round stamped:\n%s\n%s", out.String(), errb.String())
	}
}
