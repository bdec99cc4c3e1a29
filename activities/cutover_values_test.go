package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers/cutover"
)

// valueEngine refuses a spec whose env:MODE is not kept nor decided, as
// the engine does, and records the decisions it was given.
type valueEngine struct {
	fake.Cutover
	takes []map[string]string
}

func (v *valueEngine) Preflight(_ context.Context, sp cutover.Spec) (*cutover.Predecessor, error) {
	v.takes = append(v.takes, sp.Takes)
	if sp.Takes["env:MODE"] == "" {
		return nil, &cutover.ValueConflicts{Container: sp.Name, Conflicts: []cutover.ValueConflict{{Key: "env:MODE", Node: "hmac-sha256:aa", Mesh: "hmac-sha256:bb"}}}
	}
	return nil, nil
}

// A container's value conflict refuses the preflight and the rehearsal as a
// file's key does (ErrFileConflict, the module's name as path, its digests
// in the reason); the decision on it reaches the engine, and the file
// merge never sees it.
func TestContainerValueConflictRefusesAndDecisionReachesEngine(t *testing.T) {
	a, _ := newActs(t)
	eng := &valueEngine{}
	a.Cutover = eng
	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{{Name: "app",
		Container: &config.Container{Name: "app", Image: "app:2"}}}})
	in := ModuleInput{Plan: plan.Ref(), Module: "app"}
	_, err := a.CutoverPreflight(context.Background(), in)
	msg := appErr(t, err, ErrFileConflict)
	if !strings.Contains(msg, "env:MODE") || !strings.Contains(msg, "adopt resolve n1 app KEY --take node|mesh") || !strings.Contains(msg, "container.keep") {
		t.Fatalf("refusal: %s", msg)
	}
	var ae *temporal.ApplicationError
	var cs []FileConflict
	if !errors.As(err, &ae) || ae.Details(&cs) != nil || len(cs) != 1 || cs[0].Path != "app" || cs[0].Key != "env:MODE" ||
		!strings.Contains(cs[0].Why, "hmac-sha256:aa") {
		t.Fatalf("details: %+v", cs)
	}
	r, err := a.Rehearse(context.Background(), in)
	must(t, err)
	if len(r.Refusals) != 1 || !strings.Contains(r.Refusals[0], "env:MODE") {
		t.Fatalf("rehearsal refusals: %v", r.Refusals)
	}

	in.Decisions = []FileDecision{{Path: "app", Key: "env:MODE", Take: "node"}}
	if _, err := a.CutoverPreflight(context.Background(), in); err != nil {
		t.Fatalf("decided: %v", err)
	}
	if got := eng.takes[len(eng.takes)-1]; got["env:MODE"] != "node" || len(got) != 1 {
		t.Fatalf("the engine was given %v", got)
	}
}
