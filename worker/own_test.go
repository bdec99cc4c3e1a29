package main

import (
	"os"
	"strings"
	"testing"

	"adoption/nodestate"
)

// TestOwnNamesTheWorkflowOfAnAdoptedNode: root on the node records the
// workflow an adopted node whose owner record is missing serves; a node
// that already serves another is refused (exit 64) with nothing changed,
// as is a bad workflow ID.
func TestOwnNamesTheWorkflowOfAnAdoptedNode(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "n1.yaml", "node: {name: n1, root: "+dir+", state_dir: "+dir+"/state}\ntemporal: {namespace: adoption}\nauthority: {unsigned: true}\n")
	d := nodestate.New(dir + "/state")
	if err := d.MarkAdopted(nodestate.Marker{Node: "n1", Workflow: "node-migration/n1"}); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := checkRun(t, "own", "--config", cfg, "--workflow", "bad id"); code != exitUsage || !strings.Contains(msg, "--workflow") {
		t.Fatalf("a bad workflow ID: exit %d, %s", code, msg)
	}
	if _, ok, _ := d.Owner(); ok {
		t.Fatal("a bad workflow ID recorded an owner")
	}
	out, msg, code := checkRun(t, "own", "--config", cfg, "--workflow", "node-migration/n1")
	if code != 0 || !strings.Contains(out, "serves workflow node-migration/n1 (namespace adoption)") {
		t.Fatalf("own: exit %d, %q %q", code, out, msg)
	}
	if o, ok, err := d.Owner(); err != nil || !ok || o.Workflow != "node-migration/n1" || o.Namespace != "adoption" {
		t.Fatalf("the owner record: %+v %v %v", o, ok, err)
	}
	before, err := os.ReadFile(d.OwnerFile())
	if err != nil {
		t.Fatal(err)
	}
	if _, msg, code := checkRun(t, "own", "--config", cfg, "--workflow", "evil/n1"); code != exitUsage || !strings.Contains(msg, "serves workflow node-migration/n1") {
		t.Fatalf("another workflow over the owner: exit %d, %s", code, msg)
	}
	if after, _ := os.ReadFile(d.OwnerFile()); string(after) != string(before) {
		t.Fatal("a refused own changed the owner record")
	}
}
