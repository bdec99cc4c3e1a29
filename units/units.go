// Package units speaks to the node's service manager about one system unit
// at a time: whether it runs and is enabled, stop, start, disable, enable.
// The cutover hands a host-process predecessor (a module's replaces_unit)
// over to the module's container through it. The production manager is
// systemd over D-Bus (systemd.go); a node whose PID 1 is not systemd runs
// the stand-in supervisor (standin.go), which speaks the same small
// interface over a unix socket.
package units

import (
	"context"
	"fmt"
	"strings"

	"adoption/config"
)

// State is a unit as its manager shows it: names and numbers only.
type State struct {
	Name string `json:"name"`
	// Known is false when the manager has no such unit (not loaded).
	Known   bool `json:"known"`
	Active  bool `json:"active"`
	Enabled bool `json:"enabled"`
	// MainPID is the unit's main process, 0 when it runs none.
	MainPID int `json:"main_pid,omitempty"`
	// FragmentPath is the unit file, "" when the manager names none.
	FragmentPath string `json:"fragment_path,omitempty"`
}

// Manager is what the cutover needs of the node's service manager. Stop
// and Start return once the unit is stopped or started (its job done);
// each is idempotent: stopping a stopped unit or enabling an enabled one
// does nothing.
type Manager interface {
	Unit(ctx context.Context, name string) (State, error)
	Stop(ctx context.Context, name string) error
	Start(ctx context.Context, name string) error
	Disable(ctx context.Context, name string) error
	Enable(ctx context.Context, name string) error
}

// ExePrefix names a predecessor that is a bare executable rather than a
// unit: "exe:dnsmasq" (process.go).
const ExePrefix = config.ExePrefix

// CheckName refuses a name the manager must never be handed: a service
// unit (config.ValidUnitName), or ExePrefix and an executable's name
// (config.ValidExeName).
func CheckName(name string) error {
	if exe, ok := strings.CutPrefix(name, ExePrefix); ok {
		if !config.ValidExeName(exe) {
			return fmt.Errorf("executable name %q: want %s", exe, config.ExeNameRule)
		}
		return nil
	}
	if !config.ValidUnitName(name) {
		return fmt.Errorf("unit name %q: want %s", name, config.UnitNameRule)
	}
	return nil
}

// Router hands a name to the manager of its kind: an executable's to
// Exes, a unit's to Units.
type Router struct {
	Units Manager
	Exes  Manager
}

func (r Router) pick(name string) (Manager, error) {
	if strings.HasPrefix(name, ExePrefix) {
		return r.Exes, nil
	}
	if r.Units == nil {
		return nil, fmt.Errorf("no service manager for unit %s", name)
	}
	return r.Units, nil
}

func (r Router) Unit(ctx context.Context, name string) (State, error) {
	m, err := r.pick(name)
	if err != nil {
		return State{}, err
	}
	return m.Unit(ctx, name)
}

func (r Router) Stop(ctx context.Context, name string) error {
	m, err := r.pick(name)
	if err != nil {
		return err
	}
	return m.Stop(ctx, name)
}

func (r Router) Start(ctx context.Context, name string) error {
	m, err := r.pick(name)
	if err != nil {
		return err
	}
	return m.Start(ctx, name)
}

func (r Router) Disable(ctx context.Context, name string) error {
	m, err := r.pick(name)
	if err != nil {
		return err
	}
	return m.Disable(ctx, name)
}

func (r Router) Enable(ctx context.Context, name string) error {
	m, err := r.pick(name)
	if err != nil {
		return err
	}
	return m.Enable(ctx, name)
}
