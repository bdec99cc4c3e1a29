// The production Manager: systemd, over the system bus (D-Bus), with
// github.com/coreos/go-systemd/v22/dbus. The connection is made at the
// first call, so an agent on a node without systemd starts, and only a
// cutover that needs a unit says why it cannot have one.

package units

import (
	"context"
	"fmt"
	"sync"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Systemd is the node's systemd.
type Systemd struct {
	mu   sync.Mutex
	conn *sddbus.Conn
}

// NewSystemd is systemd on the system bus, connected at first use.
func NewSystemd() *Systemd { return &Systemd{} }

func (s *Systemd) dial(ctx context.Context) (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	c, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to systemd on the system bus (is systemd PID 1 on this node?): %w", err)
	}
	s.conn = c
	return c, nil
}

// Unit reads the unit's load, active and file states.
func (s *Systemd) Unit(ctx context.Context, name string) (State, error) {
	if err := CheckName(name); err != nil {
		return State{}, err
	}
	c, err := s.dial(ctx)
	if err != nil {
		return State{}, err
	}
	p, err := c.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return State{}, fmt.Errorf("systemd: properties of %s: %w", name, err)
	}
	str := func(k string) string { v, _ := p[k].(string); return v }
	st := State{Name: name, Known: str("LoadState") == "loaded", Active: str("ActiveState") == "active" || str("ActiveState") == "reloading",
		FragmentPath: str("FragmentPath")}
	switch str("UnitFileState") {
	case "enabled", "enabled-runtime", "linked", "linked-runtime", "alias":
		st.Enabled = true
	}
	if pid, ok := p["MainPID"].(uint32); ok {
		st.MainPID = int(pid)
	}
	return st, nil
}

// job runs a start or stop and waits for its result.
func (s *Systemd) job(ctx context.Context, what, name string, run func(*sddbus.Conn, chan<- string) (int, error)) error {
	if err := CheckName(name); err != nil {
		return err
	}
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	ch := make(chan string, 1)
	if _, err := run(c, ch); err != nil {
		return fmt.Errorf("systemd: %s %s: %w", what, name, err)
	}
	select {
	case r := <-ch:
		if r != "done" {
			return fmt.Errorf("systemd: %s %s: job %s (journalctl -u %s says why)", what, name, r, name)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd: %s %s: %w", what, name, ctx.Err())
	}
}

// Stop stops the unit and waits until it has stopped.
func (s *Systemd) Stop(ctx context.Context, name string) error {
	return s.job(ctx, "stop", name, func(c *sddbus.Conn, ch chan<- string) (int, error) {
		return c.StopUnitContext(ctx, name, "replace", ch)
	})
}

// Start starts the unit and waits until its start job is done.
func (s *Systemd) Start(ctx context.Context, name string) error {
	return s.job(ctx, "start", name, func(c *sddbus.Conn, ch chan<- string) (int, error) {
		return c.StartUnitContext(ctx, name, "replace", ch)
	})
}

// Disable removes the unit's enablement links, then reloads the manager.
func (s *Systemd) Disable(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	if _, err := c.DisableUnitFilesContext(ctx, []string{name}, false); err != nil {
		return fmt.Errorf("systemd: disable %s: %w", name, err)
	}
	return c.ReloadContext(ctx)
}

// Enable puts the unit's enablement links back, then reloads the manager.
func (s *Systemd) Enable(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	if _, _, err := c.EnableUnitFilesContext(ctx, []string{name}, false, false); err != nil {
		return fmt.Errorf("systemd: enable %s: %w", name, err)
	}
	return c.ReloadContext(ctx)
}
