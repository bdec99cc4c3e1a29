// This file holds the drift check: package drift run on the node's parts,
// authorized and answered in the workflow's wire types.

package activities

import (
	"context"
	"fmt"
	"time"

	"adoption/activities/authority"
	"adoption/activities/drift"
	"adoption/activities/nodewire"
	"adoption/nodestate"
)

// DriftItem is nodewire.DriftItem.
type DriftItem = nodewire.DriftItem

// DriftInput is nodewire.DriftInput.
type DriftInput = nodewire.DriftInput

// DriftResult is nodewire.DriftResult.
type DriftResult = nodewire.DriftResult

// checkDrift compares every custody file and the found firewall's own rules
// with what adoption recorded (a predecessor daemon restarted, someone
// edited a file by hand). It changes nothing. A file is compared with the
// node's own records only (its custody index, or the mesh's content in its
// own configuration), never with a digest the request brings: drift must
// not answer "is the file's content X?" for an X of the asker's choosing.
func (a *Activities) checkDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	return a.drift().Of(auth, in)
}

// drift is the node's own drift check on its parts (package drift).
func (a *Activities) drift() drift.Check {
	return drift.Check{Node: a.Node, Files: a.Files, Records: a.State, Firewall: a.Firewall}
}

// AcceptDrift records the node as it is now, for exactly the drift the
// node's own check finds now (package drift: its custody index, its cutover
// records, its firewall baseline), never for records a request sends (a
// forged one would replace the found content a rollback restores): each
// drifted file as found is taken into custody anew, a file a cutover
// converged gets its new content recorded as expected (custody keeps what
// was found), and the found firewall's baseline is renewed.
func (a *Activities) AcceptDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, []authority.Form{{Actions: []string{authority.ActDriftAccept}}})
	if err != nil {
		return nil, err
	}
	for _, r := range in.Custody { // not used, but never an undeclared path
		if err := authority.CheckDeclared(auth, r.Path); err != nil {
			return nil, err
		}
	}
	items, converged, fw, err := a.drift().Now(auth)
	if err != nil {
		return nil, err
	}
	res := &DriftResult{Items: append([]DriftItem{}, items...), Firewall: fw}
	for _, it := range items {
		switch {
		case it.Kind == "file" && converged[it.Path] != "":
			now := a.Files.Inspect(it.Path)
			if err := a.acceptConverged(converged[it.Path], it.Path, now); err != nil {
				return nil, fmt.Errorf("accept %s: %w", it.Path, err)
			}
		case it.Kind == "file":
			rec, err := a.Files.Retake(it.Path) // declared: drift.Check.Now looks at declared paths only
			if err != nil {
				return nil, fmt.Errorf("accept %s: %w", it.Path, err)
			}
			rec = rec.Public()
			res.Custody = append(res.Custody, rec)
		case it.Kind == "firewall":
			if err := a.State.SetBaseline(nodestate.Baseline{Firewall: fw, At: time.Now().UTC()}); err != nil {
				return nil, fmt.Errorf("record the found firewall's baseline: %w", err)
			}
		}
	}
	a.spendIntent(ctx, auth, in.Intent, v)
	return res, nil
}
