package activities

// This file holds the operator's word: every state-changing activity,
// right after authorize, checks the signed intent its request carries
// (checkIntent) against the node's own authority.operators, the node's
// name and own plan's hash, the action and its arguments, and the expiry,
// and claims its nonce for the calling workflow, so that no other
// workflow can present it again. Work the node does by itself (reconcile,
// drift checks, probes, previews, the watchdog's revert) needs none.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/intent"
	"adoption/nodestate"
)

// ErrIntentRefused is nodewire.ErrIntentRefused.
const ErrIntentRefused = nodewire.ErrIntentRefused

// checkIntent verifies the request's signed intent against the node's own
// operators, name and plan, and claims its nonce for the calling workflow.
// A node whose file says authority.unsigned (and lists no operator) acts
// without one. The verified intent is returned for spendIntent.
func (a *Activities) checkIntent(ctx context.Context, auth *authority.Authority, signed *intent.Signed, forms []authority.Form) (*intent.Verified, error) {
	return a.claim(ctx, auth, signed, forms, false)
}

// authorizeFlip is the preamble of the flip in one round trip: the request
// authorized, then its intent to flip checked and claimed.
func (a *Activities) authorizeFlip(ctx context.Context, plan config.PlanRef, signed *intent.Signed) (*authority.Authority, *intent.Verified, error) {
	auth, err := a.authorize(ctx, plan)
	if err != nil {
		return nil, nil, err
	}
	v, err := a.checkIntent(ctx, auth, signed, authority.FlipIntent(auth.Plan, false))
	if err != nil {
		return nil, nil, err
	}
	return auth, v, nil
}

// checkUndo is checkIntent for the way back (a cutover's rollback, a
// flip's revert): an intent that has expired since this node first acted
// on it for this workflow still serves to undo what it began, so that the
// way back never depends on how long the way there took.
func (a *Activities) checkUndo(ctx context.Context, auth *authority.Authority, signed *intent.Signed, forms []authority.Form) (*intent.Verified, error) {
	return a.claim(ctx, auth, signed, forms, true)
}

// claim verifies the intent and claims its nonce; an intent that starts
// the node's adoption also makes the caller the workflow the node serves
// (served.go).
func (a *Activities) claim(ctx context.Context, auth *authority.Authority, signed *intent.Signed, forms []authority.Form, undo bool) (*intent.Verified, error) {
	v, err := a.claimNonce(ctx, auth, signed, forms, undo)
	if err == nil && authority.StartsAdoption(forms) {
		err = a.pin(ctx)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// claimNonce is authority.Admit, its refusal the activity's
// ErrIntentRefused.
func (a *Activities) claimNonce(ctx context.Context, auth *authority.Authority, signed *intent.Signed, forms []authority.Form, undo bool) (*intent.Verified, error) {
	if auth.Operators.Len() == 0 && auth.Unsigned {
		return nil, nil
	}
	v, err := authority.Admit(a.Node, auth, signed, forms, time.Now(), undo, callingWorkflow(ctx))
	var r *intent.Refusal
	if errors.As(err, &r) {
		heartbeat(ctx, "refused: intent "+r.Reason)
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused by node %s: %v; nothing was changed", a.Node, err), ErrIntentRefused, nil, r.Reason)
	}
	if err != nil {
		return nil, fmt.Errorf("record the intent's nonce: %w", err)
	}
	return v, nil
}

// spendIntent marks the intent's operation as ended on the node: no
// request may present it again. A failure is logged, not returned: the
// work is done, and a retry of the activity must not redo it only to be
// refused as replayed.
func (a *Activities) spendIntent(ctx context.Context, auth *authority.Authority, signed *intent.Signed, v *intent.Verified) {
	if v == nil {
		return
	}
	if err := (intent.Nonces{Dir: auth.Intents}).Spend(v, signed, callingWorkflow(ctx), time.Now()); err != nil {
		logger(ctx).Error("spend the intent's nonce", "nonce", v.Nonce, "error", err.Error())
	}
}

// confirmCutover records module m's cutover as confirmed on the node (its
// last check passed: it is migrated) and spends the intent that asked it
// (a migrate or retry of m): the operation ended, so it cannot be
// presented again, by this workflow or any other. It is called only after
// the same call verified signed. A retry of the confirming step after a
// lost answer is then refused as replayed, and the workflow's rollback is
// refused as the cutover is confirmed: the module stays migrated.
func (a *Activities) confirmCutover(ctx context.Context, auth *authority.Authority, m config.ModulePlan, signed *intent.Signed) error {
	if err := a.markCutover(m, nodestate.CutoverConfirmed, nil); err != nil {
		return fmt.Errorf("record %s's cutover as confirmed on the node: %w", m.Name, err)
	}
	if signed == nil || (auth.Operators.Len() == 0 && auth.Unsigned) {
		return nil
	}
	var in intent.Intent
	if err := json.Unmarshal(signed.Payload, &in); err != nil {
		return nil // verified in this call: cannot happen
	}
	a.spendIntent(ctx, auth, signed, &intent.Verified{Intent: in})
	return nil
}

// checkDecisions verifies each decision's own intent (adopt resolve).
func (a *Activities) checkDecisions(ctx context.Context, auth *authority.Authority, ds []FileDecision) error {
	for _, d := range ds {
		if _, err := a.checkIntent(ctx, auth, d.Intent, []authority.Form{{Actions: []string{authority.ActResolve}, Args: authority.DecisionArgs(d.Path, d.Key, d.Take)}}); err != nil {
			return err
		}
	}
	return nil
}
