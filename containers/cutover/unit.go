package cutover

// A predecessor that is a system unit (Spec.ReplacesUnit): a resolver the
// predecessor runs on the node itself, whose ports the module's container
// takes over. It follows the swap as a predecessor container does: Create
// records it as it is (running, enabled) in the mesh's container's
// adoption.replaced.unit label; Swap holds every port the container
// publishes (TCP SYNs and UDP datagrams) while the unit still serves, stops
// it, runs the window and starts the container, and lets the held clients
// go once the container answers; Rollback holds again, stops the
// container, starts the unit if it ran and enables it if it was. Disabling
// it is the confirmed cutover's (the activity), never the swap's: until
// then a reboot brings the predecessor back.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"adoption/containers/hold"
	"adoption/units"
)

// LabelReplacedUnit is the unit a container takes over, as it was when the
// cutover began, as JSON {name, active, enabled}.
const LabelReplacedUnit = "adoption.replaced.unit"

// Sub-steps of a unit's hand-over.
const (
	StepStopUnit   = "swap/stop-unit"
	StepStartUnit  = "rollback/start-unit"
	StepEnableUnit = "rollback/enable-unit"
)

// DatagramHold is a PortHold that holds UDP ports too.
type DatagramHold interface {
	HoldProto(owner string, tcp, udp []uint16, bound time.Duration) error
}

// DatagramBound is a PortHold that tells whether a UDP socket in the
// node's namespace is bound to a port: a service on the node is back on a
// UDP port only then.
type DatagramBound interface {
	UDPBound(port uint16) bool
}

// DatagramQueued is a PortHold that tells whether a UDP socket in the
// node's namespace bound to a port has datagrams it has not read: a unit
// stopped then drops them.
type DatagramQueued interface {
	UDPQueued(port uint16) bool
}

// drainMax bounds the wait for a unit to read the datagrams that reached
// it before the hold: past it the unit is stopped anyway.
const drainMax = 500 * time.Millisecond

// WithUnits lets the cutover hand over predecessors that are system units,
// through the node's service manager m.
func (e *Engine) WithUnits(m units.Manager) *Engine {
	e.units = m
	return e
}

// UnitRef is a predecessor unit as the cutover recorded it.
type UnitRef struct {
	Name    string `json:"name"`
	Active  bool   `json:"active"`
	Enabled bool   `json:"enabled"`
}

// unitOf reads the adoption.replaced.unit label of the mesh's container.
func unitOf(c *container.InspectResponse) (*UnitRef, error) {
	v := labels(c)[LabelReplacedUnit]
	if v == "" {
		return nil, nil
	}
	var u UnitRef
	if err := json.Unmarshal([]byte(v), &u); err != nil {
		return nil, fmt.Errorf("container %s: label %s is not what the mesh wrote: %w", strings.TrimPrefix(c.Name, "/"), LabelReplacedUnit, err)
	}
	if err := units.CheckName(u.Name); err != nil {
		return nil, fmt.Errorf("container %s: label %s: %w", strings.TrimPrefix(c.Name, "/"), LabelReplacedUnit, err)
	}
	return &u, nil
}

// UnitOf is the unit the mesh's container of module name took over, as the
// cutover recorded it; nil when it took over none.
func (e *Engine) UnitOf(ctx context.Context, name string) (*UnitRef, error) {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return nil, err
	}
	c := s.next
	if s.live != nil && s.state.Live.Ours {
		c = s.live
	}
	if c == nil {
		return nil, nil
	}
	return unitOf(c)
}

// checkUnit refuses, before anything changes, a unit the node's manager
// does not know (or a node without one), and says what the unit is now.
func (e *Engine) checkUnit(ctx context.Context, spec Spec) (*UnitRef, error) {
	if spec.ReplacesUnit == "" {
		return nil, nil
	}
	key := fmt.Sprintf("modules[%s].replaces_unit", spec.Name)
	if strings.HasPrefix(spec.ReplacesUnit, units.ExePrefix) {
		key = fmt.Sprintf("modules[%s].replaces_exe", spec.Name)
	}
	if err := units.CheckName(spec.ReplacesUnit); err != nil {
		return nil, fmt.Errorf("module %s: %s: %w: %w", spec.Name, key, err, ErrBadSpec)
	}
	if e.units == nil {
		return nil, fmt.Errorf("module %s: %s = %q: this agent has no service manager to hand the unit over with; nothing was changed: %w", spec.Name, key, spec.ReplacesUnit, ErrBadSpec)
	}
	st, err := e.units.Unit(ctx, spec.ReplacesUnit)
	if err != nil {
		return nil, fmt.Errorf("module %s: read unit %s: %w", spec.Name, spec.ReplacesUnit, err)
	}
	if !st.Known {
		return nil, fmt.Errorf("module %s: %s = %q: the node's service manager has no such unit (systemctl list-unit-files lists them), or no process of that executable runs; fix %s, nothing was changed: %w",
			spec.Name, key, spec.ReplacesUnit, key, ErrBadSpec)
	}
	return &UnitRef{Name: st.Name, Active: st.Active, Enabled: st.Enabled}, nil
}

