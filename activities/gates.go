package activities

// The node's own gates. A request is a choice among what the node's
// configuration declares (activities/authority), but whether the node is ready for
// it is decided here, from the node's own records under state_dir (the
// adopted marker, each module's cutover, the firewall's baseline, the flip
// record), its custody index and its engine, never from the request: a
// copied plan with forged fields cannot flip a node whose modules are not
// migrated or whose drift is pending, roll back a confirmed cutover, prune
// a predecessor a rollback still needs, or replace the custody baseline.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers/cutover"
	"adoption/custody"
	"adoption/nodestate"
)

// Error types of the gates. None is retried, and nothing was changed.
const (
	ErrCutoverConfirmed = nodewire.ErrCutoverConfirmed
	// ErrNotMigrated: the node has not confirmed the module's cutover.
	ErrNotMigrated = "NotMigrated"
	// ErrFlipRefused: the node refuses a flip before applying anything
	// (a witnessed node that cannot authenticate the witness's verdict); its
	// own gates and preview refuse by a result (FlipPreviewRefused).
	ErrFlipRefused = nodewire.ErrFlipRefused
	// ErrNodeState: the node's state does not allow the request now.
	ErrNodeState = "NodeState"
)

func gateRefusal(typ, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused by the node's own records: "+format+"; nothing was changed", args...), typ, nil)
}

// markCutover records a module's cutover state on the node. A confirmed
// cutover is never set back to migrating; a new attempt after a rollback
// starts with no converged files; files adds the content a step wrote.
func (a *Activities) markCutover(m config.ModulePlan, state string, files map[string]string) error {
	return a.State.UpdateCutover(m.Name, func(cur *nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		next := nodestate.CutoverRecord{}
		if cur != nil {
			next = *cur
			next.Files = map[string]string{}
			for p, s := range cur.Files {
				next.Files[p] = s
			}
		}
		if cur != nil && cur.State == nodestate.CutoverConfirmed && state == nodestate.CutoverMigrating {
			state = nodestate.CutoverConfirmed
		}
		if state == nodestate.CutoverRolledBack || (state == nodestate.CutoverMigrating && cur != nil && cur.State == nodestate.CutoverRolledBack) {
			next.Files = nil
		}
		next.State = state
		if m.Container != nil {
			next.Container = m.Container.Name
		}
		for p, s := range files {
			if next.Files == nil {
				next.Files = map[string]string{}
			}
			next.Files[p] = s
		}
		switch state {
		case nodestate.CutoverConfirmed:
			if next.Confirmed.IsZero() {
				next.Confirmed = time.Now().UTC()
			}
		default:
			next.Confirmed = time.Time{}
		}
		return &next, nil
	})
}

// confirmedCutover is the module's cutover record when the node confirmed it.
func (a *Activities) confirmedCutover(module string) (*nodestate.CutoverRecord, error) {
	recs, err := a.State.Cutovers()
	if err != nil {
		return nil, fmt.Errorf("read node %s's cutover records: %w", a.Node, err)
	}
	if r, ok := recs[module]; ok && r.State == nodestate.CutoverConfirmed {
		return &r, nil
	}
	return nil, nil
}

// notMigrated names every module of the local plan the node does not count
// as migrated: by its own record of a confirmed cutover, or, for a module
// with no record at all (cut over by an agent older than the records), by
// what the node shows now: its container the mesh's in the engine, its
// files holding what the mesh's merge writes, its health check answering.
func (a *Activities) notMigrated(ctx context.Context, auth *authority.Authority) ([]string, error) {
	recs, err := a.State.Cutovers()
	if err != nil {
		return nil, fmt.Errorf("read node %s's cutover records: %w", a.Node, err)
	}
	var why []string
	for _, m := range auth.Plan.Modules {
		r, ok := recs[m.Name]
		switch {
		case ok && r.State == nodestate.CutoverConfirmed:
		case ok:
			why = append(why, fmt.Sprintf("module %s's cutover is %s on node %s, not confirmed by it: run adopt migrate (or retry) %s %s first", m.Name, r.State, a.Node, a.Node, m.Name))
		default:
			if w := a.migratedAsShown(ctx, auth, m); w != "" {
				why = append(why, w)
			}
		}
	}
	return why, nil
}

