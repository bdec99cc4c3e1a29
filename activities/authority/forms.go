package authority

// This file holds the forms a signed intent takes: the actions an operator
// signs, and for each activity the actions and arguments it accepts.

import (
	"encoding/json"
	"errors"
	"time"

	"adoption/config"
	"adoption/firewall/flipwire"
	"adoption/intent"
)

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
	ActFleet       = "fleet"        // fleet start: an intent for each of the fleet's nodes
	ActFleetNext   = "fleet-next"   // fleet next: the nodes it lets start
	ActFleetRetry  = "fleet-retry"  // fleet retry NODE
	ActFleetResume = "fleet-resume" // fleet resume: the nodes it lets start
	// ActFleetMigrate: fleet migrate MODULE, an intent for each node that
	// declares it, with the module as its argument.
	ActFleetMigrate = "fleet-migrate"
	// ActFleetFlip: fleet flip, an intent for each of the fleet's nodes, no
	// argument: each binds its node's plan hash, and with it its drops.
	ActFleetFlip = "fleet-flip"
)

// Form is one form an intent for an activity may take: one of the
// actions, with exactly these arguments.
type Form struct {
	Actions []string
	Args    map[string]string
}

// StartIntent: adoption and the foundation's genesis, asked by adopt
// start, a retry of the adoption, or a fleet.
func StartIntent() []Form {
	return []Form{{Actions: []string{ActStart, ActRetry, ActFleet, ActFleetNext, ActFleetRetry, ActFleetResume}}}
}

// FleetStartIntent: a fleet reading the node's plan before it starts the
// node's workflow, asked by fleet start, next, resume or retry.
func FleetStartIntent() []Form {
	return []Form{{Actions: []string{ActFleet, ActFleetNext, ActFleetRetry, ActFleetResume}}}
}

// OwnerIntent: opening or closing an owner's rules is the foundation's
// genesis (a start) or a module's cutover.
func OwnerIntent(owner string) []Form {
	if owner == flipwire.OwnerFoundation {
		return StartIntent()
	}
	return ModuleIntent(owner)
}

// ModuleIntent: a module's cutover (and its automatic rollback), asked by
// migrate or retry of that module.
func ModuleIntent(module string) []Form {
	return []Form{{Actions: []string{ActMigrate, ActRetry, ActFleetMigrate}, Args: map[string]string{"module": module}}}
}

// FlipIntent: the flip, its confirmation, commit and revert, asked by
// adopt flip (its drops as arguments) or fleet flip (none: the plan's hash
// binds them); a commit is also asked again by a retry without a module.
func FlipIntent(p config.Plan, commit bool) []Form {
	out := []Form{{Actions: []string{ActFlip}, Args: FlipArgs(p)}, {Actions: []string{ActFleetFlip}}}
	if commit {
		out = append(out, Form{Actions: []string{ActRetry}})
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

// StartsAdoption reports whether forms are those of the adoption's start.
func StartsAdoption(forms []Form) bool {
	for _, f := range forms {
		for _, act := range f.Actions {
			if act == ActStart {
				return true
			}
		}
	}
	return false
}

// Verify is intent.Verify for the first of forms whose action the intent
// names.
func Verify(node string, auth *Authority, signed *intent.Signed, forms []Form, at time.Time) (*intent.Verified, error) {
	var v *intent.Verified
	var err error
	for _, f := range forms {
		v, err = intent.Verify(signed, auth.Operators, intent.Want{Node: node, PlanHash: auth.Plan.Hash(), Actions: f.Actions, Args: f.Args}, at)
		var r *intent.Refusal
		if err == nil || !errors.As(err, &r) || r.Reason != intent.WrongAction {
			break
		}
	}
	return v, err
}

// Admit verifies signed for one of forms at now and claims its nonce for
// the calling workflow, so that no other workflow can present it again.
// For the way back (undo: a cutover's rollback, a flip's revert), an
// intent that has expired since the node first acted on it is verified as
// of its issue time, so the way back never depends on how long the way
// there took; one never acted on stays expired.
func Admit(node string, auth *Authority, signed *intent.Signed, forms []Form, now time.Time, undo bool, workflow string) (*intent.Verified, error) {
	v, err := Verify(node, auth, signed, forms, now)
	var r *intent.Refusal
	if undo && errors.As(err, &r) && r.Reason == intent.Expired {
		v, err = begun(node, auth, signed, forms, err)
	}
	if err != nil {
		return nil, err
	}
	if err := (intent.Nonces{Dir: auth.Intents}).Claim(signed, v, workflow, now); err != nil {
		return nil, err
	}
	return v, nil
}

// HasWayBack reports whether an intent's action begins what the node may
// have to undo under it after it expires (a cutover's rollback and the
// closing of its rules, a flip's revert): its record is kept until its
// operation ends (PruneIntents).
func HasWayBack(action string) bool {
	switch action {
	case ActMigrate, ActRetry, ActFleetMigrate, ActFlip, ActFleetFlip:
		return true
	}
	return false
}

// PruneIntents removes, at the agent's start, the records of intents that
// expired, except those of operations with a way back not yet ended.
func PruneIntents(stateDir string, now time.Time) (int, error) {
	return intent.Nonces{Dir: IntentsDir(stateDir)}.Prune(now, HasWayBack)
}

// begun is an expired intent verified as of its issue time, if the node
// holds a record of acting on it (Claim then decides whether for this
// workflow, and whether its operation has ended); else expired stays.
func begun(node string, auth *Authority, signed *intent.Signed, forms []Form, expired error) (*intent.Verified, error) {
	var in intent.Intent
	if json.Unmarshal(signed.Payload, &in) != nil {
		return nil, expired
	}
	v, err := Verify(node, auth, signed, forms, in.Issued)
	if err != nil || !(intent.Nonces{Dir: auth.Intents}).Has(v.Nonce) {
		return nil, expired // never acted on: nothing to undo under it
	}
	return v, nil
}
