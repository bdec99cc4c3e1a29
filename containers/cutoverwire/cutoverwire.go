// Package cutoverwire holds the cutover's values that cross Temporal: the
// predecessor a cutover replaces (its mounts, published ports), what the
// new container carried over, how a swap held the ports, and the keys of
// value conflicts. It does no I/O, so the workflows and the CLI read them
// without linking Docker's client; package containers runs the cutover.
package cutoverwire

import (
	"fmt"
	"strings"
	"time"
)

type Mount struct {
	Type        string `json:"type"` // volume, bind or tmpfs
	Name        string `json:"name,omitempty"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// ReadOnly and Anonymous are filled in by Preflight, which reads the
	// container's configuration; the report's list leaves them unset.
	ReadOnly    bool   `json:"read_only,omitempty"`
	Anonymous   bool   `json:"anonymous,omitempty"` // a volume Docker named itself (image VOLUME or -v /path)
	Propagation string `json:"propagation,omitempty"`
}

type Published struct {
	HostIP        string `json:"host_ip,omitempty"`
	HostPort      uint16 `json:"host_port"`
	ContainerPort uint16 `json:"container_port"`
	Proto         string `json:"proto"`
}

// Predecessor is what Preflight records of the container a module replaces,
// before anything changes. It goes into the workflow history.
type Predecessor struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Image   string `json:"image"`    // as configured, e.g. "mail:1.4"
	ImageID string `json:"image_id"` // what it actually ran
	// Mounts: named volumes, anonymous volumes (by the name Docker gave
	// them), bind mounts; the new container gets the same ones.
	Mounts []Mount     `json:"mounts,omitempty"`
	Ports  []Published `json:"ports,omitempty"`
	// Networks, the primary one first; or a single "host", "none" or
	// "container:<id>" network mode.
	Networks      []string            `json:"networks,omitempty"`
	Aliases       map[string][]string `json:"aliases,omitempty"` // per network, as the predecessor's were
	RestartPolicy string              `json:"restart_policy"`
	Running       bool                `json:"running"`
	// Env and Labels name what the operator gave the predecessor (not its
	// image): names only, the values stay on the node.
	Env    []string `json:"env,omitempty"`
	Labels []string `json:"labels,omitempty"`
	// Replaces are the predecessors of other names (Spec.Replaces).
	Replaces []Predecessor `json:"replaces,omitempty"`
}

// Carried says what the new container took over from its predecessor and
// what the module set instead: names only, never a value.
type Carried struct {
	From string `json:"from,omitempty"` // the predecessor carried over
	// Env: the operator's variables carried; EnvImage: the predecessor's
	// image set them, so the new image's own apply; EnvSet: the module's.
	Env      []string `json:"env,omitempty"`
	EnvImage []string `json:"env_image,omitempty"`
	EnvSet   []string `json:"env_set,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	// Kept: variables and labels (keep) whose predecessor's value stayed
	// over the module's.
	Kept []string `json:"kept,omitempty"`
	// Settings carried: mounts, networks, restart_policy, user, ...
	Settings []string `json:"settings,omitempty"`
	// Changed: what the module sets over the predecessor's: cmd, ports,
	// labels, restart_policy, dropped ports.
	Changed []string `json:"changed,omitempty"`
}

// Key prefixes of a conflict and a decision.
const (
	KeyEnv   = "env:"
	KeyLabel = "label:"
)

// SplitKey parses a conflict's or decision's key into its kind ("env" or
// "label") and name; ok is false for anything else.
func SplitKey(key string) (kind, name string, ok bool) {
	for _, p := range []string{KeyEnv, KeyLabel} {
		if n, found := strings.CutPrefix(key, p); found && n != "" && !strings.ContainsAny(n, "= \t\n\x00") {
			return strings.TrimSuffix(p, ":"), n, true
		}
	}
	return "", "", false
}

// HoldReport is how a swap (or a rollback) held the ports: queued, or
// dropped and why. It names ports and a reason, never a value.
type HoldReport struct {
	Owner   string   `json:"owner"`
	Ports   []uint16 `json:"ports"`
	Queued  bool     `json:"queued"`
	Dropped string   `json:"dropped,omitempty"` // why the SYNs were dropped, not queued
}

// String is the report as the module's status shows it.
func (r HoldReport) String() string {
	if r.Queued {
		return fmt.Sprintf("ports %v held by queueing new connections (released as the new container answered)", r.Ports)
	}
	return fmt.Sprintf("ports %v held by DROPPING new connections (clients waited for their 1 s retransmission): %s", r.Ports, r.Dropped)
}

// Info is what the probe records of one container. Environment variables are
// left out on purpose: they often hold secrets and the probe's result is
// stored in the workflow history.
type Info struct {
	Name   string      `json:"name"`
	ID     string      `json:"id"`
	Image  string      `json:"image"`
	State  string      `json:"state"`
	Mounts []Mount     `json:"mounts,omitempty"`
	Ports  []Published `json:"ports,omitempty"`
	// Networks are the networks the container is attached to, with its
	// addresses there: where Docker's DNAT sends a published port, which
	// the firewall's evaluator must map to one of the node's interfaces.
	Networks []Attachment `json:"networks,omitempty"`
}

// Report is the engine's view, or why there is none: a node without Docker
// is still adoptable, so an absent engine is reported, not fatal.
type Report struct {
	Available  bool   `json:"available"`
	Error      string `json:"error,omitempty"`
	Containers []Info `json:"containers"`
}

// DrainReport is how an overlap drained its predecessor before stopping it.
type DrainReport struct {
	Container string        `json:"container"`
	Took      time.Duration `json:"took"`
	// Left is the connections still open when the bound passed (0: the
	// predecessor drained and was stopped with none open).
	Left int `json:"left"`
	// Unread says why the predecessor's TCP tables could not be read: it
	// was then stopped at once, as before the drain existed.
	Unread string `json:"unread,omitempty"`
}

// String is the report as the module's status shows it.
func (r DrainReport) String() string {
	switch {
	case r.Unread != "":
		return fmt.Sprintf("predecessor %s stopped without draining (its connections could not be read: %s)", r.Container, r.Unread)
	case r.Left > 0:
		return fmt.Sprintf("predecessor %s stopped at the drain bound after %s with %d connection(s) still open", r.Container, r.Took.Round(time.Millisecond), r.Left)
	}
	return fmt.Sprintf("predecessor %s drained in %s", r.Container, r.Took.Round(time.Millisecond))
}

// Attachment is a container on one network: its addresses there, as
// CIDRs ("172.17.0.2/16"); none while it is not running.
type Attachment struct {
	Network string   `json:"network"`
	Addrs   []string `json:"addrs,omitempty"`
}
