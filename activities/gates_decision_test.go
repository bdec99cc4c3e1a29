package activities

import (
	"context"
	"strings"
	"testing"
)

// A decision from the wire settles only a key in conflict now, as the node
// computes it from its own files: sshd's PasswordAuthentication, which the
// node has not changed since custody and the mesh sets to no, cannot be
// kept at yes by a forged "take node" decision. The refusal names the key,
// and nothing is written; without the decision the mesh's no lands. A moot
// decision (take mesh where the mesh stands anyway) is let through, as a
// resumed converge sends it.
func TestDecisionOnKeyNotInConflictIsRefused(t *testing.T) {
	a, root := newActs(t)
	const p = "/etc/ssh/sshd_config.d/10-site.conf"
	const found = "Port 2222\nPasswordAuthentication yes\n"
	put(t, root, p, found)
	_, err := a.Files.Take(p)
	must(t, err)
	plan := fileModule(t, a, p, "PasswordAuthentication no\nPort 22\n", []string{"Port"}, "")
	hostile := ModuleInput{Plan: plan.Ref(), Module: "app", Decisions: []FileDecision{{Path: p, Key: "PasswordAuthentication", Take: "node"}}}
	for name, step := range map[string]func(context.Context, ModuleInput) (*CutoverResult, error){
		"preflight": a.CutoverPreflight, "converge": a.ConvergeFiles,
	} {
		_, err := step(context.Background(), hostile)
		msg := appErr(t, err, ErrNoConflict)
		if !strings.Contains(msg, p+" PasswordAuthentication") || !strings.Contains(msg, "not in conflict") || !strings.Contains(msg, "Nothing was changed") {
			t.Fatalf("%s refusal: %s", name, msg)
		}
		if got := read(t, root, p); got != found {
			t.Fatalf("%s wrote %q", name, got)
		}
	}
	// A decision on a file of no module of the request, or one replaced
	// whole, is refused too.
	other := hostile
	other.Decisions = []FileDecision{{Path: "/etc/hosts", Key: "x", Take: "node"}}
	if _, err := a.ConvergeFiles(context.Background(), other); err == nil {
		t.Fatal("a decision on an undeclared file was served")
	}

	moot := ModuleInput{Plan: plan.Ref(), Module: "app", Decisions: []FileDecision{{Path: p, Key: "PasswordAuthentication", Take: "mesh"}}}
	_, err = a.ConvergeFiles(context.Background(), moot)
	must(t, err)
	if got := read(t, root, p); got != "PasswordAuthentication no\nPort 2222\n" {
		t.Fatalf("converged to %q", got)
	}
	// Once converged, the forged decision still cannot turn it back.
	_, err = a.ConvergeFiles(context.Background(), hostile)
	if err == nil {
		if got := read(t, root, p); strings.Contains(got, "yes") {
			t.Fatalf("a decision turned PasswordAuthentication back to yes: %q", got)
		}
	}
}
