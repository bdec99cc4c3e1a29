// This file holds what the agent's watch takes and returns (package
// activities/watch runs it): the request, its findings, how often it beats.

package nodewire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
)

// Input is what the workflow asks the node to watch, and what it knows.
// It names the plan by hash: the loop's intervals are the node's own
// plan's, read from its file when the request is authorized.
type Input struct {
	Plan config.PlanRef `json:"plan"`
	// Owners and Forward are the marked rules to keep (as ReconcileInput);
	// Reconcile is false when there are none to keep.
	Owners    map[string][]config.Port `json:"owners,omitempty"`
	Forward   map[string][]config.Port `json:"forward,omitempty"`
	Reconcile bool                     `json:"reconcile"`
	// Custody and Firewall are the drift baseline (as DriftInput); Drift
	// is false when drift is not looked for.
	Custody  []custody.Record `json:"custody,omitempty"`
	Firewall string           `json:"firewall,omitempty"`
	Drift    bool             `json:"drift"`
	// Known is the Digest of the findings the workflow holds: the watch
	// returns when the node's differ.
	Known string `json:"known"`
	// KnownControl is the ControlDigest of the control daemons the
	// workflow holds: the watch returns when those running differ, before
	// the other checks have run.
	KnownControl string `json:"known_control,omitempty"`
	// Bound is how long the watch may last with nothing changed.
	Bound time.Duration `json:"bound"`
}

// Findings are what the checks found that the workflow records.
type Findings struct {
	Drift          []DriftItem `json:"drift,omitempty"`
	DriftError     string      `json:"drift_error,omitempty"`
	ReconcileError string      `json:"reconcile_error,omitempty"`
	// Control are the predecessor's control daemons running on the node,
	// looked for on every round of the loop.
	Control []ControlDaemon `json:"control,omitempty"`
}

// Digest names findings: equal findings, equal digests (an empty list and
// none are the same, and drift is not counted when its check failed).
func (f Findings) Digest() string {
	if len(f.Drift) == 0 || f.DriftError != "" { // a failed check says nothing of the drift
		f.Drift = nil
	}
	if len(f.Drift) == 0 {
		f.Drift = nil
	}
	if len(f.Control) == 0 {
		f.Control = nil
	}
	b, _ := json.Marshal(f)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ControlDigest names a list of control daemons: "" for none.
func ControlDigest(ds []ControlDaemon) string {
	if len(ds) == 0 {
		return ""
	}
	b, _ := json.Marshal(ds)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Result is what the watch returns: the findings now, and the repairs made
// since the last result.
type Result struct {
	Findings
	Digest   string                `json:"digest"`
	Restored []firewall.MarkedRule `json:"restored,omitempty"`
	Present  int                   `json:"present"`
	// Reconciled is when the marked rules were last reasserted (zero:
	// not since the watch began).
	Reconciled time.Time `json:"reconciled,omitzero"`
	// Checked: the findings are the node's (false: its records vetoed
	// every check since the watch began, and the findings say nothing).
	Checked bool `json:"checked"`
	// Bound: nothing changed, the watch ran its bound.
	Bound bool `json:"bound,omitempty"`
}

// BeatEvery is how often a waiting watch heartbeats under timeout, as
// configured by default.
func BeatEvery(timeout time.Duration) time.Duration { return HeartbeatEvery(0, timeout) }

// HeartbeatEvery is how often a waiting watch heartbeats: as configured, else a
// third of the heartbeat timeout the workflow set, else every 20 s.
func HeartbeatEvery(configured, timeout time.Duration) time.Duration {
	switch {
	case configured > 0:
		return configured
	case timeout > 0:
		return timeout / 3
	}
	return 20 * time.Second
}
