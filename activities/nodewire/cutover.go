// This file holds what a module's cutover, its rehearsal and the merge of
// its declared files take and return.

package nodewire

import (
	"adoption/activities/authority"
	"adoption/activities/filemerge"
	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/intent"
)

// Error types of the cutover.
const (
	ErrBadModule      = "BadModule"
	ErrCutoverRefused = "CutoverRefused"
	ErrMissingContent = authority.ErrMissingContent
	ErrUnhealthy      = "Unhealthy"
)

// ModuleInput names a module of the plan.
type ModuleInput struct {
	Plan   config.PlanRef `json:"plan"`
	Module string         `json:"module"`
	// Decisions settle conflicting keys of the module's files (adopt
	// resolve): which side each takes, never a value.
	Decisions []FileDecision `json:"decisions,omitempty"`
	// Intent is the operator's signed migrate or retry of the module.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// CutoverInput carries a module's cutover, with what preflight recorded.
type CutoverInput struct {
	Plan        config.PlanRef           `json:"plan"`
	Module      string                   `json:"module"`
	Predecessor *cutoverwire.Predecessor `json:"predecessor,omitempty"`
	Intent      *intent.Signed           `json:"intent,omitempty"`
	// Decisions on the container's conflicting variables and labels.
	Decisions []FileDecision `json:"decisions,omitempty"`
}

// CutoverResult reports a cutover step.
type CutoverResult struct {
	Step        string                   `json:"step"`
	Predecessor *cutoverwire.Predecessor `json:"predecessor,omitempty"`
	Files       []string                 `json:"files,omitempty"`
	// Carried says what the new container took over from its predecessor
	// and what the module changed: names only, never a value.
	Carried *cutoverwire.Carried `json:"carried,omitempty"`
	// Hold says how the swap (or the rollback's swap back) held the
	// module's ports: queued, or dropped and why.
	Hold *cutoverwire.HoldReport `json:"hold,omitempty"`
	// Drain says how an overlap's predecessor finished its connections
	// before it was stopped: how long, and how many the bound cut short.
	Drain *cutoverwire.DrainReport `json:"drain,omitempty"`
}

// PruneInput names the modules whose kept predecessors go.
type PruneInput struct {
	Plan    config.PlanRef `json:"plan"`
	Modules []string       `json:"modules"`
	Intent  *intent.Signed `json:"intent,omitempty"`
}

// ErrFileConflict is the error type of a refusal on conflicting keys; its
// details are the []FileConflict.
const (
	ErrFileConflict = filemerge.ErrFileConflict
)

// The merge of declared files, as the node reports it (package filemerge).
type (
	// FileConflict is a conflicting key of a declared file: names only.
	FileConflict = filemerge.Conflict
	// FileDecision is an operator's choice for a conflicting key.
	FileDecision = filemerge.Decision
	// FileMerge is the outcome of merging one file, by key name.
	FileMerge = filemerge.Merge
)

// Rehearsal is what a module's cutover would do on the node now.
type Rehearsal struct {
	Node   string `json:"node"`
	Module string `json:"module"`
	// Steps, in the order the cutover takes them.
	Steps []RehearsalStep `json:"steps"`
	// Predecessor is what preflight measured of the container(s) the module
	// takes over: mounts with their volumes and bind paths, published
	// ports, networks and the names of its settings.
	Predecessor *cutoverwire.Predecessor `json:"predecessor,omitempty"`
	// Holders of the module's ports now.
	Holders []PortHolder `json:"holders,omitempty"`
	// Marks the cutover would add through the found firewall.
	Marks []string `json:"marks,omitempty"`
	// Files: what converging each declared file would write, by key.
	Files []FileMerge `json:"files,omitempty"`
	// Refusals the cutover would hit, each with what to do. Empty: it
	// would go ahead.
	Refusals []string `json:"refusals,omitempty"`
}

// RehearsalStep is one step and what it would touch.
type RehearsalStep struct {
	Name    string   `json:"name"`
	Touches []string `json:"touches,omitempty"`
}

// PortHolder is who holds a module port now.
type PortHolder struct {
	Port   string `json:"port"`
	Holder string `json:"holder"`
}