// migratedAsShown judges a module with no cutover record from the node
// itself; "" when it is migrated.
func (a *Activities) migratedAsShown(ctx context.Context, auth *authority.Authority, m config.ModulePlan) string {
	notYet := fmt.Sprintf("module %s has no cutover recorded on node %s", m.Name, a.Node)
	if m.Container != nil {
		if a.Cutover == nil {
			return notYet + " and this agent has no engine to look at its container"
		}
		sp, err := a.spec(auth, m, nil)
		if err != nil {
			return notYet + ": " + err.Error()
		}
		if _, err := a.Cutover.Preflight(ctx, sp); !errors.Is(err, cutover.ErrMigrated) {
			return fmt.Sprintf("%s, and the engine does not show container %s as the mesh's: run adopt migrate %s %s first", notYet, m.Container.Name, a.Node, m.Name)
		}
	}
	for _, f := range m.Files {
		mesh, ok := auth.Contents[f.SHA256]
		if !ok {
			return fmt.Sprintf("%s, and its file %s's content is not in the node's configuration", notYet, f.Path)
		}
		want, fm, err := a.merged(f, mesh, nil)
		if err != nil || len(fm.Conflicts) > 0 {
			return fmt.Sprintf("%s, and its file %s does not hold what its cutover writes", notYet, f.Path)
		}
		if now := a.Files.Inspect(f.Path); !now.Exists || now.SHA256 != sha256Hex(want) {
			return fmt.Sprintf("%s, and its file %s does not hold what its cutover writes: run adopt migrate %s %s first", notYet, f.Path, a.Node, m.Name)
		}
	}
	if m.Container == nil && len(m.Files) == 0 && m.Health == nil {
		// Its cutover is the opening of its ports: their marks show it.
		if a.Marks == nil {
			return notYet
		}
		placed, err := a.Marks.List(a.Node)
		if err != nil {
			return fmt.Sprintf("%s, and its marks cannot be listed: %v", notYet, err)
		}
		for _, r := range placed {
			if r.Mark.Owner == m.Name {
				return ""
			}
		}
		return fmt.Sprintf("%s, and none of its ports is opened by a mark: run adopt migrate %s %s first", notYet, a.Node, m.Name)
	}
	if m.Container == nil && m.Health != nil {
		probe := cutover.HTTPProbe(m.Health.HTTP)
		if m.Health.TCP != "" {
			probe = cutover.TCPProbe(m.Health.TCP)
		}
		if err := probe(ctx); err != nil {
			return fmt.Sprintf("%s, and its health check does not answer: %v", notYet, err)
		}
	}
	return ""
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// flipGates are the node's own reasons to refuse a new flip: a module it
// does not count as migrated, drift it finds pending.
func (a *Activities) flipGates(ctx context.Context, auth *authority.Authority) ([]string, error) {
	why, err := a.notMigrated(ctx, auth)
	if err != nil {
		return nil, err
	}
	items, _, _, err := a.drift().Now(auth)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		why = append(why, "drift pending on node "+a.Node+": "+it.What+"; accept it (adopt drift accept "+a.Node+") or restore the original")
	}
	for _, d := range a.controlDaemons(auth) {
		why = append(why, "the predecessor's control daemon is running on node "+a.Node+" and would rewrite what the mesh holds: "+d.String())
	}
	return why, nil
}

// flipSettled refuses while a flip may be in force or is confirmed and not
// committed, and on a converged node: what is asked would act under it.
func (a *Activities) flipSettled(what string) error {
	if conv, err := a.State.Converged(); err != nil {
		return err
	} else if conv {
		return gateRefusal(ErrNodeState, "node %s is converged (the mesh's own table is its firewall): no %s", a.Node, what)
	}
	var cur *nodestate.FlipRecord
	if err := a.Flips.UpdateFlip(func(r *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if r != nil {
			c := *r
			cur = &c
		}
		return nil, nil
	}); err != nil {
		return err
	}
	if cur.Pending() || (cur != nil && cur.State == nodestate.FlipConfirmed) {
		return gateRefusal(ErrNodeState, "flip %s is %s on node %s: no %s until it is reverted or committed", cur.ID, cur.State, a.Node, what)
	}
	return nil
}

// hasCutoverRecord reports whether the node recorded any cutover of module
// (so the judgement from what the node shows, for modules cut over before
// the records, does not apply to it).
func (a *Activities) hasCutoverRecord(module string) bool {
	recs, err := a.State.Cutovers()
	if err != nil {
		return true
	}
	_, ok := recs[module]
	return ok
}

// acceptConverged records a converged file's content now as what the
// node's drift check expects there (an accepted drift of it); absent or
// unreadable, it stops expecting anything there.
func (a *Activities) acceptConverged(module, path string, now custody.FileState) error {
	return a.State.UpdateCutover(module, func(cur *nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		if cur == nil {
			return nil, nil
		}
		next := *cur
		next.Files = map[string]string{}
		for p, s := range cur.Files {
			next.Files[p] = s
		}
		if now.Exists && now.Error == "" {
			next.Files[path] = now.SHA256
		} else {
			delete(next.Files, path)
		}
		return &next, nil
	})
}

// cutoverUnderway refuses to confirm a cutover the node has no sign of:
// a container module's create or swap recorded (or, cut over by an older
// agent, its container the mesh's in the engine); a host service's files
// converged by it, or with no files its ports opened. A health check that
// passes on a predecessor never confirms a cutover that did not happen.
func (a *Activities) cutoverUnderway(ctx context.Context, auth *authority.Authority, m config.ModulePlan) error {
	recs, err := a.State.Cutovers()
	if err != nil {
		return fmt.Errorf("read node %s's cutover records: %w", a.Node, err)
	}
	r, ok := recs[m.Name]
	ok = ok && (r.State == nodestate.CutoverMigrating || r.State == nodestate.CutoverConfirmed)
	switch {
	case m.Container != nil:
		if ok || a.migratedAsShown(ctx, auth, m) == "" {
			return nil
		}
		return gateRefusal(ErrNotMigrated, "no cutover of module %s is under way on node %s (no create or swap recorded, and container %s is not the mesh's): nothing to confirm", m.Name, a.Node, m.Container.Name)
	case len(m.Files) > 0:
		for _, f := range m.Files {
			if _, done := r.Files[f.Path]; !ok || !done {
				return gateRefusal(ErrNotMigrated, "module %s's file %s was not converged by a cutover on node %s: nothing to confirm", m.Name, f.Path, a.Node)
			}
		}
		return nil
	}
	if a.Marks == nil {
		return gateRefusal(ErrNotMigrated, "this agent has no marks to tell whether module %s's ports are opened: nothing to confirm", m.Name)
	}
	placed, err := a.Marks.List(a.Node)
	if err != nil {
		return fmt.Errorf("list node %s's marked rules: %w", a.Node, err)
	}
	for _, pr := range placed {
		if pr.Mark.Owner == m.Name {
			return nil
		}
	}
	return gateRefusal(ErrNotMigrated, "none of module %s's ports is opened on node %s: no cutover is under way, nothing to confirm", m.Name, a.Node)
}
