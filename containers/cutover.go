package containers

// The cutover (DESIGN.md, "The cutover"; issue 4). The container names carry
// the state, so that a resumed activity needs nothing but Docker to know where
// it was:
//
//	<name>              live: the predecessor before the swap, the mesh's after
//	<name>.next         the mesh's container, created and not started
//	<name>.predecessor  the predecessor, stopped, kept for a rollback
//
// "Ours" means labelled adoption.module=<name>. The mesh's container also
// records which container it replaces (adoption.predecessor=<ID>), so the
// lineage of <name>.predecessor is checked by ID, never assumed from a name.
//
// Every step inspects the three names first and does only what is left to do:
// calling a step again after a crash, or after it succeeded, is safe. No step
// ever removes a volume.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
)

// Labels the mesh puts on the containers it creates.
const (
	LabelModule      = "adoption.module"      // the module's name: the container is ours
	LabelPredecessor = "adoption.predecessor" // ID of the container it replaces; "" for a new service
	// LabelRestart is the restart policy the container is armed with at the
	// swap; it is the predecessor's, so a rollback restores it from here.
	LabelRestart = "adoption.restart"
	// LabelPredecessorRunning and LabelPredecessorRestart are the
	// predecessor as it was when the cutover began: a rollback starts it again
	// only if it ran, and gives it back its restart policy, which the swap
	// sets to "no".
	LabelPredecessorRunning = "adoption.predecessor.running"
	LabelPredecessorRestart = "adoption.predecessor.restart"
	LabelSpec               = "adoption.spec" // digest of what Create was asked for
)

// Name suffixes that carry the cutover's state.
const (
	NextSuffix        = ".next"
	PredecessorSuffix = ".predecessor"
)

// Errors a caller tells apart with errors.Is. All but a Docker fault are bad
// input or a refused cutover: retrying without a change will not help.
var (
	ErrImageMissing = errors.New("image not present")
	ErrMigrated     = errors.New("module already migrated")
	ErrConflict     = errors.New("container name conflict")
	ErrPortHeld     = errors.New("port held")
	ErrUnhealthy    = errors.New("container not healthy")
	ErrNoRollback   = errors.New("nothing to roll back to")
)

// Cutover sub-steps, as passed to the progress hook. They are stable names:
// the activity may record them in heartbeats and arm failpoints on them.
const (
	StepPreflight           = "preflight"
	StepCreate              = "create"
	StepConnectNetworks     = "create/connect-networks"
	StepArmRestart          = "swap/arm-restart"
	StepDisarmPredecessor   = "swap/disarm-predecessor-restart"
	StepStopPredecessor     = "swap/stop-predecessor"
	StepRenamePredecessor   = "swap/rename-predecessor"
	StepRenameNext          = "swap/rename-next"
	StepStart               = "swap/start"
	StepWaitHealthy         = "wait-healthy"
	StepStopNew             = "rollback/stop-new"
	StepRenameNew           = "rollback/rename-new"
	StepRestorePredecessor  = "rollback/restore-predecessor"
	StepStartPredecessor    = "rollback/start-predecessor"
	StepRemoveNew           = "rollback/remove-new"
	StepRemovePredecessor   = "prune/remove-predecessor"
	defaultRollbackStopWait = 10 * time.Second
)

// Spec is the module's container as the mesh wants it. Environment variables
// are left out on purpose: a Spec travels in the workflow history.
type Spec struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Cmd   []string `json:"cmd,omitempty"`
	// Ports maps a host port "[IP:]PORT/PROTO" to a container port
	// "PORT/PROTO", e.g. "8025/tcp" -> "25/tcp".
	Ports map[string]string `json:"ports,omitempty"`
	// Healthcheck, when set, is the container's Docker healthcheck; when nil
	// the image's own applies, if it has one.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// RestartPolicy ("no", "always", "unless-stopped", "on-failure[:N]");
	// empty means the predecessor's, or unless-stopped for a new service.
	RestartPolicy string `json:"restart_policy,omitempty"`
}

