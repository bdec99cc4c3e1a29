package cutover

// The cutover's state, read from the three container names alone: a resumed
// step needs nothing but Docker to know where it was.

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"
)

// Phase is where a cutover stands, read from the names alone.
type Phase string

const (
	PhaseAbsent    Phase = "absent"    // no container of any of the three names
	PhaseUntouched Phase = "untouched" // only <name>, not ours: before Create, or after a rollback
	PhaseCreated   Phase = "created"   // <name>.next ours; the predecessor, if any, still <name>: Swap next
	PhaseSwapping  Phase = "swapping"  // <name>.predecessor and <name>.next, no <name>: Swap or Rollback continues
	PhaseSwapped   Phase = "swapped"   // <name> ours, <name>.predecessor kept: WaitHealthy, then done or Rollback
	PhaseMigrated  Phase = "migrated"  // <name> ours, nothing else: done and pruned (or a new service)
	PhaseConflict  Phase = "conflict"  // anything else: see Reason
)

// Slot is one of the three names as Docker shows it.
type Slot struct {
	Name          string `json:"name"`
	ID            string `json:"id"`
	Image         string `json:"image"`
	Running       bool   `json:"running"`
	Ours          bool   `json:"ours"`                     // labelled adoption.module=<name>
	Module        string `json:"module,omitempty"`         // its adoption.module label, whatever it says
	PredecessorID string `json:"predecessor_id,omitempty"` // its adoption.predecessor label
}

// CutoverState is what State reads: which of the three names exist, and the
// phase they imply.
type CutoverState struct {
	Name        string `json:"name"`
	Live        *Slot  `json:"live,omitempty"`
	Next        *Slot  `json:"next,omitempty"`
	Predecessor *Slot  `json:"predecessor,omitempty"`
	Phase       Phase  `json:"phase"`
	Reason      string `json:"reason,omitempty"` // why PhaseConflict
}

func (e *Engine) ready() error {
	if err := e.Err(); err != nil {
		return fmt.Errorf("docker engine unavailable: %w", err)
	}
	return nil
}

// validName is Docker's rule for container names.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("container name %q is not valid: letters, digits, and _ . - after the first character", name)
	}
	if strings.HasSuffix(name, NextSuffix) || strings.HasSuffix(name, PredecessorSuffix) {
		return fmt.Errorf("container name %q ends in %s or %s, which the cutover reserves for its own state", name, NextSuffix, PredecessorSuffix)
	}
	return nil
}

// inspect returns the container with exactly this name, or nil. Docker
// resolves a reference to an ID prefix when no name matches, so the name
// is checked on the answer.
func (e *Engine) inspect(ctx context.Context, name string) (*container.InspectResponse, error) {
	c, err := e.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	if c.ContainerJSONBase == nil || strings.TrimPrefix(c.Name, "/") != name {
		return nil, nil
	}
	return &c, nil
}

func labels(c *container.InspectResponse) map[string]string {
	if c == nil || c.Config == nil {
		return nil
	}
	return c.Config.Labels
}

func running(c *container.InspectResponse) bool {
	return c != nil && c.State != nil && (c.State.Running || c.State.Restarting)
}

func slot(module string, c *container.InspectResponse) *Slot {
	if c == nil {
		return nil
	}
	l := labels(c)
	s := &Slot{Name: strings.TrimPrefix(c.Name, "/"), ID: c.ID, Running: running(c),
		Module: l[LabelModule], PredecessorID: l[LabelPredecessor]}
	if c.Config != nil {
		s.Image = c.Config.Image
	}
	s.Ours = s.Module == module
	return s
}

// snapshot is the three names, inspected once.
type snapshot struct {
	live, next, pred *container.InspectResponse
	state            CutoverState
}

func (e *Engine) snapshot(ctx context.Context, name string) (*snapshot, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	var s snapshot
	var err error
	if s.live, err = e.inspect(ctx, name); err != nil {
		return nil, err
	}
	if s.next, err = e.inspect(ctx, name+NextSuffix); err != nil {
		return nil, err
	}
	if s.pred, err = e.inspect(ctx, name+PredecessorSuffix); err != nil {
		return nil, err
	}
	s.state = CutoverState{Name: name, Live: slot(name, s.live), Next: slot(name, s.next), Predecessor: slot(name, s.pred)}
	s.state.Phase, s.state.Reason = phase(s.state)
	return &s, nil
}

func phase(st CutoverState) (Phase, string) {
	live, next, pred := st.Live, st.Next, st.Predecessor
	n := st.Name
	switch {
	case live != nil && live.Module != "" && !live.Ours:
		return PhaseConflict, fmt.Sprintf("container %s belongs to module %q", n, live.Module)
	case next != nil && !next.Ours:
		return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists and is not the mesh's: no cutover of %s created it", n, NextSuffix, short(next.ID), n)
	case live == nil && next == nil && pred == nil:
		return PhaseAbsent, ""
	}
	// Lineage: which container of ours claims <name>.predecessor?
	var claim *Slot
	if live != nil && live.Ours {
		claim = live
	} else if next != nil {
		claim = next
	}
	if pred != nil && (claim == nil || claim.PredecessorID != pred.ID) {
		if live == nil && next == nil {
			// A rollback interrupted after it removed ours can't leave
			// this (it removes ours last), but someone might: say so.
			return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists but no container of the mesh replaced it; rename it back to %s or remove it", n, PredecessorSuffix, short(pred.ID), n)
		}
		return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists and is not the predecessor of the mesh's %s; rename or remove it", n, PredecessorSuffix, short(pred.ID), n)
	}
	switch {
	case live != nil && live.Ours && next != nil:
		return PhaseConflict, fmt.Sprintf("both %s and %s%s are the mesh's", n, n, NextSuffix)
	case live != nil && live.Ours && pred != nil:
		return PhaseSwapped, ""
	case live != nil && live.Ours:
		return PhaseMigrated, ""
	case next != nil && pred != nil && live == nil:
		return PhaseSwapping, ""
	case next != nil && pred != nil:
		return PhaseConflict, fmt.Sprintf("container %s (%s) exists beside %s%s and %s%s", n, short(live.ID), n, NextSuffix, n, PredecessorSuffix)
	case next != nil:
		return PhaseCreated, ""
	default:
		return PhaseUntouched, ""
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// State reads which of <name>, <name>.next and <name>.predecessor exist,
// running or not, ours or not, and the phase a resumed cutover is at. It
// changes nothing.
func (e *Engine) State(ctx context.Context, name string) (CutoverState, error) {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return CutoverState{}, err
	}
	return s.state, nil
}
