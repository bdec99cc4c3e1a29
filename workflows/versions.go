// The change IDs the node's workflow passed to workflow.GetVersion while
// it had version branches (the fleet's are in workflows/fleet/versions.go).
// Every one is retired: the kept histories that carry their markers took
// each at version 1, as today's code always does, and the SDK's replay
// passes over version markers the code no longer asks for; runs since
// record none. A change ID is a wire format: a new change never takes one
// of these names. docs/histories.md says which recorded histories keep
// replaying and how a new change is versioned.
package workflows

// RetiredChanges are the node's change IDs no code asks any more, kept so
// that none is used again (tests/replay_test.go).
var RetiredChanges = []string{
	"attention",
	"bounded-history",
	"drift-checks",
	"files-at-swap",
	"flip-after-genesis",
	"flip-holds",
	"flip-one-trip",
	"flip-two-steps",
	"flip-verdict-carried",
	"flip-witness",
	"forward-marks",
	"genesis-before-flip",
	"genesis-raises",
	"health-without-container",
	"member-placement",
	"new-module-checks",
	"node-watch",
	"preview-plan-on-accept",
	"untimed-steps",
}
