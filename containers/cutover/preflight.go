package cutover

// Preflight: what is checked and recorded before anything changes.

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"adoption/containers/cutoverwire"
)

// Preflight checks, before anything changes, that the cutover of spec can
// start, and records the predecessor: the container named spec.Name (or, in
// an interrupted swap, <name>.predecessor). It returns nil and no error when
// there is none: the module is a new service, and Create and Swap simply
// raise it.
//
// It refuses, changing nothing:
//   - an image not present on the node (ErrImageMissing);
//   - a <name> that is already the mesh's (ErrMigrated; the predecessor kept
//     as <name>.predecessor, if any, is returned with the error);
//   - a name collision (ErrConflict): <name> labelled for another module,
//     <name>.next not created by the mesh, or <name>.predecessor that no
//     container of the mesh replaced (its ID is not in adoption.predecessor);
//   - a host port of spec held by any container but the predecessor, or
//     not bindable on the node while the predecessor does not publish it
//     (ErrPortHeld);
//   - a variable or label the predecessor was given that the module sets
//     otherwise, neither kept nor decided (*ValueConflicts, by key and
//     digests), or a decision on one the module does not set (ErrBadSpec).
func (e *Engine) Preflight(ctx context.Context, spec Spec) (*Predecessor, error) {
	if err := e.step(ctx, StepPreflight); err != nil {
		return nil, err
	}
	ports, err := spec.portMap()
	if err != nil {
		return nil, err
	}
	if err := checkName(spec.Name); err != nil {
		return nil, err
	}
	if err := spec.checkTakes(); err != nil {
		return nil, err
	}
	if spec.Image == "" {
		return nil, fmt.Errorf("module %s has no image", spec.Name)
	}
	if err := e.ready(); err != nil {
		return nil, err
	}
	if _, err := e.cli.ImageInspect(ctx, spec.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %s is not present on the node; load it (docker load -i FILE) or configure a registry, then retry the cutover of %s: %w", spec.Image, spec.Name, ErrImageMissing)
		}
		return nil, fmt.Errorf("inspect image %s: %w", spec.Image, err)
	}
	s, err := e.snapshot(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	st := s.state
	var c *container.InspectResponse
	switch st.Phase {
	case PhaseConflict:
		return nil, fmt.Errorf("cutover of %s refused: %s: %w", spec.Name, st.Reason, ErrConflict)
	case PhaseSwapped, PhaseMigrated:
		var pred *Predecessor
		if s.pred != nil {
			pred = recordPredecessor(s.pred, s.live)
		}
		return pred, fmt.Errorf("module %s is already migrated: container %s (%s, image %s) is the mesh's (label %s=%s): %w",
			spec.Name, spec.Name, short(st.Live.ID), st.Live.Image, LabelModule, spec.Name, ErrMigrated)
	case PhaseSwapping:
		c = s.pred // an interrupted swap: the predecessor is already renamed
	case PhaseUntouched, PhaseCreated:
		c = s.live // nil when a new service's .next was created
	}
	var pred *Predecessor
	if c != nil {
		pred = recordPredecessor(c, s.next)
	}
	// The predecessors of other names: recorded by an earlier Create when
	// a swap was interrupted, else looked up by name.
	var others []*Predecessor
	var otherCs []*container.InspectResponse
	if refs, err := replacedOf(s.next); err != nil {
		return nil, err
	} else if len(refs) > 0 && st.Phase == PhaseSwapping {
		cs, err := e.replacedNow(ctx, refs)
		if err != nil {
			return nil, err
		}
		for i, oc := range cs {
			if oc != nil {
				p := readPredecessor(oc)
				p.Running, p.RestartPolicy = refs[i].Running, refs[i].Restart
				others, otherCs = append(others, p), append(otherCs, oc)
			}
		}
	} else {
		_, cs, err := e.resolveReplaces(ctx, spec)
		if err != nil {
			return nil, err
		}
		for _, oc := range cs {
			others, otherCs = append(others, readPredecessor(oc)), append(otherCs, oc)
		}
	}
	all := others
	if pred != nil {
		all = append([]*Predecessor{pred}, others...)
	}
	if _, err := e.checkUnit(ctx, spec); err != nil {
		return nil, err
	}
	if err := checkContract(spec, ports, all); err != nil {
		return nil, err
	}
	if spec.Cutover == CutoverOverlap {
		if len(spec.Replaces) > 0 {
			return nil, fmt.Errorf("cutover of %s refused: an overlap cutover takes over one predecessor, and the module replaces %v: use cutover: swap: %w", spec.Name, spec.Replaces, ErrBadSpec)
		}
		for _, p := range all {
			if err := OverlapMountProblem(p, spec.Exclusive); err != nil {
				return nil, fmt.Errorf("cutover of %s refused: %w", spec.Name, err)
			}
		}
	}
	if err := e.checkPorts(ctx, spec, ports, all); err != nil {
		return nil, err
	}
	// What will be carried over, by name, for the history and the status.
	src, srcC := pred, c
	if src == nil && len(others) > 0 {
		src, srcC = others[0], otherCs[0]
	}
	if src != nil {
		mk := carry(spec, srcC, src, e.defaults(ctx, srcC.Image), e.defaults(ctx, spec.Image))
		if err := e.conflicts(spec.Name, mk.clashes); err != nil {
			return nil, err
		}
		src.Env, src.Labels = mk.carried.Env, mk.carried.Labels
	}
	for _, o := range others {
		if src != nil && o.ID != src.ID {
			o.Env = nil // carried from src only; theirs are not taken over
		}
	}
	if src == nil {
		return nil, nil
	}
	out := *src
	for _, o := range others {
		out.Replaces = append(out.Replaces, *o)
	}
	return &out, nil
}

