package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/containers/cutover"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// ConfirmInput is nodewire.ConfirmInput.
type ConfirmInput = nodewire.ConfirmInput

// confirm is the flip in one round trip's confirmation of flip id, once
// both proofs hold: the node still serves every declared port that has a
// health check, then, under the flip lock (so a confirmation and the
// watchdog's revert never both win), the deadline and the kernel's state:
// the flip in force as it was applied (the mesh's table with the approved
// fingerprint, the neutralising rules, the found firewall's own rules
// unchanged). Confirming stands the watchdog down. A flip not in force (a
// reboot inside the confirm window put the predecessor back) is reverted
// at once and reported reverted, with the reason: never confirmed.
func (a *Activities) confirm(ctx context.Context, auth *authority.Authority, id string) (*FlipResult, error) {
	heartbeat(ctx, "confirm")
	for _, m := range auth.Plan.Modules {
		if m.Health == nil {
			continue
		}
		heartbeat(ctx, "confirm: "+m.Name+"'s health check")
		probe := cutover.TCPProbe(m.Health.TCP)
		if m.Health.HTTP != "" {
			probe = cutover.HTTPProbe(m.Health.HTTP)
		}
		if err := probe(ctx); err != nil {
			return nil, fmt.Errorf("module %s does not answer its health check after the flip: %w", m.Name, err)
		}
	}
	var res *FlipResult
	var notInForce error
	err := a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id {
			return nil, temporal.NewNonRetryableApplicationError("no flip "+id+" recorded on this node: nothing to confirm", ErrFlipNotApplied, nil)
		}
		switch cur.State {
		case nodestate.FlipReverted:
			return nil, temporal.NewNonRetryableApplicationError("flip reverted: "+cur.Reason, ErrFlipReverted, nil)
		case nodestate.FlipNotApplied:
			return nil, temporal.NewNonRetryableApplicationError("flip "+id+" was not applied: "+cur.Reason, ErrFlipNotApplied, nil)
		case nodestate.FlipConfirmed, nodestate.FlipCommitted:
			res = &FlipResult{ID: cur.ID, State: cur.State, Deadline: cur.Deadline}
			return nil, nil
		case nodestate.FlipApplying:
			return nil, fmt.Errorf("flip %s is still applying on this node (its outcome is not recorded yet): not confirming it", id)
		}
		if now := time.Now(); !now.Before(cur.Deadline) {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip %s's deadline %s has passed (now %s): not confirming it; the watchdog reverts it", id, cur.Deadline.Format(time.RFC3339), now.UTC().Format(time.RFC3339)), ErrFlipDeadline, nil)
		}
		heartbeat(ctx, "confirm: the flip is in force")
		if nf, err := a.flipInForce(cur); err != nil {
			return nil, err
		} else if nf != nil {
			// Reverted under the same lock, so the watchdog finds it done.
			if err := RevertRecord(cur, a.Flipper, a.Files); err != nil {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("not confirming flip %s: %v; reverting it failed too (%v): the watchdog reverts it at the deadline", id, nf, err), ErrFlipNotInForce, nil)
			}
			notInForce = nf
			cur.State, cur.Reason = nodestate.FlipReverted, "not confirmed: "+nf.Error()
			return cur, nil
		}
		cur.State = nodestate.FlipConfirmed
		res = &FlipResult{ID: cur.ID, State: cur.State, Deadline: cur.Deadline}
		return cur, nil
	})
	if err == nil && notInForce != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("flip reverted: not confirming flip %s: %v; the node is back on its found firewall: run the preview and the flip again", id, notInForce), ErrFlipReverted, nil)
	}
	return res, err
}

// flipInForce asks the kernel whether rec's flip is in force as applied:
// nil when it is, the reason (wrapping flip.ErrNotInForce) when it is not.
// An error that is not an answer (the ruleset could not be listed) is the
// second result.
func (a *Activities) flipInForce(rec *nodestate.FlipRecord) (error, error) {
	plan := flip.RevertPlanFor(rec.Node)
	if len(rec.Revert) > 0 {
		if err := json.Unmarshal(rec.Revert, plan); err != nil {
			return nil, fmt.Errorf("flip %s: revert plan unreadable: %w", rec.ID, err)
		}
	}
	err := a.Flipper.InForce(plan, rec.Derived)
	if err == nil || errors.Is(err, flip.ErrNotInForce) {
		return err, nil
	}
	return nil, fmt.Errorf("check that flip %s is in force: %w", rec.ID, err)
}

// RevertFlip puts the firewall and the node files back as they were just
// before the flip. Idempotent: a flip the watchdog already reverted is left
// and reported reverted. Its answer is definite: reverted (or not applied)
// on the node, or ErrFlipConfirmed when the flip is confirmed and stays.
func (a *Activities) RevertFlip(ctx context.Context, in ConfirmInput) (*FlipResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkUndo(ctx, auth, in.Intent, authority.FlipIntent(auth.Plan, false))
	if err != nil {
		return nil, err
	}
	if err := authority.CheckFlipID(a.Node, in.ID); err != nil {
		return nil, err
	}
	state, err := a.revert(in.ID, "the workflow did not confirm the flip in time")
	if err != nil {
		return nil, err
	}
	a.spendIntent(ctx, auth, in.Intent, v)
	return &FlipResult{ID: in.ID, State: state}, nil
}

// revert is shared with the watchdog's logic: under the flip lock, a flip
// that is applying or flipped is reverted (firewall, then files). It
// returns the state the flip is in afterwards.
func (a *Activities) revert(id, reason string) (string, error) {
	state := nodestate.FlipReverted
	err := a.Flips.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		if cur == nil || cur.ID != id {
			state = nodestate.FlipNotApplied // never recorded: never applied
			return nil, nil
		}
		switch cur.State {
		case nodestate.FlipReverted, nodestate.FlipNotApplied:
			state = cur.State
			return nil, nil
		case nodestate.FlipConfirmed, nodestate.FlipCommitted:
			return nil, temporal.NewNonRetryableApplicationError("flip "+id+" is already "+cur.State+" on this node: not reverting it", ErrFlipConfirmed, nil)
		}
		if err := RevertRecord(cur, a.Flipper, a.Files); err != nil {
			return nil, err
		}
		cur.State, cur.Reason = nodestate.FlipReverted, reason
		return cur, nil
	})
	return state, err
}

// RevertRecord undoes a flip from its node-local record: the firewall from
// the revert plan (or, when the batch's outcome was never recorded, from
// the node's name: the mesh's table and the accepts carrying the node's
// comment), then every node file from custody. The watchdog calls it too;
// the caller holds the flip lock.
func RevertRecord(rec *nodestate.FlipRecord, fw interface {
	Revert(*flip.RevertPlan) error
}, files interface{ Restore(string) error }) error {
	plan := flip.RevertPlanFor(rec.Node)
	if len(rec.Revert) > 0 {
		if err := json.Unmarshal(rec.Revert, plan); err != nil {
			return fmt.Errorf("flip %s: revert plan unreadable: %w", rec.ID, err)
		}
	}
	if err := fw.Revert(plan); err != nil {
		return fmt.Errorf("flip %s: revert the firewall: %w", rec.ID, err)
	}
	for _, p := range rec.NodeFiles {
		if err := files.Restore(p); err != nil {
			return fmt.Errorf("flip %s: restore %s: %w", rec.ID, p, err)
		}
	}
	return nil
}
