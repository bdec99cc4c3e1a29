package containers

// Create: the module's container made beside the predecessor, not started.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
)

func formatRestart(r container.RestartPolicy) string {
	if r.Name == "" {
		return "no"
	}
	if r.Name == container.RestartPolicyOnFailure && r.MaximumRetryCount > 0 {
		return fmt.Sprintf("%s:%d", r.Name, r.MaximumRetryCount)
	}
	return string(r.Name)
}

func parseRestart(s string) (container.RestartPolicy, error) {
	name, max, hasMax := strings.Cut(s, ":")
	r := container.RestartPolicy{Name: container.RestartPolicyMode(name)}
	switch r.Name {
	case "", container.RestartPolicyDisabled:
		r.Name = container.RestartPolicyDisabled
	case container.RestartPolicyAlways, container.RestartPolicyUnlessStopped:
	case container.RestartPolicyOnFailure:
		if hasMax {
			n, err := strconv.Atoi(max)
			if err != nil || n < 0 {
				return r, fmt.Errorf("restart policy %q: the retry count must be a number", s)
			}
			r.MaximumRetryCount = n
		}
		return r, nil
	default:
		return r, fmt.Errorf("restart policy %q is not one of no, always, unless-stopped, on-failure[:N]", s)
	}
	if hasMax {
		return r, fmt.Errorf("restart policy %q: only on-failure takes a retry count", s)
	}
	return r, nil
}

// digest identifies what Create was asked for, so a .next made for another
// spec or another predecessor is replaced rather than reused.
func digest(spec Spec, pred *Predecessor) string {
	v := struct {
		S Spec
		P Predecessor
	}{S: spec}
	if pred != nil {
		// What the new container is made from; not the predecessor's
		// state, which the swap itself changes.
		v.P = Predecessor{ID: pred.ID, Mounts: pred.Mounts, Networks: pred.Networks, Aliases: pred.Aliases}
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Create creates <name>.next, not started: spec's image, command, ports and
// healthcheck; the predecessor's mounts (the same named and anonymous
// volumes, by name, and the same bind mounts: the data stays in place), its
// networks with their aliases, and its restart policy, which is recorded in a
// label and armed only at the swap (a created container with "always" could
// otherwise be started by a daemon restart). pred is nil for a new service:
// no mounts, the default network, restart unless-stopped unless spec says.
//
// On resume: an existing <name>.next of ours made from the same spec and
// predecessor is reused (and its networks completed); one made from another
// is removed, without its volumes, and created again; a <name> that is
// already ours means the swap is done, and Create does nothing.
func (e *Engine) Create(ctx context.Context, spec Spec, pred *Predecessor) error {
	ports, err := spec.portMap()
	if err != nil {
		return err
	}
	s, err := e.snapshot(ctx, spec.Name)
	if err != nil {
		return err
	}
	switch s.state.Phase {
	case PhaseConflict:
		return fmt.Errorf("create %s%s refused: %s: %w", spec.Name, NextSuffix, s.state.Reason, ErrConflict)
	case PhaseSwapped, PhaseMigrated, PhaseSwapping:
		return nil // the swap has begun or is done: Create is behind us
	}
	restart := spec.RestartPolicy
	if restart == "" {
		restart = "unless-stopped"
		if pred != nil {
			restart = pred.RestartPolicy
		}
	}
	if _, err := parseRestart(restart); err != nil {
		return fmt.Errorf("module %s: %w", spec.Name, err)
	}
	want := digest(spec, pred)
	nextName := spec.Name + NextSuffix
	if s.next != nil {
		if labels(s.next)[LabelSpec] == want {
			return e.connectNetworks(ctx, s.next, pred)
		}
		if running(s.next) {
			return fmt.Errorf("%s was made for another spec or predecessor and is running; stop it or roll back first: %w", nextName, ErrConflict)
		}
		// Ours, never started, made for another spec: replace it. Its
		// volumes are the predecessor's and stay.
		if err := e.remove(ctx, StepCreate, s.next, false); err != nil {
			return fmt.Errorf("replace stale %s: %w", nextName, err)
		}
	}
	if err := e.step(ctx, StepCreate); err != nil {
		return err
	}

	predID, predRunning, predRestart := "", "false", ""
	if pred != nil {
		predID, predRestart = pred.ID, pred.RestartPolicy
		if pred.Running {
			predRunning = "true"
		}
	}
	cfg := &container.Config{
		Image: spec.Image,
		Cmd:   spec.Cmd,
		Labels: map[string]string{
			LabelModule: spec.Name, LabelPredecessor: predID, LabelRestart: restart,
			LabelPredecessorRunning: predRunning, LabelPredecessorRestart: predRestart, LabelSpec: want,
		},
		ExposedPorts: nat.PortSet{},
	}
	if h := spec.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
	hc := &container.HostConfig{
		PortBindings:  nat.PortMap{},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	for _, b := range ports {
		cfg.ExposedPorts[b.port] = struct{}{}
		hc.PortBindings[b.port] = append(hc.PortBindings[b.port], nat.PortBinding{HostIP: b.hostIP, HostPort: strconv.Itoa(int(b.hostPort))})
	}
	var netCfg *network.NetworkingConfig
	if pred != nil {
		for _, m := range pred.Mounts {
			mm := mount.Mount{Type: mount.Type(m.Type), Target: m.Destination, ReadOnly: m.ReadOnly}
			switch mm.Type {
			case mount.TypeVolume:
				mm.Source = m.Name // the same volume, anonymous ones included: reattached, not recreated
			case mount.TypeBind:
				mm.Source = m.Source
				if m.Propagation != "" {
					mm.BindOptions = &mount.BindOptions{Propagation: mount.Propagation(m.Propagation)}
				}
			}
			hc.Mounts = append(hc.Mounts, mm)
		}
		if len(pred.Networks) > 0 {
			primary := pred.Networks[0]
			hc.NetworkMode = container.NetworkMode(primary)
			// The API this node speaks (1.41) takes one network at creation;
			// the others are connected after.
			if as := pred.Aliases[primary]; len(as) > 0 {
				netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{primary: {Aliases: as}}}
			}
		}
	}
	created, err := e.cli.ContainerCreate(ctx, cfg, hc, netCfg, nil, nextName)
	if err != nil {
		return fmt.Errorf("create %s from image %s: %w", nextName, spec.Image, err)
	}
	c, err := e.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", nextName, err)
	}
	return e.connectNetworks(ctx, &c, pred)
}

// connectNetworks connects c to each of the predecessor's networks it is not
// on yet.
func (e *Engine) connectNetworks(ctx context.Context, c *container.InspectResponse, pred *Predecessor) error {
	if pred == nil || len(pred.Networks) < 2 {
		return nil
	}
	have := map[string]bool{}
	if c.NetworkSettings != nil {
		for n := range c.NetworkSettings.Networks {
			have[n] = true
		}
	}
	for _, n := range pred.Networks[1:] {
		if have[n] {
			continue
		}
		if err := e.step(ctx, StepConnectNetworks); err != nil {
			return err
		}
		if err := e.cli.NetworkConnect(ctx, n, c.ID, &network.EndpointSettings{Aliases: pred.Aliases[n]}); err != nil {
			return fmt.Errorf("connect %s to network %s: %w", strings.TrimPrefix(c.Name, "/"), n, err)
		}
	}
	return nil
}
