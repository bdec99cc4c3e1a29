package gctarget

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the agent's target is set when GOGC is not, left alone when
// it is, and put back by the function TuneGC returns.
func TestTuneGC(t *testing.T) {
	debug.SetGCPercent(100)
	defer debug.SetGCPercent(Percent())
	restore := TuneGC(func(string) string { return "" })
	if got := Percent(); got != AgentGCPercent {
		t.Fatalf("GOGC unset: the collector's target is %d, want %d", got, AgentGCPercent)
	}
	restore()
	if got := Percent(); got != 100 {
		t.Fatalf("after restore: the collector's target is %d, want 100 as before", got)
	}
	debug.SetGCPercent(50)
	TuneGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] })()
	if got := Percent(); got != 50 {
		t.Fatalf("GOGC=50 set: the collector's target is %d, want 50 left alone", got)
	}
}
