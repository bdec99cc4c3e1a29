// The rehearsal of a module's cutover (adopt migrate NODE MODULE --dry-run):
// every check the cutover makes before it changes anything, run on the node,
// and every step it would then take, in order, with what each would touch.
// It only reads: the ruleset, the declared files, state_dir and the
// containers are as they were, and the module's state does not move. Like
// every activity result it reaches the history, so it names things (paths,
// keys, containers, ports) and never a value.
package activities

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/containers/cutover"
	"adoption/firewall/marks"
)

// Rehearsal is nodewire.Rehearsal.
type Rehearsal = nodewire.Rehearsal

// RehearsalStep is nodewire.RehearsalStep.
type RehearsalStep = nodewire.RehearsalStep

// PortHolder is nodewire.PortHolder.
type PortHolder = nodewire.PortHolder

// Rehearse runs the cutover's checks and lists its steps, changing nothing.
func (a *Activities) Rehearse(ctx context.Context, in ModuleInput) (*Rehearsal, error) {
	auth, m, err := a.module(ctx, in.Plan, in.Module)
	if err != nil {
		return nil, err
	}
	r := &Rehearsal{Node: auth.Plan.Node, Module: m.Name}
	refuse := func(err error) {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) {
			r.Refusals = append(r.Refusals, ae.Message())
			return
		}
		r.Refusals = append(r.Refusals, err.Error())
	}

	// Preflight: the files' content, the conflicts, the ports, the
	// predecessor, exactly as the cutover checks them.
	pre := RehearsalStep{Name: "preflight", Touches: []string{"nothing: checks only"}}
	for _, f := range m.Files {
		if _, ok := auth.Contents[f.SHA256]; !ok {
			refuse(fmt.Errorf("file %s: the node's configuration has no content with sha256 %.12s", f.Path, f.SHA256))
		}
	}
	merges, err := a.conflictsOf(auth, m, in.Decisions)
	if err != nil {
		refuse(err)
	}
	r.Files = merges
	if ls, lerr := a.Sockets.Listeners(); lerr == nil {
		ls = attributePublished(ls, a.Engine.Report(ctx))
		for _, p := range m.Ports {
			for _, l := range ls {
				if l.Port == p.Num && l.Proto == p.Proto {
					r.Holders = append(r.Holders, PortHolder{Port: p.String(), Holder: l.Holder()})
				}
			}
		}
	} else {
		refuse(fmt.Errorf("list listening sockets: %w", lerr))
	}
	if err := a.portsHeldOnlyBy(ctx, m); err != nil {
		refuse(err)
	}
	if m.Container != nil {
		sp, serr := a.spec(auth, m, in.Decisions)
		if serr != nil {
			refuse(serr)
		}
		pred, err := a.Cutover.Preflight(ctx, sp)
		switch {
		case serr != nil:
		case a.valueConflicts(m, err) != nil:
			refuse(a.valueConflicts(m, err))
		case err != nil:
			refuse(fmt.Errorf("preflight of container %s: %s", m.Container.Name, a.withheld(ctx, "rehearsal "+m.Name, err)))
		default:
			r.Predecessor = pred
		}
	}
	r.Steps = append(r.Steps, pre)

	// Open ports: marked accepts through the found firewall.
	open := RehearsalStep{Name: "open ports"}
	for _, p := range m.Ports {
		mk := marks.Mark{Node: auth.Plan.Node, Owner: m.Name, Port: p.Num, Proto: p.Proto}
		r.Marks = append(r.Marks, mk.Comment())
		open.Touches = append(open.Touches, "marked accept "+mk.Comment()+" (ip and ip6), after the found firewall's source denies")
	}
	if len(open.Touches) == 0 {
		open.Touches = []string{"nothing: the module declares no port"}
	}
	r.Steps = append(r.Steps, open)

	if m.Container != nil {
		c := m.Container
		create := RehearsalStep{Name: "create container", Touches: []string{fmt.Sprintf("container %s.next from image %s, not started", c.Name, c.Image)}}
		if p := r.Predecessor; p != nil {
			for _, mt := range p.Mounts {
				src := mt.Source
				if mt.Type == "volume" && mt.Name != "" {
					src = "volume " + mt.Name
				}
				create.Touches = append(create.Touches, fmt.Sprintf("mount %s %s at %s (carried over, data in place)", mt.Type, src, mt.Destination))
			}
			for _, pp := range p.Ports {
				create.Touches = append(create.Touches, fmt.Sprintf("published port %v (the predecessor's)", pp))
			}
			if len(p.Networks) > 0 {
				create.Touches = append(create.Touches, "networks "+strings.Join(p.Networks, ", "))
			}
			if p.RestartPolicy != "" {
				create.Touches = append(create.Touches, "restart policy "+p.RestartPolicy)
			}
			if len(p.Env) > 0 {
				create.Touches = append(create.Touches, "environment carried over (names only): "+strings.Join(p.Env, ", "))
			}
			if len(p.Labels) > 0 {
				create.Touches = append(create.Touches, "labels carried over: "+strings.Join(p.Labels, ", "))
			}
			for _, o := range p.Replaces {
				create.Touches = append(create.Touches, fmt.Sprintf("replaces %s (%.12s): stopped at the swap and kept as %s.predecessor", o.Name, o.ID, o.Name))
			}
		} else {
			create.Touches = append(create.Touches, "no predecessor: a new service")
		}
		var set []string
		for _, kv := range c.Labels {
			k, _, _ := strings.Cut(kv, "=")
			set = append(set, "label "+k)
		}
		for name := range c.EnvSHA256 {
			set = append(set, "env "+name)
		}
		if c.EnvFile != "" {
			set = append(set, "env_file "+c.EnvFile)
		}
		for _, d := range c.DropPorts {
			set = append(set, "drops port "+d)
		}
		if len(set) > 0 {
			sort.Strings(set)
			create.Touches = append(create.Touches, "the module sets: "+strings.Join(set, ", "))
		}
		r.Steps = append(r.Steps, create)
	}
	conv := RehearsalStep{Name: "converge files"}
	for _, f := range r.Files {
		conv.Touches = append(conv.Touches, f.Text())
	}
	switch {
	case m.Container == nil && len(m.Files) > 0:
		r.Steps = append(r.Steps, conv)
	case m.Container != nil:
		r.Steps = append(r.Steps, swapSteps(m, r.Predecessor, conv)...)
	}
	health := RehearsalStep{Name: "wait healthy"}
	switch {
	case m.Health != nil && m.Health.HTTP != "":
		health.Touches = []string{"GET " + m.Health.HTTP}
	case m.Health != nil && m.Health.TCP != "":
		health.Touches = []string{"TCP connect to " + m.Health.TCP}
	default:
		for _, p := range m.Ports {
			health.Touches = append(health.Touches, "connect to "+p.String()+" on the node")
		}
	}
	r.Steps = append(r.Steps, health)
	return r, nil
}

