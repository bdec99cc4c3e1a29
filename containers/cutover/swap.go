package cutover

// Swap: the predecessor stopped and set aside, the new container started.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Swap puts <name>.next in the place of <name> and of the predecessors of
// other names it replaces. While every predecessor still serves, it arms
// <name>.next with the restart policy recorded at Create, sets each
// predecessor's to "no" (so a reboot cannot start it beside its successor),
// and renames: each predecessor to <its name>.predecessor, <name>.next to
// <name>. Then it holds new connections to the ports the predecessors
// publish (see PortHold). Only then are the predecessors stopped, all at once
// (SIGTERM, then SIGKILL after stopTimeout), and the new container started:
// the window in which nothing listens is a stop and a start, no rename and no
// update in it (only what the caller runs in it, WithWindow). Once the new container answers on the held ports (its own
// socket, at its address; or holdMax passed) the hold is released. With no
// predecessor (a new service) only the arming, the rename and the start
// happen.
//
// On resume each sub-step is skipped when Docker shows it done: a stopped
// predecessor is not stopped again, a rename already made is not redone, a
// running <name> of ours is not restarted; the hold is taken again and
// released. Swap refuses a <name> that is not the predecessor <name>.next
// was created for.
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
	if st.Phase == PhaseCreated && labels(ours)[LabelCutover] == CutoverOverlap {
		// Created for an overlap: started beside the predecessor instead.
		spec := Spec{Name: name, Cutover: CutoverOverlap}
		if err := json.Unmarshal([]byte(labels(ours)[LabelOverlapPorts]), &spec.Ports); err != nil {
			return fmt.Errorf("container %s%s: label %s: %w", name, NextSuffix, LabelOverlapPorts, err)
		}
		return e.Overlap(ctx, spec, stopTimeout)
	}
	refs, err := replacedOf(ours)
	if err != nil {
		return err
	}
	others, err := e.replacedNow(ctx, refs)
	if err != nil {
		return err
	}
	unit, err := unitOf(ours)
	if err != nil {
		return err
	}
	if unit != nil && e.units == nil {
		return fmt.Errorf("swap %s: it takes over unit %s and this agent has no service manager: %w", name, unit.Name, ErrBadSpec)
	}
	if err := e.arm(ctx, ours); err != nil {
		return err
	}
	// Every predecessor, with the name it goes to.
	type aside struct {
		c  *container.InspectResponse
		to string
	}
	var preds []aside
	switch {
	case st.Phase == PhaseCreated && s.live != nil:
		preds = append(preds, aside{s.live, predName})
	case s.pred != nil:
		preds = append(preds, aside{s.pred, predName})
	}
	for i, c := range others {
		if c != nil {
			preds = append(preds, aside{c, refs[i].Name + PredecessorSuffix})
		}
	}
	for _, p := range preds {
		if err := e.disarm(ctx, p.c); err != nil {
			return err
		}
	}
	for _, p := range preds {
		if err := e.setAside(ctx, move{c: p.c, what: "predecessor", to: p.to, renameStep: StepRenamePredecessor}); err != nil {
			return err
		}
	}
	if strings.TrimPrefix(ours.Name, "/") != name {
		if err := e.setAside(ctx, move{c: ours, what: "the mesh's container", to: name, renameStep: StepRenameNext}); err != nil {
			return err
		}
	}
	// Held from here, after the renames (the predecessors still serve
	// through them): new SYNs wait only for the window itself. A unit's
	// hand-over holds every port of ours, datagrams too.
	holdFor := e.holdPorts
	if unit != nil && unit.Active {
		holdFor = func(ctx context.Context, owner string, ours *container.InspectResponse, _ []*container.InspectResponse, stopWait time.Duration) ([]heldPort, error) {
			return e.holdAll(ctx, owner, ours, stopWait)
		}
	}
	held, err := holdFor(ctx, name, ours, func() []*container.InspectResponse {
		var cs []*container.InspectResponse
		for _, p := range preds {
			if running(p.c) {
				cs = append(cs, p.c)
			}
		}
		return cs
	}(), stopTimeout)
	if err != nil {
		return err
	}
	// The window: stop every predecessor at once, start ours.
	var toStop []*container.InspectResponse
	for _, p := range preds {
		if running(p.c) {
			toStop = append(toStop, p.c)
		}
	}
	if len(toStop) > 0 {
		errs := make(chan error, len(toStop))
		if err := e.during(ctx, StepStopPredecessor, func() error {
			for _, c := range toStop {
				go func(c *container.InspectResponse) {
					if err := e.cli.ContainerStop(ctx, c.ID, stopOptions(stopTimeout)); err != nil {
						errs <- fmt.Errorf("stop predecessor %s: %w", strings.TrimPrefix(c.Name, "/"), err)
						return
					}
					errs <- nil
				}(c)
			}
			var first error
			for range toStop {
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			return first
		}); err != nil {
			return err
		}
	}
	if running(ours) {
		return e.releaseWhenAnswering(ctx, name, held, ours.ID)
	}
	if err := e.stopUnit(ctx, unit, held); err != nil {
		return err
	}
	if err := e.inWindow(ctx, StepWindow); err != nil {
		return err
	}
	if err := e.step(ctx, StepStart); err != nil {
		return err
	}
	if unit != nil && unit.Active && len(held) > 0 {
		return e.startHolding(ctx, name, held, ours)
	}
	// Released the moment ours answers, which may be before Docker
	// returns from the start.
	wait := e.releaseOnAnswer(ctx, name, held, ours)
	if err := e.cli.ContainerStart(ctx, ours.ID, container.StartOptions{}); err != nil {
		_ = wait(err)
		return fmt.Errorf("start %s (image %s): %w", name, ours.Config.Image, err)
	}
	return wait(nil)
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

// disarm sets a predecessor's restart policy to "no", while it still runs:
// the update stays out of the window in which the service does not answer,
// and a reboot cannot start it beside its successor.
func (e *Engine) disarm(ctx context.Context, c *container.InspectResponse) error {
	if c.HostConfig == nil || c.HostConfig.RestartPolicy.Name == container.RestartPolicyDisabled || c.HostConfig.RestartPolicy.Name == "" {
		return nil
	}
	if err := e.step(ctx, StepDisarmPredecessor); err != nil {
		return err
	}
	if err := e.setRestart(ctx, c.ID, container.RestartPolicy{Name: container.RestartPolicyDisabled}); err != nil {
		return fmt.Errorf("set restart policy of predecessor %s to no: %w", strings.TrimPrefix(c.Name, "/"), err)
	}
	return nil
}
