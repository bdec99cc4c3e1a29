// Registration: every workflow type the orchestrator runs, the node's and
// the fleet's, each with its stated versioning behaviour. The replay tests
// register through the same function, so what they replay is what the
// orchestrator would run.
package fleet

import (
	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
)

// Register registers every workflow type under its wire name. The fleet is
// AutoUpgrade for the reasons workflows.Register gives.
func Register(r workflows.Registry) {
	workflows.Register(r)
	r.RegisterWorkflowWithOptions(Fleet, workflow.RegisterOptions{
		Name: FleetWorkflow, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
}