// checkContract refuses a cutover that would silently stop publishing a
// port a predecessor publishes: its clients would lose the service while
// the new container's healthcheck passes. A port the module drops on
// purpose (container.drop_ports) is let go.
func checkContract(spec Spec, ports []binding, preds []*Predecessor) error {
	drop := map[string]bool{}
	for _, d := range spec.DropPorts {
		n, proto, err := splitPort(d)
		if err != nil {
			return fmt.Errorf("module %s: container.drop_ports entry %q: %w: %w", spec.Name, d, err, ErrBadSpec)
		}
		drop[fmt.Sprintf("%d/%s", n, proto)] = true
	}
	for _, p := range preds {
		for _, pp := range p.Ports {
			key := fmt.Sprintf("%d/%s", pp.HostPort, pp.Proto)
			kept := drop[key]
			for _, b := range ports {
				if b.hostPort == pp.HostPort && b.port.Proto() == pp.Proto {
					kept = true
				}
			}
			if !kept {
				return fmt.Errorf("cutover of %s refused: predecessor %s publishes host port %s (container port %d), which the module's container would not publish, and its clients would lose it; "+
					"publish it in modules[%s].container.ports or drop it deliberately with container.drop_ports: [%q]; nothing was changed: %w",
					spec.Name, p.Name, key, pp.ContainerPort, spec.Name, key, ErrPortDropped)
			}
		}
	}
	return nil
}

// recordPredecessor reads what the new container must inherit. When the
// mesh's container (claim) was already made for c, c may have been stopped
// and disarmed by an interrupted swap: its state before the cutover is read
// from claim's labels instead.
func recordPredecessor(c, claim *container.InspectResponse) *Predecessor {
	p := readPredecessor(c)
	if l := labels(claim); l != nil && l[LabelPredecessor] == c.ID && l[LabelPredecessorRestart] != "" {
		p.Running = l[LabelPredecessorRunning] == "true"
		p.RestartPolicy = l[LabelPredecessorRestart]
	}
	return p
}

