package tests

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"adoption/workflows/fleet"
)

// TestReplayRecordedHistories replays every history recorded from a real
// run (tests/testdata/history-*.json) against today's workflow code: a
// change that would break running workflows fails here. The control-node
// and Fleet histories come from `go run ./tests/record` (-scenario control
// or fleet); one more can be recorded with
// ADOPT_RECORD_HISTORY=tests/testdata/history-NAME.json on an e2e test.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/history-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under tests/testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			fleet.Register(r) // the orchestrator's own registration
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