// Healthcheck is a Docker healthcheck; Test is as in a Dockerfile's
// HEALTHCHECK, e.g. {"CMD", "/svc", "-check", "http://127.0.0.1:8080/health"}.
type Healthcheck struct {
	Test        []string      `json:"test"`
	Interval    time.Duration `json:"interval,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	StartPeriod time.Duration `json:"start_period,omitempty"`
	Retries     int           `json:"retries,omitempty"`
}

// Predecessor is what Preflight records of the container a module replaces,
// before anything changes. It goes into the workflow history.
type Predecessor struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Image   string `json:"image"`    // as configured, e.g. "mail:1.4"
	ImageID string `json:"image_id"` // what it actually ran
	// Mounts: named volumes, anonymous volumes (by the name Docker gave
	// them), bind mounts; the new container gets the same ones.
	Mounts []Mount     `json:"mounts,omitempty"`
	Ports  []Published `json:"ports,omitempty"`
	// Networks, the primary one first; or a single "host", "none" or
	// "container:<id>" network mode.
	Networks      []string            `json:"networks,omitempty"`
	Aliases       map[string][]string `json:"aliases,omitempty"` // per network, as the predecessor's were
	RestartPolicy string              `json:"restart_policy"`
	Running       bool                `json:"running"`
}

// Phase is where a cutover stands, read from the names alone.
type Phase string

const (
	PhaseAbsent    Phase = "absent"    // no container of any of the three names
	PhaseUntouched Phase = "untouched" // only <name>, not ours: before Create, or after a rollback
	PhaseCreated   Phase = "created"   // <name>.next ours; the predecessor, if any, still <name>: Swap next
	PhaseSwapping  Phase = "swapping"  // <name>.predecessor and <name>.next, no <name>: Swap or Rollback continues
	PhaseSwapped   Phase = "swapped"   // <name> ours, <name>.predecessor kept: WaitHealthy, then done or Rollback
	PhaseMigrated  Phase = "migrated"  // <name> ours, nothing else: done and pruned (or a new service)
	PhaseConflict  Phase = "conflict"  // anything else: see Reason
)

// Slot is one of the three names as Docker shows it.
type Slot struct {
	Name          string `json:"name"`
	ID            string `json:"id"`
	Image         string `json:"image"`
	Running       bool   `json:"running"`
	Ours          bool   `json:"ours"`                     // labelled adoption.module=<name>
	Module        string `json:"module,omitempty"`         // its adoption.module label, whatever it says
	PredecessorID string `json:"predecessor_id,omitempty"` // its adoption.predecessor label
}

// CutoverState is what State reads: which of the three names exist, and the
// phase they imply.
type CutoverState struct {
	Name        string `json:"name"`
	Live        *Slot  `json:"live,omitempty"`
	Next        *Slot  `json:"next,omitempty"`
	Predecessor *Slot  `json:"predecessor,omitempty"`
	Phase       Phase  `json:"phase"`
	Reason      string `json:"reason,omitempty"` // why PhaseConflict
}

// ProgressFunc hears each cutover sub-step (the Step* names) when it begins,
// and again every second while a long one (stopping a container, waiting for
// health) runs: the activity heartbeats from it, and may arm failpoints on it.
type ProgressFunc func(step string)

type progressKey struct{}

// WithProgress returns a context whose cutover steps report to fn. It rides on
// the context, as net/http/httptrace does, so the activity's Containers
// interface needs no extra method.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func (e *Engine) step(ctx context.Context, name string) error {
	if fn, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && fn != nil {
		fn(name)
	}
	if e.beforeStep != nil {
		if err := e.beforeStep(name); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// during runs fn as the sub-step step, repeating the progress call every
// second until fn returns, so that a long stop still heartbeats.
func (e *Engine) during(ctx context.Context, step string, fn func() error) error {
	if err := e.step(ctx, step); err != nil {
		return err
	}
	progress, _ := ctx.Value(progressKey{}).(ProgressFunc)
	if progress == nil {
		return fn()
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress(step)
			}
		}
	}()
	return fn()
}

func (e *Engine) ready() error {
	if e.err != nil {
		return fmt.Errorf("docker engine unavailable: %w", e.err)
	}
	return nil
}

// validName is Docker's rule for container names.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("container name %q is not valid: letters, digits, and _ . - after the first character", name)
	}
	if strings.HasSuffix(name, NextSuffix) || strings.HasSuffix(name, PredecessorSuffix) {
		return fmt.Errorf("container name %q ends in %s or %s, which the cutover reserves for its own state", name, NextSuffix, PredecessorSuffix)
	}
	return nil
}

// inspect returns the container with exactly this name, or nil. Docker
// resolves a reference to an ID prefix when no name matches, so the name
// is checked on the answer.
func (e *Engine) inspect(ctx context.Context, name string) (*container.InspectResponse, error) {
	c, err := e.cli.ContainerInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	if c.ContainerJSONBase == nil || strings.TrimPrefix(c.Name, "/") != name {
		return nil, nil
	}
	return &c, nil
}

func labels(c *container.InspectResponse) map[string]string {
	if c == nil || c.Config == nil {
		return nil
	}
	return c.Config.Labels
}

func running(c *container.InspectResponse) bool {
	return c != nil && c.State != nil && (c.State.Running || c.State.Restarting)
}

func slot(module string, c *container.InspectResponse) *Slot {
	if c == nil {
		return nil
	}
	l := labels(c)
	s := &Slot{Name: strings.TrimPrefix(c.Name, "/"), ID: c.ID, Running: running(c),
		Module: l[LabelModule], PredecessorID: l[LabelPredecessor]}
	if c.Config != nil {
		s.Image = c.Config.Image
	}
	s.Ours = s.Module == module
	return s
}

// snapshot is the three names, inspected once.
type snapshot struct {
	live, next, pred *container.InspectResponse
	state            CutoverState
}

func (e *Engine) snapshot(ctx context.Context, name string) (*snapshot, error) {
	if err := e.ready(); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	var s snapshot
	var err error
	if s.live, err = e.inspect(ctx, name); err != nil {
		return nil, err
	}
	if s.next, err = e.inspect(ctx, name+NextSuffix); err != nil {
		return nil, err
	}
	if s.pred, err = e.inspect(ctx, name+PredecessorSuffix); err != nil {
		return nil, err
	}
	s.state = CutoverState{Name: name, Live: slot(name, s.live), Next: slot(name, s.next), Predecessor: slot(name, s.pred)}
	s.state.Phase, s.state.Reason = phase(s.state)
	return &s, nil
}

func phase(st CutoverState) (Phase, string) {
	live, next, pred := st.Live, st.Next, st.Predecessor
	n := st.Name
	switch {
	case live != nil && live.Module != "" && !live.Ours:
		return PhaseConflict, fmt.Sprintf("container %s belongs to module %q", n, live.Module)
	case next != nil && !next.Ours:
		return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists and is not the mesh's: no cutover of %s created it", n, NextSuffix, short(next.ID), n)
	case live == nil && next == nil && pred == nil:
		return PhaseAbsent, ""
	}
	// Lineage: which container of ours claims <name>.predecessor?
	var claim *Slot
	if live != nil && live.Ours {
		claim = live
	} else if next != nil {
		claim = next
	}
	if pred != nil && (claim == nil || claim.PredecessorID != pred.ID) {
		if live == nil && next == nil {
			// A rollback interrupted after it removed ours can't leave
			// this (it removes ours last), but someone might: say so.
			return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists but no container of the mesh replaced it; rename it back to %s or remove it", n, PredecessorSuffix, short(pred.ID), n)
		}
		return PhaseConflict, fmt.Sprintf("container %s%s (%s) exists and is not the predecessor of the mesh's %s; rename or remove it", n, PredecessorSuffix, short(pred.ID), n)
	}
	switch {
	case live != nil && live.Ours && next != nil:
		return PhaseConflict, fmt.Sprintf("both %s and %s%s are the mesh's", n, n, NextSuffix)
	case live != nil && live.Ours && pred != nil:
		return PhaseSwapped, ""
	case live != nil && live.Ours:
		return PhaseMigrated, ""
	case next != nil && pred != nil && live == nil:
		return PhaseSwapping, ""
	case next != nil && pred != nil:
		return PhaseConflict, fmt.Sprintf("container %s (%s) exists beside %s%s and %s%s", n, short(live.ID), n, NextSuffix, n, PredecessorSuffix)
	case next != nil:
		return PhaseCreated, ""
	default:
		return PhaseUntouched, ""
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// State reads which of <name>, <name>.next and <name>.predecessor exist,
// running or not, ours or not, and the phase a resumed cutover is at. It
// changes nothing.
func (e *Engine) State(ctx context.Context, name string) (CutoverState, error) {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return CutoverState{}, err
	}
	return s.state, nil
}

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
//     (ErrPortHeld).
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
	if err := e.checkPorts(ctx, spec, ports, pred); err != nil {
		return nil, err
	}
	return pred, nil
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
		mm := Mount{Type: string(m.Type), Name: m.Name, Source: m.Source, Destination: m.Destination,
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
			p.Ports = append(p.Ports, Published{HostIP: b.HostIP, HostPort: uint16(hp), ContainerPort: uint16(port.Int()), Proto: port.Proto()})
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
func (e *Engine) checkPorts(ctx context.Context, spec Spec, ports []binding, pred *Predecessor) error {
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
		if pred != nil {
			for _, p := range pred.Ports {
				if p.HostPort == b.hostPort && p.Proto == proto {
					predHolds = true
				}
			}
		}
		for _, c := range list {
			if (pred != nil && c.ID == pred.ID) || c.Labels[LabelModule] == spec.Name {
				continue
			}
			for _, p := range c.Ports {
				if p.PublicPort == b.hostPort && p.Type == proto {
					name := c.ID
					if len(c.Names) > 0 {
						name = strings.TrimPrefix(c.Names[0], "/")
					}
					return fmt.Errorf("cutover of %s refused: host port %d/%s is published by container %s (%s, image %s), which is not the predecessor it replaces; free the port or change the module's ports: %w",
						spec.Name, b.hostPort, proto, name, short(c.ID), c.Image, ErrPortHeld)
				}
			}
		}
		if predHolds || e.portFree == nil {
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
		if err := e.cli.ContainerRemove(ctx, s.next.ID, container.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove stale %s: %w", nextName, err)
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

func stopOptions(d time.Duration) container.StopOptions {
	secs := int((d + time.Second - 1) / time.Second)
	return container.StopOptions{Timeout: &secs}
}

// Swap puts <name>.next in the place of <name>: it arms <name>.next with the
// restart policy recorded at Create, sets the predecessor's to "no" (so a
// reboot cannot start it beside its successor), stops the predecessor
// gracefully (SIGTERM, then SIGKILL after stopTimeout), renames it
// <name>.predecessor, renames <name>.next to <name>, and starts it. With no
// predecessor (a new service) only the arming, the rename and the start
// happen.
//
// On resume each sub-step is skipped when Docker shows it done: a stopped
// predecessor is not stopped again, a rename already made is not redone, a
// running <name> of ours is not restarted. Swap refuses a <name> that is not
// the predecessor <name>.next was created for.
func (e *Engine) Swap(ctx context.Context, name string, stopTimeout time.Duration) error {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return err
	}
	st := s.state
	nextName, predName := name+NextSuffix, name+PredecessorSuffix
	switch st.Phase {
	case PhaseConflict:
		return fmt.Errorf("swap %s refused: %s: %w", name, st.Reason, ErrConflict)
	case PhaseAbsent, PhaseUntouched:
		return fmt.Errorf("swap %s: there is no %s of the mesh's to swap in; run Create first", name, nextName)
	case PhaseCreated:
		predID := st.Next.PredecessorID
		if s.live != nil && s.live.ID != predID {
			return fmt.Errorf("swap %s refused: container %s (%s) is not the predecessor %s was created for (%s); run Preflight and Create again: %w",
				name, name, short(s.live.ID), nextName, short(predID), ErrConflict)
		}
		if s.live == nil && predID != "" {
			return fmt.Errorf("swap %s refused: the predecessor %s was created for (%s) is gone; run Preflight and Create again: %w", name, nextName, short(predID), ErrConflict)
		}
	}
	// Ours, wherever it is now.
	ours := s.next
	if st.Live != nil && st.Live.Ours {
		ours = s.live
	}
	if err := e.arm(ctx, ours); err != nil {
		return err
	}
	switch st.Phase {
	case PhaseCreated:
		if s.live != nil {
			if err := e.retire(ctx, s.live, stopTimeout); err != nil {
				return err
			}
			if err := e.step(ctx, StepRenamePredecessor); err != nil {
				return err
			}
			if err := e.cli.ContainerRename(ctx, s.live.ID, predName); err != nil {
				return fmt.Errorf("rename predecessor %s to %s: %w", name, predName, err)
			}
		}
		fallthrough
	case PhaseSwapping:
		if s.pred != nil && running(s.pred) {
			// Someone started it while it was renamed; it must not hold the ports.
			if err := e.retire(ctx, s.pred, stopTimeout); err != nil {
				return err
			}
		}
		if err := e.step(ctx, StepRenameNext); err != nil {
			return err
		}
		if err := e.cli.ContainerRename(ctx, s.next.ID, name); err != nil {
			return fmt.Errorf("rename %s to %s: %w", nextName, name, err)
		}
	case PhaseSwapped, PhaseMigrated:
		if s.pred != nil && running(s.pred) {
			if err := e.retire(ctx, s.pred, stopTimeout); err != nil {
				return err
			}
		}
	}
	if !running(ours) {
		if err := e.step(ctx, StepStart); err != nil {
			return err
		}
		if err := e.cli.ContainerStart(ctx, ours.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("start %s (image %s): %w", name, ours.Config.Image, err)
		}
	}
	return nil
}

// arm gives the mesh's container the restart policy recorded at Create.
// Swap does it first, while the predecessor still serves: the update stays
// out of the window in which the service does not answer, and the container
// is armed only for the moments before it is started. (Created armed, an
// engine older than Docker 25 would start it on a daemon restart, beside its
// predecessor.)
func (e *Engine) arm(ctx context.Context, c *container.InspectResponse) error {
	name := strings.TrimPrefix(c.Name, "/")
	want, err := parseRestart(labels(c)[LabelRestart])
	if err != nil {
		return fmt.Errorf("container %s: label %s: %w", name, LabelRestart, err)
	}
	if c.HostConfig != nil && c.HostConfig.RestartPolicy == want {
		return nil
	}
	if err := e.step(ctx, StepArmRestart); err != nil {
		return err
	}
	if err := e.setRestart(ctx, c.ID, want); err != nil {
		return fmt.Errorf("set restart policy of %s to %s: %w", name, formatRestart(want), err)
	}
	return nil
}

// setRestart sets a container's restart policy. Docker refuses the update
// when the container exits while it is applied ("cannot update a stopped
// container") and until it has recorded the exit; a stopped container takes
// it, so it is tried again once Docker shows the container stopped.
func (e *Engine) setRestart(ctx context.Context, id string, r container.RestartPolicy) error {
	_, err := e.cli.ContainerUpdate(ctx, id, container.UpdateConfig{RestartPolicy: r})
	for i := 0; err != nil && i < 20; i++ {
		c, ierr := e.cli.ContainerInspect(ctx, id)
		if ierr != nil {
			break
		}
		if !running(&c) {
			_, err = e.cli.ContainerUpdate(ctx, id, container.UpdateConfig{RestartPolicy: r})
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// retire disarms the predecessor's restart policy and stops it. Disarming
// first, while it still runs, keeps the update out of the window in which
// the service does not answer.
func (e *Engine) retire(ctx context.Context, c *container.InspectResponse, stopTimeout time.Duration) error {
	name := strings.TrimPrefix(c.Name, "/")
	if c.HostConfig != nil && c.HostConfig.RestartPolicy.Name != container.RestartPolicyDisabled && c.HostConfig.RestartPolicy.Name != "" {
		if err := e.step(ctx, StepDisarmPredecessor); err != nil {
			return err
		}
		if err := e.setRestart(ctx, c.ID, container.RestartPolicy{Name: container.RestartPolicyDisabled}); err != nil {
			return fmt.Errorf("set restart policy of predecessor %s to no: %w", name, err)
		}
	}
	if running(c) {
		if err := e.during(ctx, StepStopPredecessor, func() error {
			return e.cli.ContainerStop(ctx, c.ID, stopOptions(stopTimeout))
		}); err != nil {
			return fmt.Errorf("stop predecessor %s: %w", name, err)
		}
	}
	return nil
}

// Rollback puts the predecessor back: it stops the new container and renames
// it <name>.next, renames <name>.predecessor back to <name> with its restart
// policy restored, starts it if it ran when the cutover began, and removes
// the new container (never its volumes: they are the predecessor's). The
// steps run in that order so that the new container, which carries the
// lineage and the predecessor's restart policy in its labels, goes last: an
// interrupted rollback called again finds everything it needs. With nothing
// of the mesh's under the three names, Rollback does nothing.
//
// A new service (no predecessor) is rolled back by removing it. Rollback
// refuses when the mesh's container replaced a predecessor that is gone
// (pruned): there is nothing to roll back to (ErrNoRollback).
func (e *Engine) Rollback(ctx context.Context, name string) error {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return err
	}
	st := s.state
	nextName, predName := name+NextSuffix, name+PredecessorSuffix
	switch st.Phase {
	case PhaseConflict:
		return fmt.Errorf("rollback %s refused: %s: %w", name, st.Reason, ErrConflict)
	case PhaseAbsent, PhaseUntouched:
		return nil
	case PhaseMigrated:
		if st.Live.PredecessorID != "" {
			return fmt.Errorf("rollback %s refused: its predecessor %s is gone (pruned?); the mesh's container stays: %w", name, short(st.Live.PredecessorID), ErrNoRollback)
		}
	}
	// The new container: <name> (swapped) or <name>.next.
	nc := s.next
	if st.Live != nil && st.Live.Ours {
		nc = s.live
		if err := e.during(ctx, StepStopNew, func() error {
			return e.cli.ContainerStop(ctx, nc.ID, stopOptions(defaultRollbackStopWait))
		}); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
		if err := e.step(ctx, StepRenameNew); err != nil {
			return err
		}
		if err := e.cli.ContainerRename(ctx, nc.ID, nextName); err != nil {
			return fmt.Errorf("rename %s to %s: %w", name, nextName, err)
		}
		s.live = nil
	}
	l := labels(nc)
	// The predecessor: renamed (s.pred), or still <name> when the swap
	// stopped before renaming it.
	pc := s.pred
	if pc == nil && s.live != nil && s.live.ID == l[LabelPredecessor] {
		pc = s.live
	}
	if pc != nil {
		r, rerr := parseRestart(l[LabelPredecessorRestart])
		restore := rerr == nil && pc.HostConfig != nil && pc.HostConfig.RestartPolicy != r
		if restore || s.pred != nil {
			if err := e.step(ctx, StepRestorePredecessor); err != nil {
				return err
			}
		}
		if restore {
			if err := e.setRestart(ctx, pc.ID, r); err != nil {
				return fmt.Errorf("restore restart policy of predecessor %s to %s: %w", strings.TrimPrefix(pc.Name, "/"), formatRestart(r), err)
			}
		}
		if s.pred != nil {
			if err := e.cli.ContainerRename(ctx, s.pred.ID, name); err != nil {
				return fmt.Errorf("rename %s back to %s: %w", predName, name, err)
			}
			s.live = s.pred
		}
	}
	if s.live != nil && s.live.ID == l[LabelPredecessor] && !running(s.live) && l[LabelPredecessorRunning] != "false" {
		if err := e.step(ctx, StepStartPredecessor); err != nil {
			return err
		}
		if err := e.cli.ContainerStart(ctx, s.live.ID, container.StartOptions{}); err != nil {
			return fmt.Errorf("start predecessor %s: %w", name, err)
		}
	}
	if err := e.step(ctx, StepRemoveNew); err != nil {
		return err
	}
	// Force: an interrupted rollback may have left it running under .next.
	if err := e.cli.ContainerRemove(ctx, nc.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove %s: %w", nextName, err)
	}
	return nil
}

// Prune removes <name>.predecessor once the cutover is kept, and only when
// <name> is the mesh's container that replaced it and it is stopped. The
// volumes stay (RemoveVolumes is never set): its anonymous volumes are the
// new container's now. Pruning what is already gone does nothing.
func (e *Engine) Prune(ctx context.Context, name string) error {
	s, err := e.snapshot(ctx, name)
	if err != nil {
		return err
	}
	st := s.state
	if s.pred == nil {
		return nil
	}
	if st.Phase != PhaseSwapped {
		reason := st.Reason
		if reason == "" {
			reason = fmt.Sprintf("the cutover is at %s, not done", st.Phase)
		}
		return fmt.Errorf("prune %s%s refused: %s: %w", name, PredecessorSuffix, reason, ErrConflict)
	}
	if running(s.pred) {
		return fmt.Errorf("prune %s%s refused: it is running; stop it first: %w", name, PredecessorSuffix, ErrConflict)
	}
	if err := e.step(ctx, StepRemovePredecessor); err != nil {
		return err
	}
	if err := e.cli.ContainerRemove(ctx, s.pred.ID, container.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove %s%s: %w", name, PredecessorSuffix, err)
	}
	return nil
}
