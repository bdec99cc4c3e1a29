package authority

// Unit tests of the checks of a request's fields against the node's plan.

import (
	"strings"
	"testing"

	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/firewall/flipwire"
)

// A mesh spec whose flip.widen is not the node's own is refused: the ports
// a flip may open wider are the node's configuration's to name.
func TestCheckSpecWiden(t *testing.T) {
	ssh := config.Port{Num: 22, Proto: "tcp"}
	plan := config.Plan{Node: "n1", ManagementPorts: []config.Port{ssh}}
	spec := flipwire.MeshSpec{Node: "n1", Input: []flipwire.Allow{{Port: ssh, Owner: "management"}}}
	if err := CheckSpec(&Authority{Plan: plan}, spec); err != nil {
		t.Fatalf("the node's own spec: %v", err)
	}
	spec.Widen = []config.Port{ssh}
	if err := CheckSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "flip.widen") {
		t.Fatalf("a widen the node does not declare: %v", err)
	}
	plan.Widen = spec.Widen
	if err := CheckSpec(&Authority{Plan: plan}, spec); err != nil {
		t.Fatalf("a widen the node declares: %v", err)
	}
}

// The same for the traffic classes flip.drop and flip.widen name: a spec
// that drops or widens a class the node's configuration does not is
// refused.
func TestCheckSpecClasses(t *testing.T) {
	ssh := config.Port{Num: 22, Proto: "tcp"}
	plan := config.Plan{Node: "n1", ManagementPorts: []config.Port{ssh}}
	spec := flipwire.MeshSpec{Node: "n1", Input: []flipwire.Allow{{Port: ssh, Owner: "management"}}}
	spec.WidenClasses = []string{"echo-request/icmp"}
	if err := CheckSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "flip.drop and flip.widen") || !strings.Contains(err.Error(), "widen_classes") {
		t.Fatalf("a widened class the node does not declare: %v", err)
	}
	plan.WidenClasses = spec.WidenClasses
	if err := CheckSpec(&Authority{Plan: plan}, spec); err != nil {
		t.Fatalf("a widened class the node declares: %v", err)
	}
	spec.DropClasses = []string{"esp/esp"}
	if err := CheckSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "drop_classes") {
		t.Fatalf("a dropped class the node does not declare: %v", err)
	}
}

// A predecessor the request describes differently from the node's is named
// by its first difference; empty and absent lists are the same.
func TestPredecessorDiff(t *testing.T) {
	node := &cutoverwire.Predecessor{ID: "abc", Name: "app", Networks: []string{"bridge"}}
	if d := PredecessorDiff(&cutoverwire.Predecessor{ID: "abc", Name: "app", Networks: []string{"bridge"}, Mounts: nil}, node); d != "" {
		t.Fatalf("the node's own predecessor: %s", d)
	}
	if d := PredecessorDiff(&cutoverwire.Predecessor{ID: "abc", Name: "app", Networks: []string{"host"}}, node); !strings.HasPrefix(d, `networks: the request says ["host"]`) {
		t.Fatalf("network=host: %q", d)
	}
	if d := PredecessorDiff(&cutoverwire.Predecessor{ID: "abc", Name: "app"}, nil); !strings.Contains(d, "the node has none") {
		t.Fatalf("no predecessor on the node: %q", d)
	}
}

// The foundation's containers publish its ports on the control node: those
// may be opened on the forward path and forwarded by the mesh's ruleset;
// a port they do not publish, or a member's foundation, may not.
func TestForwardFoundationPublished(t *testing.T) {
	registry := config.Port{Num: 5001, Proto: "tcp"}
	plan := config.Plan{Node: "n1", Role: "control",
		Foundation:           []config.NamedPort{{Name: "registry", Port: registry}, {Name: "store", Port: config.Port{Num: 5432, Proto: "tcp"}}},
		FoundationContainers: []config.Container{{Name: "registry", Image: "mesh/registry:1", Ports: map[string]string{"5001/tcp": "5000/tcp"}}}}
	auth := &Authority{Plan: plan}
	if err := CheckOwnerForward(auth, flipwire.OwnerFoundation, []config.Port{registry}); err != nil {
		t.Fatalf("the registry's published port: %v", err)
	}
	spec := flipwire.MeshSpec{Node: "n1", Forward: []flipwire.Allow{{Port: registry, Owner: flipwire.OwnerFoundation}}}
	if err := CheckSpec(auth, spec); err != nil {
		t.Fatalf("the mesh ruleset forwarding the registry's port: %v", err)
	}
	if err := CheckOwnerForward(auth, flipwire.OwnerFoundation, []config.Port{{Num: 5432, Proto: "tcp"}}); err == nil {
		t.Fatal("a foundation port no foundation container publishes was let onto the forward path")
	}
	plan.Role = "member"
	if err := CheckOwnerForward(&Authority{Plan: plan}, flipwire.OwnerFoundation, []config.Port{registry}); err == nil {
		t.Fatal("a member's foundation was let onto the forward path")
	}
}
