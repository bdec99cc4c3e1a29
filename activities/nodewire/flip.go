// This file holds what the marks and the flip take and return: rules
// opened and closed, the flip's request in steps or in one round trip, its
// confirmation and its result.

package nodewire

import (
	"fmt"
	"time"

	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/flipwire"
	"adoption/intent"
	"adoption/witness"
)

// ErrPortCollision is the error type of a foundation port held by
// something else on the node.
const ErrPortCollision = "PortCollision"

// CheckPortsResult lists what the genesis check found.
type CheckPortsResult struct {
	Checked    int         `json:"checked"`
	Collisions []Collision `json:"collisions,omitempty"`
}

// RulesInput asks for an owner's ports to be opened (or closed). Forward
// lists host ports the owner's container publishes: they are opened on the
// forward path (ufw-user-forward, DOCKER-USER or the native forward chain),
// keyed on the port clients use.
type RulesInput struct {
	Plan    config.PlanRef `json:"plan"`
	Owner   string         `json:"owner"`
	Ports   []config.Port  `json:"ports"`
	Forward []config.Port  `json:"forward,omitempty"`
	// Intent is the operator's signed start (the foundation's) or migrate
	// or retry (a module's).
	Intent *intent.Signed `json:"intent,omitempty"`
}

// RulesResult lists the marked rules an operation added, found or removed.
type RulesResult struct {
	Added   []firewall.MarkedRule `json:"added,omitempty"`
	Present []firewall.MarkedRule `json:"present,omitempty"`
	Removed []firewall.MarkedRule `json:"removed,omitempty"`
	// NotPlaced are the owners a reconcile left alone: the node never
	// placed their marks.
	NotPlaced []string `json:"not_placed,omitempty"`
}

// ReconcileInput lists every owner's ports that should be open now:
// through the found firewall's input path (Owners) and, for the host ports
// an owner's container publishes, on its forward path (Forward).
type ReconcileInput struct {
	Plan    config.PlanRef           `json:"plan"`
	Owners  map[string][]config.Port `json:"owners"`
	Forward map[string][]config.Port `json:"forward,omitempty"`
}

// ReleaseResult lists the marked rules removed.
type ReleaseResult struct {
	Removed []firewall.MarkedRule `json:"removed"`
	// Units are the predecessor units the release enabled again, which
	// confirmed cutovers had disabled.
	Units []string `json:"units,omitempty"`
}

// Collision is a foundation port held by something else on the node.
type Collision struct {
	Name   string      `json:"name"`
	Port   config.Port `json:"port"`
	Holder string      `json:"holder"`
	Key    string      `json:"key"`
}

func (c Collision) String() string {
	return fmt.Sprintf("foundation port %s %s is held by %s; set %s to a free port", c.Name, c.Port, c.Holder, c.Key)
}

// Error types of the flip. The workflow decides by type what the node's
// answer means, so each names one outcome on the node.
const (
	ErrNotAdopted   = "NotAdopted"
	ErrStalePreview = "StalePreview" // nothing changed: the preview no longer holds
	// ErrFlipReverted: the flip was in force (or may have been) and is now
	// reverted on the node.
	ErrFlipReverted = "FlipReverted"
	// ErrFlipNotApplied: the node is known to be as before; nothing to undo.
	ErrFlipNotApplied = "FlipNotApplied"
	// ErrFlipConfirmed: the flip is confirmed on the node (maybe by a
	// confirmation whose answer was lost): it stays, and goes on to commit.
	ErrFlipConfirmed = "FlipAlreadyConfirmed"
)

// PreviewInput carries the mesh's ruleset as the workflow derives it from
// the plan and the node's progress.
type PreviewInput struct {
	Plan config.PlanRef    `json:"plan"`
	Spec flipwire.MeshSpec `json:"spec"`
	// Decisions on the node files' conflicting keys (without intents:
	// nothing is applied).
	Decisions []FileDecision `json:"decisions,omitempty"`
}

// FlipInput asks for the flip a preview approved: the spec it previewed
// and both fingerprints it saw.
type FlipInput struct {
	Plan        config.PlanRef    `json:"plan"`
	Spec        flipwire.MeshSpec `json:"spec"`
	ExpectFound string            `json:"expect_found"` // the preview's fingerprint of the found ruleset
	// ExpectDerived is the preview's fingerprint of the mesh's ruleset: the
	// node refuses to apply any other.
	ExpectDerived  string        `json:"expect_derived,omitempty"`
	ID             string        `json:"id"` // one per flip attempt: a retried activity resumes it
	ConfirmTimeout time.Duration `json:"confirm_timeout"`
	// Preview says the sender wants the node's preview back. The node
	// previews every new flip itself whatever this says, answers a refusal
	// by it as a result (FlipPreviewRefused), and applies only what its own
	// preview approved (gates.go); expectations sent beside it must match
	// that preview.
	Preview bool `json:"preview,omitempty"`
	// Intent is the operator's signed flip.
	Intent *intent.Signed `json:"intent,omitempty"`
	// Decisions settle the node files' conflicting keys, each with its
	// signed resolve.
	Decisions []FileDecision `json:"decisions,omitempty"`
}

// FlipPreviewRefused is the state of a flip whose own preview refused:
// nothing was recorded or changed, and FlipResult.Preview says why.
const FlipPreviewRefused = "preview-refused"

// FlipResult says where the flip stands.
type FlipResult struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Deadline time.Time `json:"deadline"`
	Listing  string    `json:"listing,omitempty"` // where the predecessor's leftovers were saved (commit)
	Note     string    `json:"note,omitempty"`
	// Preview is the node's own preview of a new flip: not on a resumed
	// attempt.
	Preview *flipwire.Preview `json:"preview,omitempty"`
	// Witness is the witness's verdict the flip in one round trip was
	// confirmed on, when it was witnessed and confirmed in this attempt.
	Witness *WitnessVerdict `json:"witness,omitempty"`
}

// QueryFlipWitness is the node workflow's query of the witness's verdict
// on a flip (its argument the flip ID): a WitnessVerdict.
const QueryFlipWitness = "flip-witness"

// Witness verdicts. Pending is "": the witness has not answered yet.
const (
	WitnessAnswered  = witness.Answered
	WitnessLockedOut = witness.LockedOut
)

// WitnessVerdict is what the workflow knows of the witness of flip ID, and
// what the witness heartbeats.
type WitnessVerdict = witness.Verdict

// FlipTripInput is a flip in one round trip.
type FlipTripInput struct {
	FlipInput
	// Witness says the workflow witnesses the flip from outside the node:
	// the node confirms only once the verdict says a management port
	// answered after the flip was applied.
	Witness bool `json:"witness,omitempty"`
}

// ConfirmInput names the flip to revert or commit.
type ConfirmInput struct {
	Plan config.PlanRef `json:"plan"`
	ID   string         `json:"id"`
	// Intent is the operator's signed flip (or, for a commit, retry).
	Intent *intent.Signed `json:"intent,omitempty"`
}
