package workflows

import (
	"strings"
	"testing"

	"adoption/config"
)

func TestValidateFleet(t *testing.T) {
	ok := FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}, {Node: "n2", Role: "member"}}}
	if err := ValidateFleet(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   FleetInput
		want string
	}{
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n2", Role: "member"}, {Node: "n1", Role: "control"}}}, "control node n1 must come first"},
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "member"}}}, "exactly one control node"},
		{FleetInput{Name: "prod", Nodes: []config.Plan{{Node: "n1", Role: "control"}, {Node: "n1", Role: "member"}}}, "node n1 appears twice"},
		{FleetInput{Name: "Prod!", Nodes: []config.Plan{{Node: "n1", Role: "control"}}}, `fleet name "Prod!" is invalid`},
		{FleetInput{Name: "prod"}, "the fleet has no nodes"},
	} {
		err := ValidateFleet(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateFleet(%+v) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestNodeDone(t *testing.T) {
	for _, c := range []struct {
		p    NodeProgress
		want bool
	}{
		{NodeProgress{Phase: PhaseAdopted, Migrated: 2, Modules: 2}, true},
		{NodeProgress{Phase: PhaseAdopted, Migrated: 1, Modules: 2}, false},
		{NodeProgress{Phase: PhaseMigrating, Migrated: 1, Modules: 2}, false},
		{NodeProgress{Phase: PhaseProbing}, false},
		{NodeProgress{Phase: PhaseConverged, Migrated: 0, Modules: 0}, true},
	} {
		if got := nodeDone(c.p); got != c.want {
			t.Errorf("nodeDone(%+v) = %v", c.p, got)
		}
	}
}
