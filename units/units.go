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

// CheckName refuses a unit name the manager must never be handed
// (config.ValidUnitName).
func CheckName(name string) error {
	if !config.ValidUnitName(name) {
		return fmt.Errorf("unit name %q: want %s", name, config.UnitNameRule)
	}
	return nil
}