// holdAll holds every host port ours publishes, TCP and UDP, while the
// unit it replaces still serves them: the unit's ports are the module's.
func (e *Engine) holdAll(ctx context.Context, owner string, ours *container.InspectResponse, stopWait time.Duration) ([]heldPort, error) {
	if e.hold == nil {
		return nil, nil
	}
	held := publishedAll(ours)
	if len(held) == 0 {
		return nil, nil
	}
	var tcp, udp []uint16
	for _, h := range held {
		if h.udp {
			udp = append(udp, h.port)
		} else {
			tcp = append(tcp, h.port)
		}
	}
	if err := e.step(ctx, StepHold); err != nil {
		return nil, err
	}
	dh, canUDP := e.hold.(DatagramHold)
	var err error
	if canUDP {
		err = dh.HoldProto(owner, tcp, udp, holdBound(stopWait))
	} else {
		err = e.hold.Hold(owner, tcp, holdBound(stopWait))
	}
	if err != nil {
		return nil, fmt.Errorf("hold new connections and datagrams to %v/tcp %v/udp during the hand-over of %s: %w", tcp, udp, owner, err)
	}
	rep := HoldReport{Owner: owner, Ports: append(append([]uint16(nil), tcp...), udp...), Queued: true}
	if why := e.hold.Dropping(owner); why != nil {
		rep.Queued, rep.Dropped = false, why.Error()
	} else if !canUDP && len(udp) > 0 {
		rep.Queued, rep.Dropped = false, fmt.Sprintf("this hold cannot hold UDP: datagrams to %v were not held", udp)
	}
	if fn, ok := ctx.Value(holdReportKey{}).(func(HoldReport)); ok && fn != nil {
		fn(rep)
	}
	return held, nil
}

// publishedAll is every TCP and UDP host port ours publishes, in order:
// what a unit's hand-over holds.
func publishedAll(ours *container.InspectResponse) []heldPort {
	if ours.HostConfig == nil {
		return nil
	}
	var held []heldPort
	seen := map[string]bool{}
	for port, bs := range ours.HostConfig.PortBindings {
		for _, b := range bs {
			hp, err := strconv.ParseUint(b.HostPort, 10, 16)
			key := b.HostPort + "/" + port.Proto()
			if err != nil || seen[key] || (port.Proto() != "tcp" && port.Proto() != "udp") {
				continue
			}
			seen[key] = true
			held = append(held, heldPort{hostIP: b.HostIP, port: uint16(hp), inside: uint16(port.Int()), udp: port.Proto() == "udp"})
		}
	}
	sort.Slice(held, func(i, j int) bool {
		if held[i].port != held[j].port {
			return held[i].port < held[j].port
		}
		return !held[i].udp
	})
	return held
}

