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
	"path/filepath"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/firewall/flip"
	"adoption/intent"
	"adoption/nodestate"
)

// ErrIntentRefused is the error type of a request whose signed intent the
// node refuses; its detail is the reason (intent.Refusal.Reason). Never
// retried: nothing was changed, and the request will not sign itself.
const ErrIntentRefused = "IntentRefused"

// The actions an intent names: the operator's request that the CLI signs.
const (
	ActStart       = "start"
	ActRetry       = "retry"
	ActMigrate     = "migrate"
	ActFlip        = "flip"
	ActRelease     = "release"
	ActPrune       = "prune"
	ActDriftAccept = "drift-accept"
	ActResolve     = "resolve"
	ActFleet       = "fleet"        // fleet start: one intent for the fleet's nodes
	ActFleetNext   = "fleet-next"   // fleet next: the nodes it lets start
	ActFleetRetry  = "fleet-retry"  // fleet retry NODE
	ActFleetResume = "fleet-resume" // fleet resume: the nodes it lets start
)

// IntentsDir is where a node keeps the nonces of the intents it acted on.
func IntentsDir(stateDir string) string { return filepath.Join(stateDir, "intents") }

// allowed is one form an intent for an activity may take: one of the
// actions, with exactly these arguments.
type allowed struct {
	actions []string
	args    map[string]string
}

// startIntent: adoption and the foundation's genesis, asked by adopt
// start, a retry of the adoption, or a fleet.
func startIntent() []allowed {
	return []allowed{{actions: []string{ActStart, ActRetry, ActFleet, ActFleetNext, ActFleetRetry, ActFleetResume}}}
}

// ownerIntent: opening or closing an owner's rules is the foundation's
// genesis (a start) or a module's cutover.
func ownerIntent(owner string) []allowed {
	if owner == flip.OwnerFoundation {
		return startIntent()
	}
	return moduleIntent(owner)
}

// moduleIntent: a module's cutover (and its automatic rollback), asked by
// migrate or retry of that module.
func moduleIntent(module string) []allowed {
	return []allowed{{actions: []string{ActMigrate, ActRetry}, args: map[string]string{"module": module}}}
}

// flipIntent: the flip, its confirmation, commit and revert; a commit is
// also asked again by a retry without a module.
func flipIntent(p config.Plan, commit bool) []allowed {
	out := []allowed{{actions: []string{ActFlip}, args: FlipArgs(p)}}
	if commit {
		out = append(out, allowed{actions: []string{ActRetry}})
	}
	return out
}

// FlipArgs are a flip's arguments: the ports it drops.
func FlipArgs(p config.Plan) map[string]string {
	drop := make([]string, 0, len(p.Drop))
	for _, d := range p.Drop {
		drop = append(drop, d.String())
	}
	return map[string]string{"drop": intent.List(drop)}
}

// PruneArgs are a prune's arguments: the modules whose kept predecessors
// may go (the plan's modules; the workflow prunes the migrated ones).
func PruneArgs(p config.Plan) map[string]string {
	mods := make([]string, 0, len(p.Modules))
	for _, m := range p.Modules {
		mods = append(mods, m.Name)
	}
	return map[string]string{"modules": intent.List(mods)}
}

// DecisionArgs are a resolve's arguments: the one decision it records.
func DecisionArgs(path, key, take string) map[string]string {
	return map[string]string{"decisions": intent.List([]string{path + " " + key + " take " + take})}
}

// checkIntent verifies the request's signed intent against the node's own
// operators, name and plan, and claims its nonce for the calling workflow.
// A node whose file says authority.unsigned (and lists no operator) acts
// without one. The verified intent is returned for spendIntent.
func (a *Activities) checkIntent(ctx context.Context, auth *Authority, signed *intent.Signed, forms []allowed) (*intent.Verified, error) {
	return a.claim(ctx, auth, signed, forms, false)
}

