// This file holds what the node's probe, adoption, briefing, drift check,
// foundation and plan activities take and return, and the error types of
// their refusals.

package nodewire

import (
	"fmt"
	"time"

	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flipwire"
	"adoption/intent"
	"adoption/sockets"
)

// Error types: the workflow tells by type what is the operator's to fix.
const (
	ErrWrongNode      = "WrongNode"
	ErrControlRunning = "ControlDaemonRunning"
	ErrUnsupportedFW  = "UnsupportedFirewall"
	ErrBadPath        = "BadPath"
)

// ProbeInput and the other inputs carry the node's plan.
type ProbeInput struct {
	Plan config.PlanRef `json:"plan"`
	// Intent is the operator's signed request (intent.go), for the
	// activities that change the node; the others ignore it.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// ProbeReport is the read-only picture of the node.
type ProbeReport struct {
	Node         string              `json:"node"`
	At           time.Time           `json:"at"`
	Firewall     firewall.Report     `json:"firewall"`
	Sockets      []sockets.Listener  `json:"sockets"`
	SocketsError string              `json:"sockets_error,omitempty"`
	Containers   cutoverwire.Report  `json:"containers"`
	Files        []custody.FileState `json:"files"`
	Control      []sockets.Process   `json:"control"`
	Adopted      bool                `json:"adopted"`
	// Unknowns names what the probe could not judge (package unknowns): an
	// engine it could not reach while the node needs one, a container
	// network it cannot map, an opening left uncertain and why, a DNAT
	// to an address no container holds.
	Unknowns []string `json:"unknowns,omitempty"`
	// Behind names the running container that holds each DNAT target of
	// the openings (Opening.Via -> container name), as the node's engine
	// reports its networks: the service a client of a published port
	// reaches. A Via no container holds is in Unknowns instead.
	Behind map[string]string `json:"behind,omitempty"`
}

// AdoptInput carries the plan and the workflow that adopts the node.
type AdoptInput struct {
	Plan       config.PlanRef `json:"plan"`
	WorkflowID string         `json:"workflow_id"`
	Intent     *intent.Signed `json:"intent,omitempty"`
}

// AdoptResult records what was taken into custody: metadata only.
type AdoptResult struct {
	Custody  []custody.Record `json:"custody"`
	Firewall string           `json:"firewall_kind"`
	// FirewallFingerprint is the found firewall's own rules as adopted:
	// drift is measured against it.
	FirewallFingerprint string `json:"firewall_fingerprint"`
}

// BriefInput is what the workflow recorded, for the node to measure the
// node against: the spec a flip would apply, custody, the firewall's
// fingerprint as adopted, and the modules still to migrate with the
// decisions recorded for their keys.
type BriefInput struct {
	Plan     config.PlanRef    `json:"plan"`
	Spec     flipwire.MeshSpec `json:"spec"`
	Custody  []custody.Record  `json:"custody"`
	Firewall string            `json:"firewall"`
	Modules  []BriefModule     `json:"modules"`
	// NodeFileDecisions are the decisions on the node files' keys
	// (without intents: nothing is applied).
	NodeFileDecisions []FileDecision `json:"node_file_decisions,omitempty"`
}

// BriefModule is a module still to migrate and the decisions recorded for
// its keys (without their intents: nothing is applied).
type BriefModule struct {
	Module    string         `json:"module"`
	Decisions []FileDecision `json:"decisions,omitempty"`
}

// NodeBriefing is the node's answer. A part it could not measure says why
// in its Error field; the others stand.
type NodeBriefing struct {
	Preview      *flipwire.Preview `json:"preview,omitempty"`
	PreviewError string            `json:"preview_error,omitempty"`
	Drift        []DriftItem       `json:"drift"`
	DriftError   string            `json:"drift_error,omitempty"`
	Conflicts    []ModuleConflicts `json:"conflicts,omitempty"`
}

// ModuleConflicts are the keys of a module's files the node changed since
// custody and the mesh sets otherwise.
type ModuleConflicts struct {
	Module    string         `json:"module"`
	Conflicts []FileConflict `json:"conflicts,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// ControlDaemon is a predecessor's control daemon found running: names and
// numbers only.
type ControlDaemon struct {
	PID  int    `json:"pid"`
	Exe  string `json:"exe"`
	User string `json:"user,omitempty"`
	// Unit is the systemd user unit it runs in, "" when none.
	Unit string `json:"unit,omitempty"`
	// Stop says how to stop it for good.
	Stop string `json:"stop"`
}

// String names the daemon as a refusal or the status shows it.
func (d ControlDaemon) String() string {
	s := fmt.Sprintf("%s (pid %d", d.Exe, d.PID)
	if d.User != "" {
		s += ", user " + d.User
	}
	if d.Unit != "" {
		s += ", user unit " + d.Unit
	}
	return s + "); stop it for good: " + d.Stop
}

// DriftItem is one difference between the node and what adoption recorded.
type DriftItem struct {
	Kind     string `json:"kind"` // file or firewall
	Path     string `json:"path,omitempty"`
	Recorded string `json:"recorded"` // the keyed digest (or "absent") recorded in custody; the fingerprint for the firewall
	Now      string `json:"now"`
	What     string `json:"what"`
}

// DriftInput is what adoption recorded.
type DriftInput struct {
	Plan     config.PlanRef   `json:"plan"`
	Custody  []custody.Record `json:"custody"`
	Firewall string           `json:"firewall"` // FoundFingerprint at adoption (or at the last accepted drift)
	// Intent is the operator's signed drift accept (AcceptDrift only).
	Intent *intent.Signed `json:"intent,omitempty"`
}

// DriftResult lists the differences; when accepting, the new records.
type DriftResult struct {
	Items    []DriftItem      `json:"items"`
	Custody  []custody.Record `json:"custody,omitempty"`
	Firewall string           `json:"firewall,omitempty"`
}

// ErrGenesis is the error type of a foundation container that could not be
// raised (or was refused) at genesis.
const ErrGenesis = "GenesisFailed"

// FoundationResult is what genesis raised and which foundation ports
// something listens on once it did: only those are opened.
type FoundationResult struct {
	Raised    []string           `json:"raised,omitempty"`
	Listening []config.NamedPort `json:"listening,omitempty"`
	Silent    []config.NamedPort `json:"silent,omitempty"`
}

// Error types of the gates. None is retried, and nothing was changed.
const (
	// ErrCutoverConfirmed: the module's cutover is confirmed on the node;
	// a rollback (or closing its rules) is refused.
	ErrCutoverConfirmed = "CutoverConfirmed"
	// ErrFlipRefused: the node refuses a flip before applying anything
	// (a witnessed node that cannot authenticate the witness's verdict); its
	// own gates and preview refuse by a result (FlipPreviewRefused).
	ErrFlipRefused = "FlipRefused"
)

// ErrIntentRefused is the error type of a request whose signed intent the
// node refuses; its detail is the reason (intent.Refusal.Reason). Never
// retried: nothing was changed, and the request will not sign itself.
const ErrIntentRefused = "IntentRefused"

// PlanInput names the node whose plan is asked for. A fleet sends the
// operator's intent to start the node in it (the one its workflow will
// adopt the node with): the node answers a fleet only under it.
type PlanInput struct {
	Node   string         `json:"node"`
	Intent *intent.Signed `json:"intent,omitempty"`
}

// ErrBadPlan: the node's own configuration does not load.
const ErrBadPlan = "BadPlan"
