package cutover

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
// spec or another predecessor is replaced rather than reused. The
// environment's values enter only hashed.
func digest(spec Spec, pred *Predecessor, repl []replacedRef) string {
	v := struct {
		S   Spec
		Env string
		P   Predecessor
		R   []string
	}{S: spec}
	if len(spec.Env) > 0 {
		h := sha256.New()
		for _, k := range sortedKeys(spec.Env) {
			fmt.Fprintf(h, "%q=%q\n", k, spec.Env[k])
		}
		v.Env = hex.EncodeToString(h.Sum(nil))
	}
	if pred != nil {
		// What the new container is made from; not the predecessor's
		// state, which the swap itself changes.
		v.P = Predecessor{ID: pred.ID, Mounts: pred.Mounts, Networks: pred.Networks, Aliases: pred.Aliases}
	}
	for _, r := range repl {
		v.R = append(v.R, r.ID)
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Create creates <name>.next, not started, and says what it carried over.
// The predecessor is inspected here, on the node: pred (from the request,
// as Preflight recorded it) only has to name the same container, so a
// request can neither add a mount nor join a network. The new container
// gets spec's image, command, ports, healthcheck, environment and labels
// over what the operator gave the predecessor (see carry): its environment
// less what its image set, labels, the same named and anonymous volumes and
// bind mounts (the data stays in place), networks with aliases and static
// addresses, user, working dir, hostname, DNS, extra hosts, capabilities,
// devices, ulimits, resource limits, log driver, and its restart policy,
// which is recorded in a label and armed only at the swap (a created
// container with "always" could otherwise be started by a daemon restart).
// With no predecessor of its own name, the first of spec.Replaces is
// carried over; with neither, it is a new service: restart unless-stopped
// unless spec says.
//
// On resume: an existing <name>.next of ours made from the same spec and
// predecessor is reused (and its networks completed); one made from another
// is removed, without its volumes, and created again; a <name> that is
// already ours means the swap is done, and Create does nothing.
func (e *Engine) Create(ctx context.Context, spec Spec, pred *Predecessor) (*Carried, error) {
	ports, err := spec.portMap()
	if err != nil {
		return nil, err
	}
	s, err := e.snapshot(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	switch s.state.Phase {
	case PhaseConflict:
		return nil, fmt.Errorf("create %s%s refused: %s: %w", spec.Name, NextSuffix, s.state.Reason, ErrConflict)
	case PhaseSwapped, PhaseMigrated, PhaseSwapping:
		return nil, nil // the swap has begun or is done: Create is behind us
	}
	repl, replC, err := e.resolveReplaces(ctx, spec)
	if err != nil {
		return nil, err
	}
	// The predecessor as the node shows it now.
	src := s.live
	var own *Predecessor
	if src != nil {
		own = recordPredecessor(src, s.next)
	} else if len(replC) > 0 {
		src = replC[0]
	}
	var node *Predecessor
	if src != nil {
		node = recordPredecessor(src, s.next)
	}
	switch {
	case pred != nil && node == nil:
		return nil, fmt.Errorf("create %s%s refused: preflight recorded predecessor %s (%s), which is no longer on the node; run the cutover again from preflight: %w",
			spec.Name, NextSuffix, pred.Name, short(pred.ID), ErrConflict)
	case pred != nil && node.ID != pred.ID:
		return nil, fmt.Errorf("create %s%s refused: preflight recorded predecessor %s (%s) but the node has %s (%s); run the cutover again from preflight: %w",
			spec.Name, NextSuffix, pred.Name, short(pred.ID), node.Name, short(node.ID), ErrConflict)
	case pred == nil && node != nil:
		return nil, fmt.Errorf("create %s%s refused: preflight recorded no predecessor but the node has %s (%s); run the cutover again from preflight: %w",
			spec.Name, NextSuffix, node.Name, short(node.ID), ErrConflict)
	}
	restart := spec.RestartPolicy
	if restart == "" {
		restart = "unless-stopped"
		if node != nil {
			restart = node.RestartPolicy
		}
	}
	if _, err := parseRestart(restart); err != nil {
		return nil, fmt.Errorf("module %s: %w: %w", spec.Name, err, ErrBadSpec)
	}
	var predImg *imageDefaults
	if src != nil {
		predImg = e.defaults(ctx, src.Image)
	}
	mk := carry(spec, src, node, predImg, e.defaults(ctx, spec.Image))
	if err := spec.checkTakes(); err != nil {
		return nil, err
	}
	if err := e.conflicts(spec.Name, mk.clashes); err != nil {
		return nil, err
	}
	if len(repl) > 0 {
		mk.carried.Settings = append(mk.carried.Settings, "replaces "+strings.Join(spec.Replaces, ","))
	}
	want := digest(spec, node, repl)
	nextName := spec.Name + NextSuffix
	if s.next != nil {
		if labels(s.next)[LabelSpec] == want {
			return &mk.carried, e.connectNetworks(ctx, s.next, mk)
		}
		if running(s.next) {
			return nil, fmt.Errorf("%s was made for another spec or predecessor and is running; stop it or roll back first: %w", nextName, ErrConflict)
		}
		// Ours, never started, made for another spec: replace it. Its
		// volumes are the predecessor's and stay.
		if err := e.remove(ctx, StepCreate, s.next, false); err != nil {
			return nil, fmt.Errorf("replace stale %s: %w", nextName, err)
		}
	}
	if err := e.step(ctx, StepCreate); err != nil {
		return nil, err
	}

	predID, predRunning, predRestart := "", "false", ""
	if own != nil {
		predID, predRestart = own.ID, own.RestartPolicy
		if own.Running {
			predRunning = "true"
		}
	}
	cfg, hc := mk.cfg, mk.hc
	for k, v := range map[string]string{
		LabelModule: spec.Name, LabelPredecessor: predID, LabelRestart: restart,
		LabelPredecessorRunning: predRunning, LabelPredecessorRestart: predRestart, LabelSpec: want,
	} {
		cfg.Labels[k] = v
	}
	if len(repl) > 0 {
		b, _ := json.Marshal(repl)
		cfg.Labels[LabelReplaced] = string(b)
	}
	if u, err := e.checkUnit(ctx, spec); err != nil {
		return nil, err
	} else if u != nil {
		b, _ := json.Marshal(u)
		cfg.Labels[LabelReplacedUnit] = string(b)
		mk.carried.Settings = append(mk.carried.Settings, "replaces unit "+u.Name)
	}
	if spec.Cutover == CutoverOverlap {
		cfg.Labels[LabelCutover] = CutoverOverlap
		b, _ := json.Marshal(spec.Ports)
		cfg.Labels[LabelOverlapPorts] = string(b)
	}
	cfg.ExposedPorts = nat.PortSet{}
	if h := spec.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
	hc.PortBindings = nat.PortMap{}
	hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyDisabled}
	for _, b := range ports {
		cfg.ExposedPorts[b.port] = struct{}{}
		pb := nat.PortBinding{HostIP: b.hostIP, HostPort: strconv.Itoa(int(b.hostPort))}
		if spec.Cutover == CutoverOverlap {
			// Beside the predecessor, which holds the host port: the
			// engine publishes the port on loopback only (so its forward
			// rules let the node reach it), and the steering moves the
			// host port to it (Overlap).
			pb = nat.PortBinding{HostIP: "127.0.0.1"}
		}
		hc.PortBindings[b.port] = append(hc.PortBindings[b.port], pb)
	}
	var netCfg *network.NetworkingConfig
	if mk.primary != "" {
		// The API this node speaks (1.41) takes one network at creation;
		// the others are connected after.
		netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{mk.primary: mk.endpoints[mk.primary]}}
	}
	created, err := e.cli.ContainerCreate(ctx, cfg, hc, netCfg, nil, nextName)
	if err != nil {
		return nil, fmt.Errorf("create %s from image %s: %w", nextName, spec.Image, err)
	}
	c, err := e.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", nextName, err)
	}
	return &mk.carried, e.connectNetworks(ctx, &c, mk)
}

// connectNetworks connects c to each of the predecessor's networks it is not
// on yet.
func (e *Engine) connectNetworks(ctx context.Context, c *container.InspectResponse, mk made) error {
	have := map[string]bool{}
	if c.NetworkSettings != nil {
		for n := range c.NetworkSettings.Networks {
			have[n] = true
		}
	}
	for _, n := range sortedKeys(mk.endpoints) {
		if have[n] || n == mk.primary {
			continue
		}
		if err := e.step(ctx, StepConnectNetworks); err != nil {
			return err
		}
		if err := e.cli.NetworkConnect(ctx, n, c.ID, mk.endpoints[n]); err != nil {
			return fmt.Errorf("connect %s to network %s: %w", strings.TrimPrefix(c.Name, "/"), n, err)
		}
	}
	return nil
}
