package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"adoption/codec"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// TestReplayRecordedHistories replays every history recorded from a real
// run (tests/testdata/history-*.json) against today's workflow code: a
// change that would break running workflows fails here. The histories come
// from `go run ./tests/record` (docs/histories.md lists its scenarios); one
// more can be recorded with
// ADOPT_RECORD_HISTORY=tests/testdata/history-NAME.json on an e2e test.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/history-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under tests/testdata")
	}
	dc := historyConverter(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: dc, FailureConverter: codec.FailureConverter(dc)})
			if err != nil {
				t.Fatal(err)
			}
			fleet.Register(r) // the orchestrator's own registration
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
	t.Run("every change ID reached", func(t *testing.T) { checkChangeIDsRecorded(t, files, dc) })
}

// historyConverter decrypts the histories tests/record encrypted with
// testdata/history-codec.key, as production's are; older ones, recorded
// unencrypted, pass through it unchanged (Lenient: a replay acts on nothing).
func historyConverter(t *testing.T) converter.DataConverter {
	secret, err := os.ReadFile("testdata/history-codec.key")
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	return codec.DataConverter(c.Lenient())
}

// unrecorded are the change IDs no recorded history reaches, and why the
// recorder cannot reach them. An ID listed here that a history does reach
// fails too: the list only shrinks.
var unrecorded = map[string]string{}

// checkChangeIDsRecorded fails when a change ID of workflows/versions.go or
// workflows/fleet/versions.go has no recorded history carrying its marker
// and is not among unrecorded, or takes the name of a retired one.
func checkChangeIDsRecorded(t *testing.T, files []string, dc converter.DataConverter) {
	ids := changeIDs(t, "../workflows/versions.go", "../workflows/fleet/versions.go")
	if len(ids) < 10 {
		t.Fatalf("read only %d change IDs from the versions.go files: %v", len(ids), ids)
	}
	for _, id := range ids {
		if slices.Contains(workflows.RetiredChanges, id) {
			t.Errorf("change ID %q is retired (workflows.RetiredChanges): kept histories carry its marker at version 1; name the new change otherwise", id)
		}
	}
	reached := map[string][]string{}
	for _, f := range files {
		for id := range versionMarkers(t, f, dc) {
			reached[id] = append(reached[id], filepath.Base(f))
		}
	}
	var missing []string
	for _, id := range ids {
		_, ok := reached[id]
		why, excused := unrecorded[id]
		switch {
		case !ok && !excused:
			missing = append(missing, id)
		case ok && excused:
			t.Errorf("change %q is listed as unrecorded (%s) but %v reach it: remove it from the list", id, why, reached[id])
		}
	}
	if len(missing) > 0 {
		t.Errorf("no recorded history reaches change ID(s) %s: add a scenario to tests/record that takes the branch and record (go run ./tests/record -out tests/testdata), or list it in unrecorded with why", strings.Join(missing, ", "))
	}
	for id := range unrecorded {
		if !slices.Contains(ids, id) {
			t.Errorf("unrecorded lists %q, which no versions.go declares", id)
		}
	}
}

// changeIDs reads the string constants of the versions.go files.
func changeIDs(t *testing.T, paths ...string) []string {
	var ids []string
	for _, p := range paths {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if d, ok := n.(*ast.GenDecl); ok && d.Tok == token.CONST {
				for _, s := range d.Specs {
					for _, v := range s.(*ast.ValueSpec).Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							id, err := strconv.Unquote(lit.Value)
							if err != nil {
								t.Fatal(err)
							}
							ids = append(ids, id)
						}
					}
				}
			}
			return true
		})
	}
	sort.Strings(ids)
	return ids
}

// versionMarkers are the change IDs of a history's version markers.
func versionMarkers(t *testing.T, path string, dc converter.DataConverter) map[string]bool {
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := &historypb.History{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, h); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]bool{}
	for _, e := range h.Events {
		if e.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED {
			continue
		}
		m := e.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := dc.FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("%s: event %d: the version marker's change ID: %v", path, e.GetEventId(), err)
		}
		out[id] = true
	}
	return out
}
