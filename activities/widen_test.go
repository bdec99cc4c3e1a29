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

// The same for the traffic classes flip.drop and flip.widen name: a spec
// that drops or widens a class the node's configuration does not is
// refused.
func TestCheckSpecClasses(t *testing.T) {
	_, _, plan, _ := hostileSetup(t)
	spec := specOf(plan)
	spec.WidenClasses = []string{"echo-request/icmp"}
	if err := checkSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "flip.drop and flip.widen") || !strings.Contains(err.Error(), "widen_classes") {
		t.Fatalf("a widened class the node does not declare: %v", err)
	}
	plan.WidenClasses = spec.WidenClasses
	if err := checkSpec(&Authority{Plan: plan}, spec); err != nil {
		t.Fatalf("a widened class the node declares: %v", err)
	}
	spec.DropClasses = []string{"esp/esp"}
	if err := checkSpec(&Authority{Plan: plan}, spec); err == nil || !strings.Contains(err.Error(), "drop_classes") {
		t.Fatalf("a dropped class the node does not declare: %v", err)
	}
}
