package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"adoption/custody"
	"adoption/firewall/flip"
)

// A declared file changed on the node since custody is briefed as the node
// finds it now: drift names the file with digests, the module's conflict
// names the key; nothing under the node's root changes, and no value
// travels in the answer.
func TestBriefAsksTheNodeNow(t *testing.T) {
	a, root := newActs(t)
	const p = "/srv/app/settings"
	put(t, root, p, "MODE=prod\nLEVEL=info-hunter2\n")
	rec, err := a.Files.Take(p)
	must(t, err)
	put(t, root, p, "MODE=prod\nLEVEL=debug-hunter2\n") // the node's change after custody
	plan := fileModule(t, a, p, "MODE=prod\nLEVEL=warn-hunter2\n", nil, "env")
	before := treeHash(t, root)

	in := BriefInput{Plan: plan.Ref(), Spec: flip.MeshSpec{Node: "n1"}, Custody: []custody.Record{rec},
		Modules: []BriefModule{{Module: "app"}}}
	nb, err := a.Brief(context.Background(), in)
	must(t, err)
	if nb.Preview == nil || nb.PreviewError != "" {
		t.Errorf("no preview: %q", nb.PreviewError)
	}
	if len(nb.Drift) != 1 || nb.Drift[0].Path != p || !strings.Contains(nb.Drift[0].What, "changed since adoption") {
		t.Errorf("drift = %+v; want %s changed since adoption", nb.Drift, p)
	}
	if len(nb.Conflicts) != 1 || nb.Conflicts[0].Module != "app" || len(nb.Conflicts[0].Conflicts) != 1 ||
		nb.Conflicts[0].Conflicts[0].Key != "LEVEL" || nb.Conflicts[0].Error != "" {
		t.Errorf("conflicts = %+v; want app's LEVEL", nb.Conflicts)
	}
	b, _ := json.Marshal(nb)
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("a value travelled in the answer: %s", b)
	}
	if treeHash(t, root) != before {
		t.Error("the briefing changed the node's files")
	}
	if got := read(t, root, p); got != "MODE=prod\nLEVEL=debug-hunter2\n" {
		t.Errorf("the file is now %q", got)
	}
}
