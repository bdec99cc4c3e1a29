// migrate and flip --wait: the request is delivered, then waited for as
// `adopt wait` does.
package main

import (
	"encoding/json"
	"strings"
	"testing"

	"adoption/workflows"
)

func TestRequestWait(t *testing.T) {
	id := workflows.WorkflowID("n1")
	migrated := workflows.State{Node: "n1", Phase: workflows.PhaseMigrating,
		Modules: []workflows.ModuleState{{Name: "app", State: workflows.ModuleMigrated}}}
	failed := workflows.State{Node: "n1", Phase: workflows.PhaseMigrating,
		Modules: []workflows.ModuleState{{Name: "app", State: workflows.ModuleFailed, LastError: "health check failed"}}}
	reverted := workflows.State{Node: "n1", Phase: workflows.PhaseAdopted,
		Flip: &workflows.FlipStatus{ID: "n1-1", State: workflows.FlipStateReverted, Error: "not confirmed in time"}}

	f := nodeFake(workflows.UpdateMigrate, nil, true)
	f.answers[id] = migrated
	code, out, errs := runCLI(t, f, "migrate", "n1", "app", "--wait")
	if code != exitOK {
		t.Fatalf("migrate --wait on a migrated module: exit %d\n%s%s", code, out, errs)
	}
	mustContain(t, "migrate --wait", out, "node n1: accepted migrate app", "node n1: phase migrating, module app migrated")

	f = nodeFake(workflows.UpdateMigrate, nil, true)
	f.answers[id] = failed
	code, out, errs = runCLI(t, f, "migrate", "n1", "app", "--wait")
	if code == exitOK {
		t.Fatalf("migrate --wait on a failed module succeeded:\n%s%s", out, errs)
	}
	mustContain(t, "migrate --wait, failed", errs, "module app failed: health check failed")

	f = nodeFake(workflows.UpdateFlip, nil, true)
	f.answers[id] = reverted
	code, out, errs = runCLI(t, f, "flip", "n1", "--wait")
	if code == exitOK {
		t.Fatalf("flip --wait on a reverted flip succeeded:\n%s%s", out, errs)
	}
	mustContain(t, "flip --wait, reverted", errs, "flip n1-1 was reverted: not confirmed in time")

	// JSON: one document holding the request and the wait.
	f = nodeFake(workflows.UpdateMigrate, nil, true)
	f.answers[id] = migrated
	code, out, errs = runCLI(t, f, "migrate", "n1", "app", "--wait", "-o", "json")
	var doc struct {
		Request requestOutcome
		Wait    waitResult
	}
	if code != exitOK || json.Unmarshal([]byte(out), &doc) != nil || !doc.Request.Accepted || !strings.Contains(doc.Wait.Now, "module app migrated") {
		t.Fatalf("migrate --wait -o json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Without --wait nothing is waited for.
	f = nodeFake(workflows.UpdateMigrate, nil, true)
	f.answers[id] = failed
	if code, out, errs := runCLI(t, f, "migrate", "n1", "app"); code != exitOK || strings.Contains(out+errs, "failed") {
		t.Fatalf("migrate without --wait: exit %d\n%s%s", code, out, errs)
	}
}
