package activities

import (
	"strings"
	"testing"

	"adoption/config"
)

// A mesh spec whose flip.widen is not the node's own is refused: the ports
// a flip may open wider are the node's configuration's to name.
func TestCheckSpecWiden(t *testing.T) {
	_, _, plan, _ := hostileSetup(t)
	spec := specOf(plan)
	spec.Widen = []config.Port{{Num: 22, Proto: "tcp"}}
	if err := checkSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "flip.widen") {
		t.Fatalf("a widen the node does not declare: %v", err)
	}
	plan.Widen = spec.Widen
	if err := checkSpec(&Authority{Plan: plan}, spec); err != nil {
		t.Fatalf("a widen the node declares: %v", err)
	}
}
