// Registration of the node's workflow type with its stated versioning
// behaviour. The orchestrator and the replay tests register every type
// through workflows/fleet.Register, which calls this one.
package workflows

import "go.temporal.io/sdk/workflow"

// DeploymentName is the Worker Deployment the orchestrator belongs to; each
// build of adopt-worker is one version of it (its build ID).
const DeploymentName = "adoption"

// Registry is the part of a worker (or a replayer) that takes workflows.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the node's workflow type under its wire name.
//
// Both types (this one and the fleet's) are AutoUpgrade, not Pinned. A node's adoption lives for weeks
// (adopt, then migrate modules one by one at the operator's pace, then
// flip), and a fleet as long as its slowest node. Pinned would tie each run
// to the build that started it: every old orchestrator build would have to
// keep running until the last workflow it started ends, weeks later, and a
// fix would never reach a running node. AutoUpgrade moves a running
// workflow to the deployment's current version at its next workflow task;
// the price is that new code must replay old histories, which is what
// workflow.GetVersion and the recorded histories replayed in make test
// (tests/replay_test.go) enforce. Both also continue-as-new, and a new run
// starts on the current version anyway.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(NodeMigration, workflow.RegisterOptions{
		Name: NodeWorkflow, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	})
}
