// The stand-in supervisor, for a node whose PID 1 is not systemd (a
// container, the project's e2e network namespaces): a small process
// supervisor (Supervisor) that runs declared units as its children and
// answers the Manager interface over a unix socket, one JSON request and
// answer per connection; StandIn is its client. The agent uses the
// stand-in only when ADOPT_UNITS_SOCKET names its socket (worker/run.go);
// systemd over D-Bus is the production manager.
//
// It is what the e2e tests run the predecessor's resolver under, since
// systemd is not PID 1 there.

package units

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// EnvSocket names the stand-in supervisor's socket for the agent; unset,
// the agent speaks to systemd.
const EnvSocket = "ADOPT_UNITS_SOCKET"

type request struct {
	Op   string `json:"op"` // unit, stop, start, disable, enable
	Unit string `json:"unit"`
}

type answer struct {
	State State  `json:"state"`
	Error string `json:"error,omitempty"`
}

// StandIn is the client of a Supervisor listening on Socket.
type StandIn struct{ Socket string }

func (s StandIn) call(ctx context.Context, op, name string) (State, error) {
	if err := CheckName(name); err != nil {
		return State{}, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", s.Socket)
	if err != nil {
		return State{}, fmt.Errorf("stand-in supervisor at %s: %w", s.Socket, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := json.NewEncoder(c).Encode(request{Op: op, Unit: name}); err != nil {
		return State{}, fmt.Errorf("stand-in supervisor: %s %s: %w", op, name, err)
	}
	var a answer
	if err := json.NewDecoder(c).Decode(&a); err != nil {
		return State{}, fmt.Errorf("stand-in supervisor: %s %s: %w", op, name, err)
	}
	if a.Error != "" {
		return a.State, fmt.Errorf("stand-in supervisor: %s %s: %s", op, name, a.Error)
	}
	return a.State, nil
}

func (s StandIn) Unit(ctx context.Context, name string) (State, error) {
	return s.call(ctx, "unit", name)
}
func (s StandIn) Stop(ctx context.Context, name string) error {
	_, err := s.call(ctx, "stop", name)
	return err
}
func (s StandIn) Start(ctx context.Context, name string) error {
	_, err := s.call(ctx, "start", name)
	return err
}
func (s StandIn) Disable(ctx context.Context, name string) error {
	_, err := s.call(ctx, "disable", name)
	return err
}
func (s StandIn) Enable(ctx context.Context, name string) error {
	_, err := s.call(ctx, "enable", name)
	return err
}

// Service is a unit the Supervisor runs: its command, and whether it is
// enabled.
type Service struct {
	Cmd          []string
	Enabled      bool
	FragmentPath string
	// Ready, when set, says the started process serves (Start waits for
	// it, at most 10 s), as a Type=notify unit's start job waits.
	Ready func() error
}

// Supervisor runs Services as its children and serves the Manager
// interface on a unix socket.
type Supervisor struct {
	mu    sync.Mutex
	units map[string]*supervised
	ln    net.Listener
}

type supervised struct {
	Service
	cmd  *exec.Cmd
	done chan struct{}
}

// NewSupervisor serves units on a unix socket at path.
func NewSupervisor(path string, units map[string]Service) (*Supervisor, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{units: map[string]*supervised{}, ln: ln}
	for n, u := range units {
		s.units[n] = &supervised{Service: u}
	}
	go s.serve()
	return s, nil
}

// Close stops serving and stops every unit it runs.
func (s *Supervisor) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	names := make([]string, 0, len(s.units))
	for n := range s.units {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		_ = s.stop(n)
	}
}

// PID is the unit's main process now, 0 when it runs none.
func (s *Supervisor) PID(name string) int {
	st, _ := s.state(name)
	return st.MainPID
}

// StartUnit starts a unit as the node's boot would.
func (s *Supervisor) StartUnit(name string) error { return s.start(name) }

func (s *Supervisor) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			var r request
			if err := json.NewDecoder(c).Decode(&r); err != nil {
				return
			}
			a := s.do(r)
			_ = json.NewEncoder(c).Encode(a)
		}()
	}
}

func (s *Supervisor) do(r request) answer {
	var err error
	switch r.Op {
	case "unit":
	case "stop":
		err = s.stop(r.Unit)
	case "start":
		err = s.start(r.Unit)
	case "disable", "enable":
		s.mu.Lock()
		if u := s.units[r.Unit]; u != nil {
			u.Enabled = r.Op == "enable"
		}
		s.mu.Unlock()
	default:
		err = fmt.Errorf("unknown operation %q", r.Op)
	}
	st, serr := s.state(r.Unit)
	if err == nil {
		err = serr
	}
	a := answer{State: st}
	if err != nil {
		a.Error = err.Error()
	}
	return a
}

func (s *Supervisor) state(name string) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.units[name]
	if u == nil {
		return State{Name: name}, nil
	}
	st := State{Name: name, Known: true, Enabled: u.Enabled, FragmentPath: u.FragmentPath}
	if u.cmd != nil {
		select {
		case <-u.done:
		default:
			st.Active, st.MainPID = true, u.cmd.Process.Pid
		}
	}
	return st, nil
}

func (s *Supervisor) start(name string) error {
	s.mu.Lock()
	u := s.units[name]
	if u == nil {
		s.mu.Unlock()
		return fmt.Errorf("unit %s not found", name)
	}
	if u.cmd != nil {
		select {
		case <-u.done:
		default:
			s.mu.Unlock()
			return nil // running
		}
	}
	cmd := exec.Command(u.Cmd[0], u.Cmd[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	u.cmd, u.done = cmd, done
	ready := u.Ready
	s.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	if ready == nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("start %s: it exited before it served: %w", name, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start %s: not ready after 10s: %w", name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Supervisor) stop(name string) error {
	s.mu.Lock()
	u := s.units[name]
	if u == nil {
		s.mu.Unlock()
		return fmt.Errorf("unit %s not found", name)
	}
	cmd, done := u.cmd, u.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}
