package cutover

// Rollback and prune: the predecessor back, or gone for good.

import (
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
)

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
	}
	refs, err := replacedOf(nc)
	if err != nil {
		return err
	}
	others, err := e.replacedNow(ctx, refs)
	if err != nil {
		return err
	}
	for i, c := range others {
		if c == nil {
			return fmt.Errorf("rollback %s refused: the predecessor %s (%s) it replaced is gone (pruned?); the mesh's container stays: %w", name, refs[i].Name, short(refs[i].ID), ErrNoRollback)
		}
	}
	unit, err := unitOf(nc)
	if err != nil {
		return err
	}
	if unit != nil && e.units == nil {
		return fmt.Errorf("rollback %s: it took over unit %s and this agent has no service manager: %w", name, unit.Name, ErrBadSpec)
	}
	if labels(nc)[LabelCutover] == CutoverOverlap {
		if done, err := e.rollbackOverlap(ctx, name, s, nc); done || err != nil {
			return err
		}
	}
	// The swap back holds the ports too: the container that will answer
	// again is the predecessor (or the first one of another name).
	var held []heldPort
	back := s.pred
	if back == nil && s.live != nil && s.live.ID == labels(nc)[LabelPredecessor] {
		back = s.live
	}
	if back == nil {
		for _, c := range others {
			back = c
			break
		}
	}
	if back != nil && running(nc) {
		if held, err = e.holdPorts(ctx, name, back, []*container.InspectResponse{nc}, defaultRollbackStopWait); err != nil {
			return err
		}
	}
	// A unit that ran takes the ports back: every one of them held while
	// the mesh's container stops and the unit starts.
	unitBack := back == nil && unit != nil && unit.Active
	switch {
	case unitBack && running(nc):
		if held, err = e.holdAll(ctx, name, nc, defaultRollbackStopWait); err != nil {
			return err
		}
	case unitBack:
		// A container that exited at its start left the swap's hold on
		// every port it publishes (startHolding): those are the ports to
		// see back before the release.
		held = publishedAll(nc)
	}
	if nc == s.live {
		if err := e.setAside(ctx, move{c: nc, what: "the mesh's container", stop: true, stopStep: StepStopNew, wait: defaultRollbackStopWait,
			to: nextName, renameStep: StepRenameNew}); err != nil {
			return err
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
	// The window: the mesh's container stopped, the predecessor not (yet)
	// running again.
	if !(s.live != nil && s.live.ID == l[LabelPredecessor] && running(s.live)) {
		if err := e.inWindow(ctx, StepRollbackWindow); err != nil {
			return err
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
	if err := e.restoreReplaced(ctx, refs); err != nil {
		return err
	}
	if err := e.restoreUnit(ctx, unit); err != nil {
		return err
	}
	// Released once the predecessor answers; a hold left by an interrupted
	// swap goes too.
	answerer := ""
	if back != nil {
		answerer = back.ID
	}
	if unitBack {
		if err := e.releaseWhenNodeAnswers(ctx, name, held); err != nil {
			return err
		}
	} else if err := e.releaseWhenAnswering(ctx, name, held, answerer); err != nil {
		return err
	}
	// Force: an interrupted rollback may have left it running under .next.
	return e.remove(ctx, StepRemoveNew, nc, true)
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
	if st.Live != nil && st.Live.Ours && (st.Phase == PhaseSwapped || st.Phase == PhaseMigrated) {
		refs, err := replacedOf(s.live)
		if err != nil {
			return err
		}
		if err := e.pruneReplaced(ctx, refs); err != nil {
			return err
		}
	}
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
	return e.remove(ctx, StepRemovePredecessor, s.pred, false)
}
