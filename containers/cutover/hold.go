package cutover

// No failed client connection during a swap. Between the moment
// the predecessor lets go of its published ports and the moment the new
// container takes them, a client's SYN would be answered with a reset
// (refused). A PortHold makes the node queue (or, failing that, drop), not
// reject, new connections to those ports for that window. The hold is taken
// before the predecessors stop and released as soon as the new container
// answers on every held port, or after holdMax: a container that never
// answers must not keep clients waiting, it is the health check's to fail
// and roll back. How the ports were held is reported (WithHoldReport).

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"adoption/containers/cutoverwire"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// PortHold holds new TCP connections to host ports of the node. Hold and
// Release are idempotent and keyed by owner (the module's container name),
// so a resumed swap takes the hold again and a rollback releases it.
type PortHold interface {
	// Hold holds ports for at most bound: past it the node lets go by
	// itself, even if the worker died holding.
	Hold(owner string, ports []uint16, bound time.Duration) error
	// Dropping says why owner's hold drops SYNs (the client waits for its
	// retransmission, 1 s) instead of queueing them; nil when it queues.
	Dropping(owner string) error
	Release(owner string) error
	// Dial connects to addr from the node's network namespace, past the
	// hold: the swap's own probe must not be held.
	Dial(ctx context.Context, addr string) (net.Conn, error)
	// NodeAddr is an address of the node's own, not loopback: a connect
	// to a published port there from the node goes through the engine's
	// DNAT as a client's does. "" when the node has none.
	NodeAddr() string
}

// holdMax bounds the hold: past it clients are refused again rather than
// left waiting on a container that does not answer.
const holdMax = 10 * time.Second

// holdBound is how long a hold may last at most, the stop of the
// predecessors included: the kernel lets go by itself then.
func holdBound(stopWait time.Duration) time.Duration {
	return stopWait + holdMax + 5*time.Second
}

// HoldReport is cutoverwire.HoldReport.
type HoldReport = cutoverwire.HoldReport

type holdReportKey struct{}

// WithHoldReport returns a context whose cutover reports to fn how it held
// the ports, once per hold taken.
func WithHoldReport(ctx context.Context, fn func(HoldReport)) context.Context {
	return context.WithValue(ctx, holdReportKey{}, fn)
}

// WithHold makes the swap hold the predecessors' published TCP ports.
func (e *Engine) WithHold(h PortHold) *Engine {
	e.hold = h
	return e
}

// heldPort is a host port the new container publishes, and the
// container's port behind it.
type heldPort struct {
	hostIP string
	port   uint16
	inside uint16
	udp    bool // a UDP port (held by a unit's hand-over): no handshake to tell
}