// stopUnit stops the unit if it runs: the swap's window opens. The ports
// are held by then, so nothing more reaches the unit; what reached it
// before, still unread on a held UDP port, it is given drainMax to read.
func (e *Engine) stopUnit(ctx context.Context, u *UnitRef, held []heldPort) error {
	if u == nil {
		return nil
	}
	st, err := e.units.Unit(ctx, u.Name)
	if err != nil {
		return fmt.Errorf("read unit %s: %w", u.Name, err)
	}
	if !st.Active {
		return nil
	}
	if q, ok := e.hold.(DatagramQueued); ok {
		deadline := time.Now().Add(drainMax)
		for _, h := range held {
			for h.udp && q.UDPQueued(h.port) && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	return e.during(ctx, StepStopUnit, func() error {
		if err := e.units.Stop(ctx, u.Name); err != nil {
			return fmt.Errorf("stop predecessor unit %s: %w", u.Name, err)
		}
		return nil
	})
}

// restoreUnit puts the unit back as the cutover found it, after the mesh's
// container stopped: started if it ran, enabled if it was.
func (e *Engine) restoreUnit(ctx context.Context, u *UnitRef) error {
	if u == nil {
		return nil
	}
	st, err := e.units.Unit(ctx, u.Name)
	if err != nil {
		return fmt.Errorf("read unit %s: %w", u.Name, err)
	}
	if u.Enabled && !st.Enabled {
		if err := e.step(ctx, StepEnableUnit); err != nil {
			return err
		}
		if err := e.units.Enable(ctx, u.Name); err != nil {
			return fmt.Errorf("enable predecessor unit %s again: %w", u.Name, err)
		}
	}
	if u.Active && !st.Active {
		return e.during(ctx, StepStartUnit, func() error {
			if err := e.units.Start(ctx, u.Name); err != nil {
				return fmt.Errorf("start predecessor unit %s again: %w", u.Name, err)
			}
			return nil
		})
	}
	return nil
}

// releaseWhenNodeAnswers waits until every held port is back on the node
// (the unit, on the node itself; at most holdMax), then releases the hold:
// a TCP port once it answers at the node's own address, through whatever
// the engine still forwards there, a UDP port once a socket on the node is
// bound to it. A unit's start job may be done before its service has
// bound either (a process started again is running once it is forked):
// released sooner, a held datagram would meet a closed port, and a client
// with no ICMP answer waits out its timeout.
func (e *Engine) releaseWhenNodeAnswers(ctx context.Context, owner string, held []heldPort) error {
	if e.hold == nil {
		return nil
	}
	if len(held) > 0 {
		node := e.hold.NodeAddr()
		bound, tells := e.hold.(DatagramBound)
		back := func(h heldPort) bool {
			switch {
			case h.udp:
				return !tells || bound.UDPBound(h.port)
			case node == "":
				return true
			}
			return e.answersVia(ctx, node, h.port) == nil
		}
		_ = e.during(ctx, StepAwaitPorts, func() error {
			deadline := time.Now().Add(holdMax)
			for _, h := range held {
				for !back(h) && time.Now().Before(deadline) && ctx.Err() == nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
			return nil
		})
	}
	return e.releaseWhenAnswering(ctx, owner, nil, "")
}

// udpBound says whether the process pid's network namespace has a UDP
// socket bound to port: a UDP service has no handshake, so that it has
// bound its socket is all the node can tell of whether it answers.
func udpBound(pid int, port uint16) bool {
	return pid > 0 && hold.UDPBoundIn(fmt.Sprintf("/proc/%d/net", pid), port)
}

// containerPID is the container's process, 0 when it runs none.
func (e *Engine) containerPID(ctx context.Context, id string) int {
	c, err := e.cli.ContainerInspect(ctx, id)
	if err != nil || c.State == nil {
		return 0
	}
	return c.State.Pid
}

// startHolding starts ours in a unit's place and lets the held clients go
// once it answers on every held port. A container that fails to start, or
// exits before it answers, keeps the hold: nothing on the node serves the
// ports now (the unit is stopped), and the rollback, which starts the unit
// again, releases the clients to it. The error is ErrUnhealthy, so the
// workflow rolls back at once; the kernel lets go of the hold at its bound
// if nothing does. A container that runs and has not answered by holdMax
// is released to, as the swap does: its health check decides.
func (e *Engine) startHolding(ctx context.Context, name string, held []heldPort, ours *container.InspectResponse) error {
	if err := e.cli.ContainerStart(ctx, ours.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start %s (image %s) in unit's place: %w; the ports stay held for the rollback: %w", name, ours.Config.Image, err, ErrUnhealthy)
	}
	node := e.hold.NodeAddr()
	deadline := time.Now().Add(holdMax)
	pid := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c, err := e.cli.ContainerInspect(ctx, ours.ID)
		// Restarting counts as exited: its restart policy brings it back
		// only to exit again, and meanwhile nothing serves.
		if err == nil && (!running(&c) || c.State.Restarting || c.RestartCount > 0) {
			code := 0
			if c.State != nil {
				code = c.State.ExitCode
			}
			return fmt.Errorf("%s exited (status %d) before it answered in unit's place; the ports stay held for the rollback: %w", name, code, ErrUnhealthy)
		}
		if pid == 0 && err == nil && c.State != nil {
			pid = c.State.Pid
		}
		all := true
		for _, h := range held {
			switch {
			case h.udp:
				all = e.udpBound != nil && e.udpBound(pid, h.inside)
			case node != "":
				all = e.answersVia(ctx, node, h.port) == nil
			default:
				all = e.answers(ctx, h.hostIP, h.port) == nil
			}
			if !all {
				break
			}
		}
		if all {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return e.releaseWhenAnswering(ctx, name, nil, "")
}
