package activities

// This file holds the commit's steps on the node's boot path (bootpath):
// a converged node must boot into the mesh's ruleset, not back into its
// predecessor's, and not into no firewall at all.

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/bootpath"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// Where a Debian node loads its firewall at boot (under node.root).
const (
	BootNftablesConf = bootpath.NftablesConf
	BootUfwConf      = bootpath.UfwConf
	BootDropIn       = bootpath.DropIn
)

// bootPath is the node's boot path as auth's configuration lets the
// commit change it.
func (a *Activities) bootPath(auth *authority.Authority) bootpath.Node {
	n := bootpath.Node{Root: a.Root, Files: a.Files, Ruleset: func() (*firewall.Ruleset, error) { return a.Firewall.Ruleset() }}
	if auth != nil {
		n.Name, n.EnableService = auth.Plan.Node, auth.EnableBootService
	}
	return n
}

// bootErr is a bootpath.Refusal as the workflow tells it: not retried,
// ErrBootPath (ErrFlipNotConfirmed when the record has no mesh table).
func bootErr(err error) error {
	var r *bootpath.Refusal
	if !errors.As(err, &r) {
		return err
	}
	typ := ErrBootPath
	if r.NoMesh {
		typ = ErrFlipNotConfirmed
	}
	return temporal.NewNonRetryableApplicationError(r.Msg, typ, nil)
}

// checkBoot is bootpath's Check: it refuses, naming what to do, when the
// boot would not load the mesh's table and the configuration does not let
// the commit see to it.
func (a *Activities) checkBoot(auth *authority.Authority, plan *flip.RevertPlan) (*bootpath.Plan, error) {
	bp := a.bootPath(auth)
	if nr, ok := a.Firewall.(NodeReader); ok {
		// Unread, Docker's rules are told by its default bridge names.
		if on, err := nr.Node(); err == nil {
			bp.On = &on
		}
	}
	p, err := bp.Check(plan)
	return p, bootErr(err)
}

// previewBoot is the boot path's check as the preview runs it, on the
// ruleset it listed (rs, on node): what the commit will check (bootpath's
// Check, with the revert plan the flip would record), so a flip whose
// commit would refuse is refused before it is applied. It names why, or
// says "".
func (a *Activities) previewBoot(auth *authority.Authority, rs *firewall.Ruleset, node *firewall.Node) string {
	plan, err := flip.PlannedRevert(rs, node, auth.Plan.Node)
	if err != nil {
		return "the boot path cannot be checked: " + err.Error()
	}
	bp := a.bootPath(auth)
	bp.Ruleset = func() (*firewall.Ruleset, error) { return rs, nil }
	bp.On, bp.Then = node, "preview again"
	if _, err := bp.Check(plan); err != nil {
		return "the commit would refuse, so the flip is not applied: " + err.Error()
	}
	return ""
}

func (a *Activities) applyBootUnits(p *bootpath.Plan, done func(string)) error {
	return bootErr(a.bootPath(nil).ApplyUnits(p, done))
}

func (a *Activities) writeBootRuleset(rec *nodestate.FlipRecord, plan *flip.RevertPlan) ([]string, error) {
	notes, err := a.bootPath(nil).WriteRuleset(rec, plan)
	return notes, bootErr(err)
}

func (a *Activities) disableUfw() (bool, error) {
	changed, err := a.bootPath(nil).DisableUfw()
	return changed, bootErr(err)
}
