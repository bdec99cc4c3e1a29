// The node's plan as its agent reads it now: what a Fleet starts the node's
// workflow with, so the fleet's own input carries names, not plans.
package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/nodewire"
	"adoption/config"
)

// PlanInput is nodewire.PlanInput.
type PlanInput = nodewire.PlanInput

// Plan reads the node's configuration as it is on the node at this moment.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (*config.Plan, error) {
	if in.Node != a.Node {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"asked for node %s's plan, but this agent is node %s's: check the fleet file and node.name", in.Node, a.Node), ErrWrongNode, nil)
	}
	if a.Local == nil {
		return nil, temporal.NewNonRetryableApplicationError("this agent cannot read its configuration (no Local)", ErrBadPlan, nil)
	}
	auth, err := a.Local()
	if err != nil {
		// The file on the node is broken: retrying will not fix it, the
		// operator must, then `adopt fleet retry`.
		return nil, temporal.NewNonRetryableApplicationError("node "+a.Node+"'s configuration: "+err.Error(), ErrBadPlan, err)
	}
	if err := a.checkPlanReader(ctx, auth, in.Intent); err != nil {
		return nil, err
	}
	p := auth.Plan
	return &p, nil
}

// ErrBadPlan is nodewire.ErrBadPlan.
const ErrBadPlan = nodewire.ErrBadPlan