func readPredecessor(c *container.InspectResponse) *Predecessor {
	p := &Predecessor{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/"), ImageID: c.Image, Running: running(c)}
	if c.Config != nil {
		p.Image = c.Config.Image
	}
	named := map[string]bool{} // volume names the configuration gives
	hc := c.HostConfig
	if hc == nil {
		hc = &container.HostConfig{}
	}
	for _, b := range hc.Binds {
		if src, _, ok := strings.Cut(b, ":"); ok && !strings.HasPrefix(src, "/") {
			named[src] = true
		}
	}
	for _, m := range hc.Mounts {
		if m.Type == mount.TypeVolume && m.Source != "" {
			named[m.Source] = true
		}
	}
	for _, m := range c.Mounts {
		switch m.Type {
		case mount.TypeVolume, mount.TypeBind, mount.TypeTmpfs:
		default:
			continue // npipe, cluster, image: nothing the cutover can carry
		}
		mm := cutoverwire.Mount{Type: string(m.Type), Name: m.Name, Source: m.Source, Destination: m.Destination,
			ReadOnly: !m.RW, Propagation: string(m.Propagation)}
		if m.Type == mount.TypeVolume {
			mm.Anonymous = !named[m.Name]
		}
		p.Mounts = append(p.Mounts, mm)
	}
	sort.Slice(p.Mounts, func(i, j int) bool { return p.Mounts[i].Destination < p.Mounts[j].Destination })
	for port, bs := range hc.PortBindings {
		for _, b := range bs {
			hp, _ := strconv.ParseUint(b.HostPort, 10, 16)
			p.Ports = append(p.Ports, cutoverwire.Published{HostIP: b.HostIP, HostPort: uint16(hp), ContainerPort: uint16(port.Int()), Proto: port.Proto()})
		}
	}
	sort.Slice(p.Ports, func(i, j int) bool { return p.Ports[i].HostPort < p.Ports[j].HostPort })
	p.RestartPolicy = formatRestart(hc.RestartPolicy)

	mode := string(hc.NetworkMode)
	if mode == "host" || mode == "none" || strings.HasPrefix(mode, "container:") {
		p.Networks = []string{mode}
		return p
	}
	if c.NetworkSettings != nil {
		for n, ep := range c.NetworkSettings.Networks {
			p.Networks = append(p.Networks, n)
			var as []string
			if ep != nil {
				for _, a := range ep.Aliases {
					// Docker adds the short ID itself; the name follows the rename.
					if a != short(c.ID) && a != p.Name {
						as = append(as, a)
					}
				}
			}
			if len(as) > 0 {
				if p.Aliases == nil {
					p.Aliases = map[string][]string{}
				}
				p.Aliases[n] = as
			}
		}
	}
	primary := mode
	if primary == "default" || primary == "" {
		primary = "bridge"
	}
	sort.Slice(p.Networks, func(i, j int) bool {
		if (p.Networks[i] == primary) != (p.Networks[j] == primary) {
			return p.Networks[i] == primary
		}
		return p.Networks[i] < p.Networks[j]
	})
	return p
}

type binding struct {
	hostIP   string
	hostPort uint16
	port     nat.Port // the container's
}

// portMap parses Spec.Ports, sorted by host port.
func (s Spec) portMap() ([]binding, error) {
	var out []binding
	for host, ctr := range s.Ports {
		hostIP, hp := "", host
		if i := strings.LastIndex(host, ":"); i >= 0 {
			hostIP, hp = strings.Trim(host[:i], "[]"), host[i+1:]
		}
		hport, hproto, err := splitPort(hp)
		if err != nil {
			return nil, fmt.Errorf("module %s: host port %q: %w", s.Name, host, err)
		}
		cport, cproto, err := splitPort(ctr)
		if err != nil {
			return nil, fmt.Errorf("module %s: container port %q: %w", s.Name, ctr, err)
		}
		if hproto != cproto {
			return nil, fmt.Errorf("module %s: host port %q and container port %q differ in protocol", s.Name, host, ctr)
		}
		if hostIP != "" && net.ParseIP(hostIP) == nil {
			return nil, fmt.Errorf("module %s: host port %q: %q is not an IP address", s.Name, host, hostIP)
		}
		p, _ := nat.NewPort(cproto, strconv.Itoa(int(cport)))
		out = append(out, binding{hostIP: hostIP, hostPort: hport, port: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hostPort < out[j].hostPort })
	return out, nil
}

func splitPort(s string) (uint16, string, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" && proto != "sctp" {
		return 0, "", fmt.Errorf("protocol %q is not tcp, udp or sctp", proto)
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return 0, "", fmt.Errorf("%q is not a port number (1-65535)", num)
	}
	return uint16(n), proto, nil
}

// checkPorts refuses a host port that another container publishes, or that
// something outside Docker holds, unless the predecessor publishes it.
func (e *Engine) checkPorts(ctx context.Context, spec Spec, ports []binding, preds []*Predecessor) error {
	if len(ports) == 0 {
		return nil
	}
	list, err := e.cli.ContainerList(ctx, container.ListOptions{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, b := range ports {
		proto := b.port.Proto()
		predHolds := false
		isPred := map[string]bool{}
		for _, pred := range preds {
			isPred[pred.ID] = true
			for _, p := range pred.Ports {
				if p.HostPort == b.hostPort && p.Proto == proto {
					predHolds = true
				}
			}
		}
		for _, c := range list {
			if isPred[c.ID] || c.Labels[LabelModule] == spec.Name {
				continue
			}
			for _, p := range c.Ports {
				if p.PublicPort == b.hostPort && p.Type == proto {
					name := c.ID
					if len(c.Names) > 0 {
						name = strings.TrimPrefix(c.Names[0], "/")
					}
					return fmt.Errorf("cutover of %s refused: host port %d/%s is published by container %s (%s, image %s), which is not a predecessor it replaces; free the port, list the container in container.replaces, or change the module's ports: %w",
						spec.Name, b.hostPort, proto, name, short(c.ID), c.Image, ErrPortHeld)
				}
			}
		}
		if predHolds || e.portFree == nil || spec.ReplacesUnit != "" {
			// A unit's hand-over: the activity has named every holder
			// of the port that is not the unit.
			continue
		}
		if err := e.portFree(proto, b.hostIP, b.hostPort); err != nil {
			return fmt.Errorf("cutover of %s refused: host port %d/%s is held on the node by something other than a container (%v); find it with `ss -lnp 'sport = :%d'`: %w",
				spec.Name, b.hostPort, proto, err, b.hostPort, ErrPortHeld)
		}
	}
	return nil
}

// bindable tries to bind the port: with Docker's iptables publishing a
// container's port holds no socket, so this sees only the node's own
// listeners (and Docker's userland proxy).
func bindable(proto, hostIP string, port uint16) error {
	addr := net.JoinHostPort(hostIP, strconv.Itoa(int(port)))
	switch proto {
	case "tcp":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		return l.Close()
	case "udp":
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return nil
}
