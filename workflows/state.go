package workflows

import (
	"time"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flipwire"
	"adoption/intent"
)

// Names on the wire. Renaming one breaks running workflows: keep them.
const (
	TaskQueue     = "adoption" // workflows; node activities go to NodeQueue(node)
	NodeWorkflow  = "NodeMigration"
	SignalMigrate = "migrate"
	SignalRetry   = "retry"
	SignalFlip    = "flip"
	SignalRelease = "release"
	SignalPrune   = "prune"
	QueryStatus   = "status"
	// Updates carry the same requests as the signals but answer at once, so
	// the CLI can print a refusal instead of the operator finding it later.
	UpdateMigrate = "migrate"
	UpdateRetry   = "retry"
	UpdateFlip    = "flip"
	UpdateRelease = "release"
	UpdatePrune   = "prune"
	// SignalDriftAccept records the node as it is now in custody.
	SignalDriftAccept = "drift-accept"
	// UpdatePreview runs a flip preview and returns it without flipping.
	UpdatePreview = "preview"
)

// WorkflowID is the one execution per node.
func WorkflowID(node string) string { return "node-migration/" + node }

// NodeQueue is the task queue that only the node's own worker polls.
func NodeQueue(node string) string { return "adoption-node-" + node }

// Phase is where a node is in its migration.
type Phase string

const (
	PhaseProbing   Phase = "probing"
	PhaseAdopted   Phase = "adopted"
	PhaseMigrating Phase = "migrating"
	PhaseFlipping  Phase = "flipping"
	PhaseConverged Phase = "converged"
	PhaseReleased  Phase = "released"
	PhaseFailed    Phase = "failed" // adoption itself failed; `adopt retry NODE` tries again
)

// Module states.
const (
	ModulePending   = "pending"
	ModuleQueued    = "queued"
	ModuleMigrating = "migrating"
	ModuleMigrated  = "migrated"
	ModuleFailed    = "failed"
)

// Input starts (or continues) a node's workflow.
type Input struct {
	Plan config.Plan `json:"plan"`
	// Resume is the state carried across continue-as-new; nil on a fresh start.
	Resume *State `json:"resume,omitempty"`
	// Intent is the operator's signed start (or the fleet's): the node
	// adopts only under it. Carried across continue-as-new for the
	// operation in progress.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// Request is one operator request, queued in arrival order.
type Request struct {
	Kind   string       `json:"kind"` // migrate, retry, flip, release
	Module string       `json:"module,omitempty"`
	Plan   *config.Plan `json:"plan,omitempty"` // an updated plan, applied when the request is served
	At     time.Time    `json:"at"`
	// Intent is the operator's signed request, for the node to check.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// ModuleState is one module's progress.
type ModuleState struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Step      string `json:"step,omitempty"`
	LastError string `json:"last_error,omitempty"`
	Attempts  int    `json:"attempts"`
	// Carried says what its container took over from the predecessor and
	// what the module changed (names only), as the last create reported.
	Carried *cutoverwire.Carried `json:"carried,omitempty"`
	// Hold is how its last swap held its ports: queued (clients waited
	// only for the new container), or dropped and why.
	Hold *cutoverwire.HoldReport `json:"hold,omitempty"`
	// Conflicts are keys of the module's files that the node changed since
	// custody and the mesh sets otherwise: the cutover refuses until each
	// is decided (adopt resolve). Names only, never values.
	Conflicts []FileConflict `json:"conflicts,omitempty"`
}

// FileConflict is one conflicting key of a declared file.
type FileConflict struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	Why  string `json:"why"`
}

