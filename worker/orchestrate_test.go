// Tests of the orchestrator's own flags.

package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"adoption/replaycheck"
)

// --workflow-pollers takes a number from 1 to 64 or auto; anything else
// is refused, naming the flag and the value.
func TestPollerBehavior(t *testing.T) {
	for _, ok := range []string{"1", "2", "64", "auto"} {
		if b, err := pollerBehavior(ok); err != nil || b == nil {
			t.Errorf("--workflow-pollers %s: %v, %v", ok, b, err)
		}
	}
	for _, bad := range []string{"0", "65", "-1", "two", "", "Auto"} {
		if _, err := pollerBehavior(bad); err == nil || !strings.Contains(err.Error(), "--workflow-pollers") || !strings.Contains(err.Error(), "1 to 64") {
			t.Errorf("--workflow-pollers %q: %v, want a refusal naming the flag and the range", bad, err)
		}
	}
}

type openRuns []replaycheck.Run

func (o openRuns) OpenRuns(context.Context) ([]replaycheck.Run, error) { return o, nil }

type replayAnswers map[string]error

func (a replayAnswers) Replay(_ context.Context, r replaycheck.Run) error { return a[r.WorkflowID] }

// The check before promotion: a failing history blocks it with an error
// saying what state the build is left in and what to do, and each failing
// workflow is logged with its replay error; all passing lets it go on.
func TestReplayCheckBlocksPromotion(t *testing.T) {
	runs := openRuns{{WorkflowID: "node-migration/a"}, {WorkflowID: "node-migration/b"}, {WorkflowID: "fleet/prod"}}
	var log bytes.Buffer
	rc := replayCheck{lister: runs, id: "v2", log: slog.New(slog.NewTextHandler(&log, nil)),
		replayer: replayAnswers{"node-migration/b": errors.New("nondeterministic workflow"), "fleet/prod": replaycheck.ErrClosed}}
	err := rc.run(context.Background())
	if err == nil {
		t.Fatal("a history that does not replay let the build become current")
	}
	for _, want := range []string{"build v2 not made current", "1 of 3", "node-migration/b", "stays registered", "not current", "GetVersion", "set-current-version --deployment-name adoption --build-id v2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if l := log.String(); !strings.Contains(l, "workflow_id=node-migration/b") || !strings.Contains(l, "nondeterministic workflow") ||
		!strings.Contains(l, "replayed=1") || !strings.Contains(l, "closed_meanwhile=1") || strings.Contains(l, "workflow_id=node-migration/a") {
		t.Errorf("log:\n%s", l)
	}
	rc.replayer = replayAnswers{"fleet/prod": replaycheck.ErrClosed}
	if err := rc.run(context.Background()); err != nil {
		t.Fatalf("all replay or closed: %v", err)
	}
}