// checkUndo is checkIntent for the way back (a cutover's rollback, a
// flip's revert): an intent that has expired since this node first acted
// on it for this workflow still serves to undo what it began, so that the
// way back never depends on how long the way there took.
func (a *Activities) checkUndo(ctx context.Context, auth *Authority, signed *intent.Signed, forms []allowed) (*intent.Verified, error) {
	return a.claim(ctx, auth, signed, forms, true)
}

// claim verifies the intent and claims its nonce; an intent that starts
// the node's adoption also makes the caller the workflow the node serves
// (caller.go).
func (a *Activities) claim(ctx context.Context, auth *Authority, signed *intent.Signed, forms []allowed, undo bool) (*intent.Verified, error) {
	v, err := a.claimNonce(ctx, auth, signed, forms, undo)
	if err == nil && startsAdoption(forms) {
		err = a.pin(ctx)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// startsAdoption reports whether forms are those of the adoption's start.
func startsAdoption(forms []allowed) bool {
	for _, f := range forms {
		for _, act := range f.actions {
			if act == ActStart {
				return true
			}
		}
	}
	return false
}

func (a *Activities) claimNonce(ctx context.Context, auth *Authority, signed *intent.Signed, forms []allowed, undo bool) (*intent.Verified, error) {
	if auth.Operators.Len() == 0 && auth.Unsigned {
		return nil, nil
	}
	now := time.Now()
	v, err := a.verify(auth, signed, forms, now)
	var r *intent.Refusal
	if undo && errors.As(err, &r) && r.Reason == intent.Expired {
		v, err = a.begun(auth, signed, forms, err)
	}
	if err == nil {
		err = intent.Nonces{Dir: auth.Intents}.Claim(signed, v, callingWorkflow(ctx), now)
	}
	if errors.As(err, &r) {
		heartbeat(ctx, "refused: intent "+r.Reason)
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused by node %s: %v; nothing was changed", a.Node, err), ErrIntentRefused, nil, r.Reason)
	}
	if err != nil {
		return nil, fmt.Errorf("record the intent's nonce: %w", err)
	}
	return v, nil
}

// verify is intent.Verify for the first of forms whose action the intent
// names.
func (a *Activities) verify(auth *Authority, signed *intent.Signed, forms []allowed, at time.Time) (*intent.Verified, error) {
	var v *intent.Verified
	var err error
	for _, f := range forms {
		v, err = intent.Verify(signed, auth.Operators, intent.Want{Node: a.Node, PlanHash: auth.Plan.Hash(), Actions: f.actions, Args: f.args}, at)
		var r *intent.Refusal
		if err == nil || !errors.As(err, &r) || r.Reason != intent.WrongAction {
			break
		}
	}
	return v, err
}

// begun is an expired intent verified as of its issue time, if the node
// holds a record of acting on it (Claim then decides whether for this
// workflow, and whether its operation has ended); else expired stays.
func (a *Activities) begun(auth *Authority, signed *intent.Signed, forms []allowed, expired error) (*intent.Verified, error) {
	var in intent.Intent
	if json.Unmarshal(signed.Payload, &in) != nil {
		return nil, expired
	}
	v, err := a.verify(auth, signed, forms, in.Issued)
	if err != nil || !(intent.Nonces{Dir: auth.Intents}).Has(v.Nonce) {
		return nil, expired // never acted on: nothing to undo under it
	}
	return v, nil
}

// spendIntent marks the intent's operation as ended on the node: no
// request may present it again. A failure is logged, not returned: the
// work is done, and a retry of the activity must not redo it only to be
// refused as replayed.
func (a *Activities) spendIntent(ctx context.Context, auth *Authority, signed *intent.Signed, v *intent.Verified) {
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
func (a *Activities) confirmCutover(ctx context.Context, auth *Authority, m config.ModulePlan, signed *intent.Signed) error {
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
func (a *Activities) checkDecisions(ctx context.Context, auth *Authority, ds []FileDecision) error {
	for _, d := range ds {
		if _, err := a.checkIntent(ctx, auth, d.Intent, []allowed{{actions: []string{ActResolve}, args: DecisionArgs(d.Path, d.Key, d.Take)}}); err != nil {
			return err
		}
	}
	return nil
}
