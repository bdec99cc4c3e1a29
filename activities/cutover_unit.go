package activities

// A module's predecessor that is a system unit (replaces_unit): the
// engine hands it over at the swap and back at a rollback
// (containers/cutover/unit.go); here the node keeps its unit file in
// custody like a found file, disables the unit once the cutover is
// confirmed, and enables it again at a release.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"adoption/config"
	"adoption/nodestate"
)

// takeUnitFile takes the unit's file into custody before anything
// changes, as the found files are: what the predecessor ran from stays on
// record, and a rollback puts it back byte for byte. A unit whose file is
// not under node.root (or that names none) has nothing to take.
func (a *Activities) takeUnitFile(ctx context.Context, m config.ModulePlan) (string, error) {
	if m.HostPredecessor() == "" || a.Units == nil {
		return "", nil
	}
	st, err := a.Units.Unit(ctx, m.HostPredecessor())
	if err != nil {
		return "", fmt.Errorf("module %s: read its predecessor unit %s: %w", m.Name, m.HostPredecessor(), err)
	}
	if st.FragmentPath == "" {
		return "", nil
	}
	if _, err := a.Files.Take(st.FragmentPath); err != nil {
		return "", fmt.Errorf("module %s: take the file of unit %s (%s) into custody: %w", m.Name, m.HostPredecessor(), st.FragmentPath, err)
	}
	return st.FragmentPath, nil
}

// restoreUnitFile puts the unit's file back as custody holds it, when it
// changed; before the rollback starts the unit again.
func (a *Activities) restoreUnitFile(ctx context.Context, m config.ModulePlan) error {
	if m.HostPredecessor() == "" || a.Units == nil {
		return nil
	}
	st, err := a.Units.Unit(ctx, m.HostPredecessor())
	if err != nil || st.FragmentPath == "" {
		return err
	}
	rec, ok, err := a.Files.Record(st.FragmentPath)
	if err != nil || !ok {
		return err
	}
	if now := a.Files.Inspect(st.FragmentPath); now.Exists == rec.Found && now.SHA256 == rec.SHA256 {
		return nil
	}
	if err := a.Files.Restore(st.FragmentPath); err != nil {
		return fmt.Errorf("module %s: restore the file of unit %s from custody: %w", m.Name, m.HostPredecessor(), err)
	}
	return nil
}

// disableReplacedUnit disables the module's predecessor unit, and records
// that it did, for a release to undo.
func (a *Activities) disableReplacedUnit(ctx context.Context, m config.ModulePlan) error {
	if a.Units == nil {
		return fmt.Errorf("module %s: this agent has no service manager to disable unit %s with", m.Name, m.HostPredecessor())
	}
	if err := a.Units.Disable(ctx, m.HostPredecessor()); err != nil {
		return fmt.Errorf("module %s: disable its predecessor unit %s: %w", m.Name, m.HostPredecessor(), err)
	}
	return a.State.UpdateCutover(m.Name, func(cur *nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		next := nodestate.CutoverRecord{}
		if cur != nil {
			next = *cur
		}
		next.Unit, next.UnitDisabled = m.HostPredecessor(), true
		return &next, nil
	})
}

// enableDisabledUnits enables again every predecessor unit a confirmed
// cutover disabled: the release gives the node back as found, the units'
// enablement included. It names what it enabled.
func (a *Activities) enableDisabledUnits(ctx context.Context) ([]string, error) {
	recs, err := a.State.Cutovers()
	if err != nil {
		return nil, fmt.Errorf("read node %s's cutover records: %w", a.Node, err)
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		r := recs[name]
		if !r.UnitDisabled || r.Unit == "" {
			continue
		}
		if a.Units == nil {
			return out, fmt.Errorf("module %s's predecessor unit %s was disabled by its cutover and this agent has no service manager to enable it again", name, r.Unit)
		}
		if err := a.Units.Enable(ctx, r.Unit); err != nil {
			return out, fmt.Errorf("enable module %s's predecessor unit %s again: %w", name, r.Unit, err)
		}
		if err := a.State.UpdateCutover(name, func(cur *nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
			if cur == nil {
				return nil, nil
			}
			next := *cur
			next.UnitDisabled = false
			return &next, nil
		}); err != nil {
			return out, err
		}
		out = append(out, r.Unit)
	}
	return out, nil
}
