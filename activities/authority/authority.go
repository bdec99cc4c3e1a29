// Package authority is what a node's own configuration lets a request to
// its agent ask. Anyone who can reach Temporal can put a task on
// adoption-node-<node>, so a request is only a choice among what the node's
// file declares: the Authority read from that file, the checks of each
// field of a request (owners, ports, the mesh's ruleset, flip IDs, paths,
// the confirm timeout) against its plan, and the forms a signed intent for
// each activity must take. All of it is pure: nothing here reads or
// changes the node.
package authority

import (
	"path/filepath"
	"time"

	"adoption/config"
	"adoption/intent"
)

// Error types of the authority checks. None is retried: the request will
// not change by itself, and nothing was changed on the node.
const (
	// ErrPlanMismatch: the request's plan is not the node's own.
	ErrPlanMismatch = "PlanMismatch"
	// ErrNotDeclared: the request asks for something (a port, an owner, a
	// path, a ruleset, a timeout) the node's configuration does not declare.
	ErrNotDeclared = "NotDeclared"
	// ErrBadRequest: a malformed identifier (a flip ID, a workflow ID).
	ErrBadRequest = "BadRequest"
	// ErrLocalConfig: the node's own configuration cannot be read.
	ErrLocalConfig = "LocalConfig"
	// ErrBadOwner: an owner that is not a valid name, or that cannot open
	// what it asks for.
	ErrBadOwner = "BadOwner"
	// ErrMissingContent: the worker's configuration holds no content (a
	// file's, a variable's value) with a digest the plan names.
	ErrMissingContent = "MissingContent"
)

// Authority is what the node's own configuration says: the plan, the
// declared files' content (looked up by the hash the plan carries) and the
// limits the agent enforces whatever it is asked.
type Authority struct {
	Plan     config.Plan
	Contents map[string][]byte
	// MaxConfirmTimeout is flip.max_confirm_timeout.
	MaxConfirmTimeout time.Duration
	// EnableBootService is flip.enable_boot_service: the commit may enable
	// nftables.service (and switch off netfilter-persistent) itself.
	EnableBootService bool
	// Source names where it was read from, for messages ("/etc/adoption/n1.yaml").
	Source string
	// Operators are the keys whose signed intents the node acts on
	// (authority.operators); Unsigned, said explicitly with none listed,
	// lets it act on requests without one (intent.go).
	Operators *intent.Operators
	Unsigned  bool
	// Fleet is authority.fleet: the fleet whose workflow may read the plan.
	Fleet string
	// Intents is the directory of the intents' nonces (under state_dir).
	Intents string
}

// FromConfig is the authority of a loaded, validated configuration.
func FromConfig(c *config.Config, source string) *Authority {
	ops, _ := c.Authority.Keys() // validated at load; a nil set trusts no key
	return &Authority{Plan: c.Plan(), Contents: c.Contents(), MaxConfirmTimeout: c.Flip.MaxConfirmTimeout, Source: source,
		EnableBootService: c.Flip.EnableBootService, Operators: ops, Unsigned: c.Authority.Unsigned, Fleet: c.Authority.Fleet, Intents: IntentsDir(c.Node.StateDir)}
}

// Fixed is an authority that never changes and takes unsigned requests
// (tests, benchmarks).
func Fixed(p config.Plan, contents map[string][]byte, maxConfirm time.Duration) func() (*Authority, error) {
	return func() (*Authority, error) {
		return &Authority{Plan: p, Contents: contents, MaxConfirmTimeout: maxConfirm, Source: "fixed plan", Unsigned: true}, nil
	}
}

// IntentsDir is where a node keeps the nonces of the intents it acted on.
func IntentsDir(stateDir string) string { return filepath.Join(stateDir, "intents") }
