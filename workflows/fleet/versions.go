// Every change ID the fleet passes to workflow.GetVersion, in one place.
// A change ID is a wire format: it is recorded in histories as a marker and
// must never be renamed. docs/histories.md says which recorded histories
// keep replaying and when a version branch may go.
package fleet

import "go.temporal.io/sdk/workflow"

const (
	// changeFleetMembers: fleets run with members whose plans are read
	// per node, and continue-as-new.
	changeFleetMembers = "fleet-members"
	// changeFleetPassOver: `adopt fleet next` passes over the nodes that
	// hold the fleet, so the fleet can end without them. Decided once a
	// run, at its start.
	changeFleetPassOver = "fleet-pass-over"
	// changeFleetAsk: the fleet asks quiet nodes from an earlier run
	// whether their workflow still runs. Decided once a run, at its start.
	changeFleetAsk = "fleet-ask"
	// changeFleetWaves: the fleet starts its nodes in waves, each within a
	// budget of failures. Asked once a run, only by a fleet with waves.
	changeFleetWaves = "fleet-waves"
	// changeFleetOps: the fleet sends its nodes a fleet migrate or flip
	// through the orchestrator's relay activity. Asked once a run, only
	// when an op sends a wave.
	changeFleetOps = "fleet-ops"
	// changeFleetDescribe: an ask round describes the quiet nodes through
	// the orchestrator's relay (the run the fleet started, by run ID)
	// instead of signalling them. Asked only by a round with nodes to ask.
	changeFleetDescribe = "fleet-describe"
	// changeFleetVisibility: a round is one visibility query for the
	// fleet's children closed since the round before, from a local
	// activity, each close confirmed by a describe, instead of describing
	// up to askBatch nodes by an activity. Asked only by a round with
	// nodes to ask.
	changeFleetVisibility = "fleet-visibility"
	// changeFleetAttention: the fleet sets AdoptionAttention to wave-held
	// while failed nodes hold it, and clears it. Asked only when that
	// changes.
	changeFleetAttention = "fleet-attention"
	// changeFleetRelayBatches: a fleet op sends a wave's requests in
	// batches of relayBatch nodes, one relay activity a batch, instead of
	// one a node. Asked once a run, when an op sends its first wave.
	changeFleetRelayBatches = "fleet-relay-batches"
	// changeFleetOpsFollow: a fleet migrate follows the waves (the nodes
	// not started yet are sent their request as their wave starts), a
	// migrate of another module goes along with it, and a node's request
	// counts as served as soon as its own progress says so. Asked once a
	// run, by the first fleet migrate or the first wave an op sends.
	changeFleetOpsFollow = "fleet-ops-follow"
)

// taken records that this run takes change. Every history kept for replay
// was recorded with it, so the branch for runs before it is gone; the call
// stays where it was, so new runs record the marker those histories carry.
func taken(ctx workflow.Context, change string) {
	_ = workflow.GetVersion(ctx, change, 1, 1)
}