// Decision is an operator's choice for a conflicting key: which side's
// value converging takes. It records the choice, never the value.
type Decision struct {
	Path string    `json:"path"`
	Key  string    `json:"key"`
	Take string    `json:"take"` // node or mesh
	At   time.Time `json:"at"`
	// Intent is the operator's signed resolve: the node applies the
	// decision only under it.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// StepState is the outcome of a one-off step such as genesis.
type StepState struct {
	State string `json:"state"` // "", done, failed
	Error string `json:"error,omitempty"`
}

// Event is a line of the node's recent history, for status.
type Event struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// State is the whole state of a node's migration: what `status` returns and
// what continue-as-new carries. It holds metadata only, never file content.
type State struct {
	Node         string                `json:"node"`
	Phase        Phase                 `json:"phase"`
	Plan         config.Plan           `json:"plan"`
	Probe        *nodewire.ProbeReport `json:"probe,omitempty"`
	Custody      []custody.Record      `json:"custody"`
	FirewallKind string                `json:"firewall_kind,omitempty"`
	Genesis      StepState             `json:"genesis"`
	Modules      []ModuleState         `json:"modules"`
	Queue        []Request             `json:"queue"`
	Marks        []firewall.MarkedRule `json:"marks"`
	// Opened is what should be open through the found firewall, by owner
	// (the foundation, each migrated module): what reconcile reasserts.
	Opened map[string][]config.Port `json:"opened,omitempty"`
	// OpenedForward is, by owner, the host ports its container publishes
	// that are open on the forward path: reconcile reasserts them too.
	OpenedForward map[string][]config.Port `json:"opened_forward,omitempty"`
	LastReconcile *Reconcile               `json:"last_reconcile,omitempty"`
	LastPreview   *flipwire.Preview        `json:"last_preview,omitempty"`
	Flip          *FlipStatus              `json:"flip,omitempty"`
	FlipAttempts  int                      `json:"flip_attempts,omitempty"`
	Drift         []nodewire.DriftItem     `json:"drift"`
	// DriftError is why the node's last drift check failed ("" when it ran).
	DriftError string `json:"drift_error,omitempty"`
	// Control are the predecessor's control daemons the node's watch found
	// running: migrate and flip are refused on the node while any runs.
	Control []nodewire.ControlDaemon `json:"control,omitempty"`
	// Decisions on conflicting keys, applied by the next migrate or retry.
	Decisions []Decision `json:"decisions,omitempty"`
	// FirewallFingerprint is the found firewall's own rules as adopted (or
	// as last accepted): what drift is measured against.
	FirewallFingerprint string `json:"firewall_fingerprint,omitempty"`
	LastError           string `json:"last_error,omitempty"`
	// Refused is the last request the node refused for its signed intent,
	// until a request is served again.
	Refused *Refusal          `json:"refused,omitempty"`
	Waiting string            `json:"waiting,omitempty"` // why the workflow waits, e.g. for the node agent
	Events  []Event           `json:"events"`
	Runs    int               `json:"runs"` // continue-as-new generations
	Extra   map[string]string `json:"extra,omitempty"`
}

// Reconcile is the outcome of the last reassertion of marked rules.
type Reconcile struct {
	At       time.Time             `json:"at"`
	Restored []firewall.MarkedRule `json:"restored,omitempty"`
	Present  int                   `json:"present"`
	Error    string                `json:"error,omitempty"`
}

// FlipStatus is where the last flip stands.
type FlipStatus struct {
	ID       string    `json:"id"`
	State    string    `json:"state"` // flipped, confirmed, committed, reverted
	Deadline time.Time `json:"deadline,omitempty"`
	Listing  string    `json:"listing,omitempty"` // the predecessor's firewall, saved on the node at commit
	Error    string    `json:"error,omitempty"`
}

// MigratedCount counts migrated modules.
func (s *State) MigratedCount() int {
	n := 0
	for _, m := range s.Modules {
		if m.State == ModuleMigrated {
			n++
		}
	}
	return n
}

// module returns the named module's state.
func (s *State) module(name string) *ModuleState {
	for i := range s.Modules {
		if s.Modules[i].Name == name {
			return &s.Modules[i]
		}
	}
	return nil
}

const maxEvents = 30
