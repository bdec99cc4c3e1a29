package cutover

// The overlap cutover, for a module whose service allows two instances on
// its data at once: <name>.next (created by Create with the engine
// publishing its ports on loopback only) is started beside the running
// predecessor, and once it answers, the module's host ports are moved to it
// in one transaction (PortSteer). Established connections stay with the
// predecessor through conntrack; once it has none left on its ports, or
// the drain bound has passed, the predecessor is stopped (SIGTERM, again
// with the drain bound before SIGKILL) and kept for rollback under
// <name>.predecessor, as the swap keeps it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"

	"adoption/containers/steer"
)

// PortSteer points a node's host ports at a container's address, in one
// transaction per call, keyed by owner (the module's container name).
type PortSteer interface {
	Point(owner string, targets []steer.Target) error
	Remove(owner string) error
}

// WithSteer lets the engine run overlap cutovers, steering ports with s.
func (e *Engine) WithSteer(s PortSteer) *Engine {
	e.steer = s
	return e
}

// Overlap cuts spec's module over to <name>.next beside its predecessor
// (see the file's note), then waits for the predecessor to finish its
// connections for at most drain (the module's cutover.stop_timeout), stops
// it, and renames both as the swap does. It
// refuses a spec that is not an overlap's, a predecessor whose mounts a
// second instance cannot share, and a node without steering, before it
// changes anything.
func (e *Engine) Overlap(ctx context.Context, spec Spec, drain time.Duration) error {
	name := spec.Name
	if spec.Cutover != CutoverOverlap {
		return fmt.Errorf("overlap %s: the module's cutover is %q, not overlap: %w", name, spec.Cutover, ErrBadSpec)
	}
	if e.steer == nil {
		return fmt.Errorf("overlap %s: this node cannot steer ports (its engine does not run in the node's network namespace); use cutover: swap: %w", name, ErrBadSpec)
	}
	if _, err := spec.portMap(); err != nil {
		return err
	}
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return err
	}
	if s.state.Phase != PhaseCreated || s.live == nil || !running(s.live) {
		return fmt.Errorf("overlap %s: it needs %s%s created beside a running %s (phase %s): %w", name, name, NextSuffix, name, s.state.Phase, ErrConflict)
	}
	if predID := s.state.Next.PredecessorID; s.live.ID != predID {
		return fmt.Errorf("overlap %s refused: container %s (%s) is not the predecessor %s%s was created for (%s): %w",
			name, name, short(s.live.ID), name, NextSuffix, short(predID), ErrConflict)
	}
	if err := OverlapMountProblem(readPredecessor(s.live), spec.Exclusive); err != nil {
		return err
	}
	ours, pred := s.next, s.live
	if err := e.arm(ctx, ours); err != nil {
		return err
	}
	if err := e.disarm(ctx, pred); err != nil {
		return err
	}
	if !running(ours) {
		if err := e.inWindow(ctx, StepWindow); err != nil {
			return err
		}
		if err := e.step(ctx, StepStartBeside); err != nil {
			return err
		}
		if err := e.cli.ContainerStart(ctx, ours.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("start %s%s beside %s: %w", name, NextSuffix, name, err)
		}
	}
	targets, err := e.steerTargets(ctx, spec, ours)
	if err != nil {
		return err
	}
	ip := targets[0].Addr.String()
	// It answers on every port before any is moved to it.
	deadline := time.Now().Add(holdMax)
	for _, t := range targets {
		a := net.JoinHostPort(ip, strconv.Itoa(int(t.Port)))
		for {
			err := e.dialNode(ctx, a)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("overlap %s: %s%s does not answer on %s: %v: %w", name, name, NextSuffix, a, err, ErrUnhealthy)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := e.step(ctx, StepSteer); err != nil {
		return err
	}
	if err := e.steer.Point(name, targets); err != nil {
		return fmt.Errorf("move the ports of %s to %s%s: %w", name, name, NextSuffix, err)
	}
	// The predecessor finishes the connections it has (see overlap_drain.go)
	// before it is told to stop.
	ports := map[uint16]bool{}
	for _, p := range readPredecessor(pred).Ports {
		if p.Proto == "tcp" {
			ports[p.ContainerPort] = true
		}
	}
	pid := 0
	if pred.State != nil {
		pid = pred.State.Pid
	}
	if err := e.during(ctx, StepDrainConnections, func() error {
		e.drain(ctx, name, pid, ports, drain)
		return ctx.Err()
	}); err != nil {
		return err
	}
	if err := e.setAside(ctx, move{c: pred, what: "predecessor", stop: true, stopStep: StepDrainPredecessor, wait: drain, to: name + PredecessorSuffix, renameStep: StepRenamePredecessor}); err != nil {
		return err
	}
	return e.setAside(ctx, move{c: ours, what: "the mesh's container", to: name, renameStep: StepRenameNext})
}

// steerTargets are spec's host ports pointed at c: its IPv4 address, its
// container ports, and where the engine publishes them on loopback.
func (e *Engine) steerTargets(ctx context.Context, spec Spec, c *container.InspectResponse) ([]steer.Target, error) {
	name := spec.Name
	ports, err := spec.portMap()
	if err != nil {
		return nil, err
	}
	ip := e.containerIP(ctx, c.ID)
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() {
		return nil, fmt.Errorf("overlap %s: %s has no IPv4 address on its networks (%q): %w", name, strings.TrimPrefix(c.Name, "/"), ip, ErrBadSpec)
	}
	// Where the engine published it on loopback: the node's own connects
	// to 127.0.0.1 are steered there.
	loopback := map[nat.Port]uint16{}
	if ci, err := e.cli.ContainerInspect(ctx, c.ID); err == nil && ci.NetworkSettings != nil {
		for p, bs := range ci.NetworkSettings.Ports {
			for _, b := range bs {
				if hp, err := strconv.ParseUint(b.HostPort, 10, 16); err == nil && b.HostIP == "127.0.0.1" {
					loopback[p] = uint16(hp)
				}
			}
		}
	}
	var targets []steer.Target
	for _, b := range ports {
		if b.port.Proto() != "tcp" {
			return nil, fmt.Errorf("overlap %s: port %s is not TCP; only TCP ports can be moved: %w", name, b.port, ErrBadSpec)
		}
		targets = append(targets, steer.Target{HostPort: b.hostPort, Addr: addr, Port: uint16(b.port.Int()), Loopback: loopback[b.port]})
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("overlap %s: the module publishes no port to move: %w", name, ErrBadSpec)
	}
	return targets, nil
}

// dialNode connects to addr from the node's network namespace (past any
// hold) and closes the connection.
func (e *Engine) dialNode(ctx context.Context, addr string) error {
	c, err := e.connectNode(ctx, addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// connectNode connects to addr from the node's network namespace, past any
// hold, within 500 ms: the one way the cutover asks whether a port answers.
func (e *Engine) connectNode(ctx context.Context, addr string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if e.hold != nil {
		return e.hold.Dial(dctx, addr)
	}
	var d net.Dialer
	return d.DialContext(dctx, "tcp", addr)
}

// unsteer moves name's ports back to the engine's own publishing: what a
// rollback does once the predecessor answers again.
func (e *Engine) unsteer(name string) error {
	if e.steer == nil {
		return nil
	}
	if err := e.steer.Remove(strings.TrimSuffix(name, NextSuffix)); err != nil {
		return fmt.Errorf("move the ports of %s back to the engine's: %w", name, err)
	}
	return nil
}

// rollbackOverlap moves the ports back the way Overlap moved them: the
// predecessor started again beside the mesh's container (the engine
// publishes the host ports for it again: the mesh's container has them on
// loopback only), and once it answers, the steering removed in one
// transaction; then the mesh's container is stopped (finishing its
// connections) and removed, the predecessor renamed back. done is false
// when there is no predecessor to move back to (nothing was started
// beside): the swap's rollback goes on.
func (e *Engine) rollbackOverlap(ctx context.Context, name string, s *snapshot, nc *container.InspectResponse) (done bool, err error) {
	l := labels(nc)
	pc := s.pred
	if pc == nil && s.live != nil && s.live.ID == l[LabelPredecessor] {
		pc = s.live
	}
	if pc == nil {
		return false, e.unsteer(name)
	}
	if r, rerr := parseRestart(l[LabelPredecessorRestart]); rerr == nil && pc.HostConfig != nil && pc.HostConfig.RestartPolicy != r {
		if err := e.step(ctx, StepRestorePredecessor); err != nil {
			return true, err
		}
		if err := e.setRestart(ctx, pc.ID, r); err != nil {
			return true, fmt.Errorf("restore restart policy of predecessor %s to %s: %w", strings.TrimPrefix(pc.Name, "/"), formatRestart(r), err)
		}
	}
	if !running(pc) && l[LabelPredecessorRunning] != "false" {
		if err := e.step(ctx, StepStartPredecessor); err != nil {
			return true, err
		}
		if err := e.cli.ContainerStart(ctx, pc.ID, container.StartOptions{}); err != nil {
			return true, fmt.Errorf("start predecessor %s beside %s: %w", strings.TrimPrefix(pc.Name, "/"), name, err)
		}
		ip := e.containerIP(ctx, pc.ID)
		deadline := time.Now().Add(holdMax)
		for _, p := range readPredecessor(pc).Ports {
			if p.Proto != "tcp" || ip == "" {
				continue
			}
			a := net.JoinHostPort(ip, strconv.Itoa(int(p.ContainerPort)))
			for e.dialNode(ctx, a) != nil && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if err := e.step(ctx, StepSteer); err != nil {
		return true, err
	}
	if err := e.unsteer(name); err != nil {
		return true, err
	}
	if nc == s.live {
		if err := e.setAside(ctx, move{c: nc, what: "the mesh's container", stop: true, stopStep: StepStopNew, wait: defaultRollbackStopWait,
			to: name + NextSuffix, renameStep: StepRenameNew}); err != nil {
			return true, err
		}
	}
	if pc == s.pred {
		if err := e.step(ctx, StepRestorePredecessor); err != nil {
			return true, err
		}
		if err := e.cli.ContainerRename(ctx, pc.ID, name); err != nil {
			return true, fmt.Errorf("rename %s%s back to %s: %w", name, PredecessorSuffix, name, err)
		}
	}
	return true, e.remove(ctx, StepRemoveNew, nc, true)
}

// Resteer points the steered ports of every running container an overlap
// made (labelled LabelCutover=overlap, under its module's own name) at its
// address now: the engine may give a restarted container another one, and
// the steering, a table in the kernel, does not outlive a reboot. It
// writes only what changed since its last call on this engine (the first
// call writes each), and returns the modules it re-pointed.
func (e *Engine) Resteer(ctx context.Context) ([]string, error) {
	if e.steer == nil || e.cli == nil {
		return nil, nil
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelCutover+"="+CutoverOverlap))})
	if err != nil {
		return nil, fmt.Errorf("list the overlap's containers: %w", err)
	}
	e.steerMu.Lock()
	defer e.steerMu.Unlock()
	if e.steered == nil {
		e.steered = map[string]string{}
	}
	var moved []string
	var errs []error
	for _, lc := range list {
		if len(lc.Names) == 0 || lc.State != "running" {
			continue
		}
		name := strings.TrimPrefix(lc.Names[0], "/")
		if name != lc.Labels[LabelModule] {
			continue // <name>.next: not cut over yet
		}
		c, err := e.cli.ContainerInspect(ctx, lc.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		spec := Spec{Name: name, Cutover: CutoverOverlap}
		if err := json.Unmarshal([]byte(labels(&c)[LabelOverlapPorts]), &spec.Ports); err != nil {
			errs = append(errs, fmt.Errorf("container %s: label %s: %w", name, LabelOverlapPorts, err))
			continue
		}
		targets, err := e.steerTargets(ctx, spec, &c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		key := fmt.Sprint(targets)
		if e.steered[name] == key {
			continue
		}
		if err := e.steer.Point(name, targets); err != nil {
			errs = append(errs, fmt.Errorf("re-point the ports of %s: %w", name, err))
			continue
		}
		e.steered[name] = key
		moved = append(moved, name)
	}
	return moved, errors.Join(errs...)
}
