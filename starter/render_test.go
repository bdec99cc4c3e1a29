// Tests of what `adopt status` prints about the node's state.

package main

import (
	"strings"
	"testing"

	"adoption/firewall/marks"
	"adoption/workflows"
)

// A mark whose place could not be decided is named under the marked rules,
// with why; a mark placed as it should be adds no line.
func TestStatusNamesUndecidedMarkPlacement(t *testing.T) {
	ok := marks.MarkedRule{Mark: marks.Mark{Node: "n1", Owner: "mail", Port: 25, Proto: "tcp"}, Family: "ip", Table: "filter", Chain: "ufw-user-input", Handle: 7}
	odd := marks.MarkedRule{Mark: marks.Mark{Node: "n1", Owner: "web", Port: 18080, Proto: "tcp"}, Family: "ip", Table: "filter", Chain: "ufw-user-forward", Handle: 9,
		Placement: "a source deny in DOCKER-USER comes after its jump to ufw-user-forward"}
	var b strings.Builder
	printState(&b, &workflows.State{Node: "n1", Phase: workflows.PhaseAdopted, Marks: []marks.MarkedRule{ok, odd}}, 120, zone{})
	out := b.String()
	if !strings.Contains(out, "! adoption:n1:web:18080/tcp (ip filter ufw-user-forward): a source deny in DOCKER-USER") {
		t.Errorf("status does not name the undecided placement:\n%s", out)
	}
	if strings.Contains(out, "! adoption:n1:mail") {
		t.Errorf("status flags a mark placed as it should be:\n%s", out)
	}
}
