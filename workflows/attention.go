// Attention: whether a node needs a person, and for what, as one keyword
// search attribute (AdoptionAttention), so that one visibility query
// (AdoptionAttention != "") finds every such node of a fleet. Derived from
// the state alone; empty once resolved.

package workflows

import "go.temporal.io/sdk/temporal"

// AttrAttention is what the node (or the fleet) waits for a person for;
// empty when nothing. Registered on the server beside AdoptionNode and
// AdoptionPhase.
var AttrAttention = temporal.NewSearchAttributeKeyKeyword("AdoptionAttention")

// The values of AdoptionAttention. A wire format: saved queries name them.
const (
	// AttentionAgentSilent: a step waits for the node's agent, which does
	// not answer (adopt-worker is down or cut off).
	AttentionAgentSilent = "agent-silent"
	// AttentionAdoptionFailed: the adoption itself failed (adopt retry NODE).
	AttentionAdoptionFailed = "adoption-failed"
	// AttentionGenesisFailed: the control node's genesis failed.
	AttentionGenesisFailed = "genesis-failed"
	// AttentionFlipPendingConfirm: a flip is confirmed and in force, and
	// its commit failed: it waits for adopt retry NODE.
	AttentionFlipPendingConfirm = "flip-pending-confirm"
	// AttentionCutoverFailed: a module's cutover failed or was refused
	// (adopt retry NODE MODULE, after adopt resolve for a conflict).
	AttentionCutoverFailed = "cutover-failed"
	// AttentionRequestRefused: the node refused the last request for its
	// signed intent.
	AttentionRequestRefused = "request-refused"
	// AttentionDrift: the node changed since custody; review it.
	AttentionDrift = "drift"
	// AttentionPreviewRefused: the last preview (or a flip's) refused.
	AttentionPreviewRefused = "preview-refused"
	// AttentionWaveHeld: the fleet holds a wave (its failures reached the
	// wave's bound): set on the fleet's workflow.
	AttentionWaveHeld = "wave-held"
)

// Attention is what the node in s needs a person for, the most pressing
// first, or "".
func Attention(s *State) string {
	switch s.Phase {
	case PhaseConverged, PhaseReleased:
		return ""
	case PhaseFailed:
		return AttentionAdoptionFailed
	}
	if s.Waiting != "" {
		return AttentionAgentSilent
	}
	if s.Genesis.State == "failed" {
		return AttentionGenesisFailed
	}
	if s.Flip != nil && s.Flip.State == FlipStateCommitting {
		return AttentionFlipPendingConfirm
	}
	for _, m := range s.Modules {
		if m.State == ModuleFailed || len(m.Conflicts) > 0 {
			return AttentionCutoverFailed
		}
	}
	if s.Refused != nil {
		return AttentionRequestRefused
	}
	if len(s.Drift) > 0 {
		return AttentionDrift
	}
	if s.LastPreview != nil && !s.LastPreview.Approved && s.Phase == PhaseAdopted {
		return AttentionPreviewRefused
	}
	return ""
}
