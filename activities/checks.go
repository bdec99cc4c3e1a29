// This file holds the node's own checks, which its watch (package
// activities/watch) runs inside the agent: reassert the marked rules,
// look for drift, look for the predecessor's control daemons.

package activities

import "context"

// Checks are the node's own checks. No workflow schedules them, so they
// are methods of Checks, not of Activities: the agent registers
// Activities with Temporal, and nothing that can reach the node's task
// queue can ask for a check by name.
type Checks struct{ Activities *Activities }

// Reconcile puts back the marked rules the node placed that vanished
// (Activities.reconcile).
func (c Checks) Reconcile(ctx context.Context, in ReconcileInput) (*RulesResult, error) {
	return c.Activities.reconcile(ctx, in)
}

// CheckDrift compares the custody files and the found firewall with what
// adoption recorded (Activities.checkDrift).
func (c Checks) CheckDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	return c.Activities.checkDrift(ctx, in)
}

// CheckControl looks for the predecessor's control daemons
// (Activities.checkControl).
func (c Checks) CheckControl(ctx context.Context, in DriftInput) (*ControlResult, error) {
	return c.Activities.checkControl(ctx, in)
}
