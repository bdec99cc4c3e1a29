// What a node's workflow and its fleet (package workflows/fleet) say to each
// other: the node's side lives here so that the node never imports the fleet.
package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

const (
	// SignalNodeProgress is sent by each node's workflow to its fleet when
	// its phase or its modules change.
	SignalNodeProgress = "node-progress"
	// SignalFleetAsk is the fleet's no-op to a node's workflow: only whether
	// it can be delivered matters. Its name is a wire format; the node drops it.
	SignalFleetAsk = "fleet-ask"
)

// NodeProgress is what a node's workflow tells its fleet.
type NodeProgress struct {
	Node     string `json:"node"`
	Phase    Phase  `json:"phase"`
	Migrated int    `json:"migrated"`
	Modules  int    `json:"modules"`
}

// ErrorMessage is the operator-facing text of an activity or child error,
// as the node's own events word it.
func ErrorMessage(err error) string { return errorMessage(err) }

// LateAfter refuses a request that arrives after notAfter (zero: never), as
// the node's own requests are refused.
func LateAfter(ctx workflow.Context, notAfter time.Time) error { return lateAfter(ctx, notAfter) }
