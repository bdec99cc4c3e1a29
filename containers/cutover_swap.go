package containers

// Swap: the predecessor stopped and set aside, the new container started.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
)

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
			if err := e.retire(ctx, s.live, stopTimeout, predName); err != nil {
				return err
			}
		}
		fallthrough
	case PhaseSwapping:
		if s.pred != nil && running(s.pred) {
			// Someone started it while it was renamed; it must not hold the ports.
			if err := e.retire(ctx, s.pred, stopTimeout, ""); err != nil {
				return err
			}
		}
		if err := e.setAside(ctx, move{c: s.next, what: "the mesh's container", to: name, renameStep: StepRenameNext}); err != nil {
			return err
		}
	case PhaseSwapped, PhaseMigrated:
		if s.pred != nil && running(s.pred) {
			if err := e.retire(ctx, s.pred, stopTimeout, ""); err != nil {
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

// retire disarms the predecessor's restart policy, stops it and, when to is
// set, renames it so. Disarming first, while it still runs, keeps the update
// out of the window in which the service does not answer.
func (e *Engine) retire(ctx context.Context, c *container.InspectResponse, stopTimeout time.Duration, to string) error {
	name := strings.TrimPrefix(c.Name, "/")
	if c.HostConfig != nil && c.HostConfig.RestartPolicy.Name != container.RestartPolicyDisabled && c.HostConfig.RestartPolicy.Name != "" {
		if err := e.step(ctx, StepDisarmPredecessor); err != nil {
			return err
		}
		if err := e.setRestart(ctx, c.ID, container.RestartPolicy{Name: container.RestartPolicyDisabled}); err != nil {
			return fmt.Errorf("set restart policy of predecessor %s to no: %w", name, err)
		}
	}
	return e.setAside(ctx, move{c: c, what: "predecessor", stop: true, stopStep: StepStopPredecessor, wait: stopTimeout,
		to: to, renameStep: StepRenamePredecessor})
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
