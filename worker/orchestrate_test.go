// Tests of the orchestrator's own flags.

package main

import (
	"strings"
	"testing"
)

// --workflow-pollers takes a number from 1 to 64 or auto; anything else
// is refused, naming the flag and the value.
func TestPollerBehavior(t *testing.T) {
	for _, ok := range []string{"1", "2", "64", "auto"} {
		if b, err := pollerBehavior(ok); err != nil || b == nil {
			t.Errorf("--workflow-pollers %s: %v, %v", ok, b, err)
		}
	}
	for _, bad := range []string{"0", "65", "-1", "two", "", "Auto"} {
		if _, err := pollerBehavior(bad); err == nil || !strings.Contains(err.Error(), "--workflow-pollers") || !strings.Contains(err.Error(), "1 to 64") {
			t.Errorf("--workflow-pollers %q: %v, want a refusal naming the flag and the range", bad, err)
		}
	}
}