// swapSteps are a container module's swap, in the order it takes them:
// the predecessor stops, the module's files converge while neither runs,
// the new container starts (an overlap: the files converge before the new
// container starts beside its predecessor, which still runs then).
func swapSteps(m config.ModulePlan, pred *cutover.Predecessor, conv RehearsalStep) []RehearsalStep {
	c := m.Container
	var steps []RehearsalStep
	if m.Cutover == config.CutoverOverlap {
		if len(conv.Touches) > 0 {
			conv.Name = "converge files (overlap: before the new container starts beside the predecessor, which still runs)"
			steps = append(steps, conv)
		}
		return append(steps, RehearsalStep{Name: "overlap: start beside, move the ports, stop the predecessor", Touches: []string{
			fmt.Sprintf("start %s.next beside %s, move the module's host ports to it, drain and stop %s, keep it as %s.predecessor", c.Name, c.Name, c.Name, c.Name)}})
	}
	stop := RehearsalStep{Name: "swap: stop the predecessor"}
	if pred != nil {
		stop.Touches = append(stop.Touches, fmt.Sprintf("rename %s to %s.predecessor (kept for rollback), hold new connections to its published ports, stop it", pred.Name, c.Name))
	}
	if m.HostPredecessor() != "" {
		stop.Touches = append(stop.Touches, fmt.Sprintf("hold new connections and datagrams to every port %s publishes, stop unit %s (its file kept in custody; disabled only once the cutover is confirmed, started and enabled again by a rollback)", c.Name, m.HostPredecessor()))
	}
	if len(stop.Touches) == 0 {
		stop.Touches = append(stop.Touches, "no predecessor: nothing stops")
	}
	steps = append(steps, stop)
	if len(conv.Touches) > 0 {
		conv.Name = "swap: converge files (neither the predecessor nor the new container runs)"
		steps = append(steps, conv)
	}
	return append(steps, RehearsalStep{Name: "swap: start the new container", Touches: []string{
		fmt.Sprintf("rename %s.next to %s and start it; the held connections go to it once it answers", c.Name, c.Name)}})
}
