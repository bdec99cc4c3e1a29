// Package gctarget sets the node agent's garbage collector target; the
// bench gives its in-process agent parts the same.
package gctarget

import "runtime/debug"

// AgentGCPercent is the node agent's garbage collector target (GOGC). The
// agent's live heap is small and its work comes in bursts: a probe and a
// preview of a control node allocate about 5 MB at once, 35 MB at ten
// times its rules. At the runtime's 100 the collector ran during each and
// took a fifth of their CPU; at 200 a probe and preview take 17% less
// time, for 8 MB more resident memory (docs/operations.md).
const AgentGCPercent = 200

// TuneGC gives the process the agent's garbage collector target,
// AgentGCPercent, unless the environment sets GOGC (which the runtime has
// then applied: the operator's choice stands). It returns a function that
// puts the target back as it was.
func TuneGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	was := debug.SetGCPercent(AgentGCPercent)
	return func() { debug.SetGCPercent(was) }
}

// Percent is the garbage collector's target in force.
func Percent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
