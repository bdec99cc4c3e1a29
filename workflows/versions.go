// Every change ID the node's workflow passes to workflow.GetVersion, in one
// place (the fleet's are in workflows/fleet/versions.go).
// A change ID is a wire format: it is recorded in histories as a marker and
// must never be renamed. docs/histories.md says which recorded histories
// keep replaying and when a version branch may go.
package workflows

import "go.temporal.io/sdk/workflow"

const (
	// changeBoundedHistory: runs use exec, awaitWithTimeout, publish and
	// finish as history.go writes them.
	changeBoundedHistory = "bounded-history"
	// changeDriftChecks: adopted runs look for drift on a timer.
	changeDriftChecks = "drift-checks"
	// changeFlipHolds: the flip's command sequence with the approved spec
	// and fingerprint, revert until the node answers, commit as a
	// retryable step.
	changeFlipHolds = "flip-holds"
	// changeFlipTwoSteps: the flip in two round trips to the node instead
	// of four (preview and flip in one activity, confirm and commit in one).
	changeFlipTwoSteps = "flip-two-steps"
	// changeFlipOneTrip: the flip in one round trip (FlipTrip: preview,
	// apply, a heartbeat the server acknowledged, the witness's verdict by
	// query, confirm, commit), the witness started beside it; the fleet is
	// told only how the flip ended. Decided once a run, beside
	// changeFlipTwoSteps.
	changeFlipOneTrip = "flip-one-trip"
	// changeNewModuleChecks: a second migrate of a module new in the plan
	// sent is refused, and a migrate of a module already migrated is
	// skipped. Asked only when one of them would act.
	changeNewModuleChecks = "new-module-checks"
	// changeForwardMarks: a module with only published ports opens them on
	// the forward path. Asked only for such a module.
	changeForwardMarks = "forward-marks"
	// changeHealthWithoutContainer: the declared health of a module with no
	// container is checked before it counts as migrated. Asked only for
	// such a module.
	changeHealthWithoutContainer = "health-without-container"
	// changePreviewPlanOnAccept: a plan sent with a preview replaces the
	// workflow's only once the node accepted it (its Preview activity
	// answered, so the node's own file derives that plan); before, it was
	// applied first and stayed when the node refused it. Asked only when a
	// preview carries a plan that differs.
	changePreviewPlanOnAccept = "preview-plan-on-accept"
	// changeFlipWitness: a flip is confirmed only after a management port
	// answered from outside the node (the orchestrator's witness); else it
	// is reverted. Asked once a flip is applied.
	changeFlipWitness = "flip-witness"
	// changeGenesisRaises: genesis raises the foundation's containers
	// (RaiseFoundation) and opens only the foundation ports something
	// then listens on. Asked only for a plan that declares containers.
	changeGenesisRaises = "genesis-raises"
	// changeFlipAfterGenesis: a flip of the control node is refused while
	// its genesis has not succeeded. Asked only when it would refuse.
	changeFlipAfterGenesis = "flip-after-genesis"
	// changeGenesisBeforeFlip: a control node's flip with no recorded
	// genesis outcome runs genesis first; changeMemberPlacement: a member
	// declaring the overlay's port checks it again once adopted.
	changeGenesisBeforeFlip, changeMemberPlacement = "genesis-before-flip", "member-placement"
	// changeNodeWatch: an adopted node reasserts its marks and looks for
	// drift in its agent's own loop, and the workflow waits on one Watch
	// activity that answers only when something changed, instead of a
	// timer and an activity per check. Decided once a run, at its start.
	changeNodeWatch = "node-watch"
	// changeFlipVerdictCarried: a flip in one round trip that the node
	// committed on the witness's verdict it read goes on with that
	// verdict (the node's result carries it) instead of waiting for the
	// witness's activity to end. Decided once a run, at its start.
	changeFlipVerdictCarried = "flip-verdict-carried"
	// changeUntimedSteps: a node activity waits in its queue without the
	// timer that made status say the agent may be down: status reads the
	// pending activities (the CLI's, the Web UI's). Decided once a run, at
	// its start.
	changeUntimedSteps = "untimed-steps"
	// changeAttention: the workflow keeps the AdoptionAttention search
	// attribute (attention.go) beside AdoptionNode and AdoptionPhase.
	// Decided once a run, at its start.
	changeAttention = "attention"
	// changeFilesAtSwap: a module with a container converges its files
	// inside its swap (after the predecessor stopped, before the new
	// container started), with no ConvergeFiles step before it. Asked only
	// for a module with a container and files.
	changeFilesAtSwap = "files-at-swap"
)

// taken records that this run takes change. Every history kept for replay
// was recorded with it, so the branch for runs before it is gone; the call
// stays where it was, so new runs record the marker those histories carry.
func taken(ctx workflow.Context, change string) {
	_ = workflow.GetVersion(ctx, change, 1, 1)
}

// Taken is taken for the fleet's change IDs (workflows/fleet/versions.go).
func Taken(ctx workflow.Context, change string) { taken(ctx, change) }