// holdPorts holds the TCP host ports that a running predecessor publishes
// and the new container publishes too (a port the module drops is not
// held: nothing will answer there). It returns what it holds.
func (e *Engine) holdPorts(ctx context.Context, owner string, ours *container.InspectResponse, preds []*container.InspectResponse, stopWait time.Duration) ([]heldPort, error) {
	if e.hold == nil || ours.HostConfig == nil {
		return nil, nil
	}
	published := map[uint16]bool{}
	for _, c := range preds {
		for _, p := range readPredecessor(c).Ports {
			if p.Proto == "tcp" {
				published[p.HostPort] = true
			}
		}
	}
	var held []heldPort
	seen := map[uint16]bool{}
	for port, bs := range ours.HostConfig.PortBindings {
		if port.Proto() != "tcp" {
			continue
		}
		for _, b := range bs {
			hp, err := strconv.ParseUint(b.HostPort, 10, 16)
			if err != nil || !published[uint16(hp)] || seen[uint16(hp)] {
				continue
			}
			seen[uint16(hp)] = true
			held = append(held, heldPort{hostIP: b.HostIP, port: uint16(hp), inside: uint16(port.Int())})
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	sort.Slice(held, func(i, j int) bool { return held[i].port < held[j].port })
	ports := make([]uint16, 0, len(held))
	for _, h := range held {
		ports = append(ports, h.port)
	}
	if err := e.step(ctx, StepHold); err != nil {
		return nil, err
	}
	if err := e.hold.Hold(owner, ports, holdBound(stopWait)); err != nil {
		return nil, fmt.Errorf("hold new connections to %v during the swap of %s: %w", ports, owner, err)
	}
	rep := HoldReport{Owner: owner, Ports: ports, Queued: true}
	if why := e.hold.Dropping(owner); why != nil {
		rep.Queued, rep.Dropped = false, why.Error()
	}
	if fn, ok := ctx.Value(holdReportKey{}).(func(HoldReport)); ok && fn != nil {
		fn(rep)
	}
	return held, nil
}

// releaseWhenAnswering waits until the container answerer (the one that
// takes the ports) answers on every held port (at most holdMax), then
// releases the hold. It releases even when nothing is held: a hold left
// by an interrupted swap goes too.
func (e *Engine) releaseWhenAnswering(ctx context.Context, owner string, held []heldPort, answerer string) error {
	if e.hold == nil {
		return nil
	}
	if len(held) > 0 {
		ip := e.containerIP(ctx, answerer)
		_ = e.during(ctx, StepAwaitPorts, func() error {
			deadline := time.Now().Add(holdMax)
			for _, h := range held {
				for !h.udp && time.Now().Before(deadline) && ctx.Err() == nil {
					if e.answersAt(ctx, ip, h) == nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			return nil
		})
	}
	if err := e.step(ctx, StepRelease); err != nil {
		return err
	}
	if err := e.hold.Release(owner); err != nil {
		return fmt.Errorf("release the hold on %s's ports: %w", owner, err)
	}
	return nil
}

// releaseOnAnswer starts watching, before the new container c is started,
// for it to answer on every held port, and releases the hold the moment it
// does, while Docker may still be finishing the start. The returned wait,
// called once the start returned (with its error), waits for that (at
// most holdMax more; not at all when the start failed), and releases in
// any case.
//
// Two ways tell that c answers, whichever first: its own port at its
// address (learnt from Docker, which may tell it only once the start
// returned), and the held port at the node's own address, dialled from the
// node: the engine's DNAT takes that connect to c as it takes a client's,
// and it is there as soon as Docker has wired c's port, before c's process
// runs. The Docker lookups run beside the dials, so a slow engine does not
// slow the watch.
func (e *Engine) releaseOnAnswer(ctx context.Context, owner string, held []heldPort, c *container.InspectResponse) (wait func(startErr error) error) {
	if e.hold == nil || len(held) == 0 {
		return func(error) error { return e.releaseWhenAnswering(ctx, owner, nil, "") }
	}
	started := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan error, 1)
	var ip atomic.Value // string: c's address, once Docker tells it
	ip.Store("")
	lookups := make(chan struct{})
	go func() {
		defer close(lookups)
		for ip.Load().(string) == "" {
			isStarted := false
			select {
			case <-started:
				isStarted = true
			default:
			}
			a := e.endpointIP(ctx, c)
			if a == "" && isStarted {
				a = e.containerIP(ctx, c.ID)
			}
			if a != "" {
				ip.Store(a)
				return
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	node := e.hold.NodeAddr()
	pid := 0 // c's process, once started, for its UDP sockets
	go func() {
		released := false
		for !released {
			isStarted := false
			select {
			case <-started:
				isStarted = true
			default:
			}
			a := ip.Load().(string)
			all := true
			for _, h := range held {
				viaNode := node != "" && (h.hostIP == "" || h.hostIP == "0.0.0.0" || h.hostIP == node)
				if h.udp && isStarted && pid == 0 {
					pid = e.containerPID(ctx, c.ID)
				}
				switch {
				case h.udp:
					// Answers once its socket is bound in c.
					if !isStarted || e.udpBound == nil || !e.udpBound(pid, h.inside) {
						all = false
					}
				case a != "" && e.answersAt(ctx, a, h) == nil:
				case viaNode && e.answersVia(ctx, node, h.port) == nil:
				case a == "" && !viaNode && isStarted && e.answers(ctx, h.hostIP, h.port) == nil:
					// Neither its address nor the node's: the host port
					// as a client on the node sees it.
				default:
					all = false
				}
				if !all {
					break
				}
			}
			if all {
				break
			}
			select {
			case <-stop:
				released = true
			case <-ctx.Done():
				released = true
			case <-time.After(2 * time.Millisecond):
			}
		}
		done <- e.releaseWhenAnswering(ctx, owner, nil, "")
	}()
	return func(startErr error) error {
		close(started)
		defer func() { <-lookups }()
		if startErr != nil {
			close(stop)
			return <-done
		}
		select {
		case err := <-done:
			close(stop)
			return err
		case <-time.After(holdMax):
			close(stop)
			return <-done
		}
	}
}

// answersVia says whether port answers a connect to the node's own address
// addr from the node, past the hold: through the engine's DNAT, as a
// client's connect does. A connection the engine's proxy accepts and
// closes at once is no answer.
func (e *Engine) answersVia(ctx context.Context, addr string, port uint16) error {
	a := net.JoinHostPort(addr, strconv.Itoa(int(port)))
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	c, err := e.hold.Dial(dctx, a)
	if err != nil {
		return err
	}
	defer c.Close()
	return heldOpen(c, a, 5*time.Millisecond)
}

// endpointIP is c's IPv4 address as its networks show it: known as soon
// as Docker connects it, while the start is still under way (the
// container's own inspect waits for the start).
func (e *Engine) endpointIP(ctx context.Context, c *container.InspectResponse) string {
	if c.NetworkSettings == nil {
		return ""
	}
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for n := range c.NetworkSettings.Networks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		nw, err := e.cli.NetworkInspect(ctx, n, network.InspectOptions{})
		if err != nil {
			continue
		}
		if ep, ok := nw.Containers[c.ID]; ok && ep.IPv4Address != "" {
			ip, _, _ := strings.Cut(ep.IPv4Address, "/")
			return ip
		}
	}
	return ""
}

// containerIP is an IPv4 address of container id on one of its networks,
// "" when it has none (host network, not running).
func (e *Engine) containerIP(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	c, err := e.cli.ContainerInspect(ctx, id)
	if err != nil || c.NetworkSettings == nil {
		return ""
	}
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for n := range c.NetworkSettings.Networks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if ep := c.NetworkSettings.Networks[n]; ep != nil && ep.IPAddress != "" {
			return ep.IPAddress
		}
	}
	return ""
}

// answersAt says whether the held port answers: the container's own port
// at ip, when it has one (a handshake there is the service's socket, not
// a proxy's), otherwise the host port as a client on the node would see it.
func (e *Engine) answersAt(ctx context.Context, ip string, h heldPort) error {
	if ip == "" || h.inside == 0 {
		return e.answers(ctx, h.hostIP, h.port)
	}
	dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	c, err := e.hold.Dial(dctx, net.JoinHostPort(ip, strconv.Itoa(int(h.inside))))
	if err != nil {
		return err
	}
	return c.Close()
}

// answers connects to a host port as a client on the node would, and
// counts a connection closed at once as no answer (Docker's userland proxy
// accepts while nothing listens behind it).
func (e *Engine) answers(ctx context.Context, hostIP string, port uint16) error {
	if hostIP == "" || hostIP == "0.0.0.0" {
		hostIP = "127.0.0.1"
	} else if hostIP == "::" {
		hostIP = "::1"
	}
	addr := net.JoinHostPort(hostIP, strconv.Itoa(int(port)))
	c, err := e.connectNode(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return heldOpen(c, addr, 50*time.Millisecond)
}

// answersOnNode is answers, and for a port published on every address,
// failing that, the port at the node's own address: after an overlap the
// steering serves the port there, not on loopback.
func (e *Engine) answersOnNode(ctx context.Context, port uint16) error {
	err := e.answers(ctx, "", port)
	if err == nil || e.hold == nil || e.steer == nil {
		return err
	}
	if node := e.hold.NodeAddr(); node != "" {
		if verr := e.answersVia(ctx, node, port); verr == nil {
			return nil
		}
	}
	return err
}

// PortsAnswer checks that every one of ports (host TCP ports of the node)
// answers a connect from the node, after the swap: the module is not
// migrated on its healthcheck alone. UDP ports are not checked (no
// handshake to tell).
func (e *Engine) PortsAnswer(ctx context.Context, hostPorts []uint16) error {
	for _, p := range hostPorts {
		var last error
		deadline := time.Now().Add(5 * time.Second)
		for {
			if last = e.answersOnNode(ctx, p); last == nil || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if last != nil {
			return fmt.Errorf("port %d/tcp does not answer on the node after the swap: %v: %w", p, last, ErrUnhealthy)
		}
	}
	return nil
}
