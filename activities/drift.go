package activities

import (
	"context"
	"fmt"
	"time"

	"adoption/config"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/intent"
	"adoption/nodestate"
)

// DriftItem is one difference between the node and what adoption recorded.
type DriftItem struct {
	Kind     string `json:"kind"` // file or firewall
	Path     string `json:"path,omitempty"`
	Recorded string `json:"recorded"` // the keyed digest (or "absent") recorded in custody; the fingerprint for the firewall
	Now      string `json:"now"`
	What     string `json:"what"`
}

// DriftInput is what adoption recorded.
type DriftInput struct {
	Plan     config.Plan      `json:"plan"`
	Custody  []custody.Record `json:"custody"`
	Firewall string           `json:"firewall"` // FoundFingerprint at adoption (or at the last accepted drift)
	// Intent is the operator's signed drift accept (AcceptDrift only).
	Intent *intent.Signed `json:"intent,omitempty"`
}

// DriftResult lists the differences; when accepting, the new records.
type DriftResult struct {
	Items    []DriftItem      `json:"items"`
	Custody  []custody.Record `json:"custody,omitempty"`
	Firewall string           `json:"firewall,omitempty"`
}

// CheckDrift compares every custody file and the found firewall's own rules
// with what adoption recorded (a predecessor daemon restarted, someone
// edited a file by hand). It changes nothing.
func (a *Activities) CheckDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	for _, r := range in.Custody {
		if err := checkDeclared(auth, r.Path); err != nil {
			return nil, err
		}
	}
	res := &DriftResult{Items: []DriftItem{}}
	for _, r := range in.Custody {
		now := a.Files.Inspect(r.Path)
		switch {
		case now.Error != "":
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(r.FileState), Now: "unreadable", What: now.Error})
		case now.Exists != r.Found || !sameContent(r.FileState, now):
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(r.FileState), Now: digestOrAbsent(now),
				What: fmt.Sprintf("%s changed since adoption", r.Path)})
		}
	}
	if in.Firewall != "" {
		rs, err := a.Firewall.Ruleset()
		if err != nil {
			return nil, fmt.Errorf("list the found firewall: %w", err)
		}
		now := flip.FoundFingerprint(rs)
		// A node adopted before the node kept its own firewall baseline
		// (gates.go) records the firewall as it measures it now, once,
		// when that is what adoption recorded.
		if _, has, err := a.State.Baseline(); err == nil && !has && now == in.Firewall {
			_ = a.State.SetBaseline(nodestate.Baseline{Firewall: now, At: time.Now().UTC()})
		}
		if now != in.Firewall {
			res.Items = append(res.Items, DriftItem{Kind: "firewall", Recorded: in.Firewall, Now: now,
				What: "the found firewall's own rules changed since adoption (the mesh's marks are not counted)"})
		}
	}
	return res, nil
}

// AcceptDrift records the node as it is now, for exactly the drift the
// node's own check finds now (gates.go: its custody index, its cutover
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
	v, err := a.checkIntent(ctx, auth, in.Intent, []allowed{{actions: []string{ActDriftAccept}}})
	if err != nil {
		return nil, err
	}
	for _, r := range in.Custody { // not used, but never an undeclared path
		if err := checkDeclared(auth, r.Path); err != nil {
			return nil, err
		}
	}
	items, converged, fw, err := a.driftNow(auth)
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
			rec, err := a.Files.Retake(it.Path) // declared: driftNow looks at declared paths only
			if err != nil {
				return nil, fmt.Errorf("accept %s: %w", it.Path, err)
			}
			rec.FileState = rec.FileState.Public()
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

// sameContent compares what a record says with what is there now. A
// record from a workflow names content either by the node's keyed digest
// (what custody found or accepted) or, for a migrated module's file, by the
// plan's plain sha256 of the mesh's content; an older history's records
// carry only the plain sha256.
func sameContent(rec, now custody.FileState) bool {
	if !rec.Exists && !now.Exists {
		return true
	}
	if rec.SHA256 != "" {
		return rec.SHA256 == now.SHA256
	}
	return rec.Digest != "" && rec.Digest == now.Digest
}

// digestOrAbsent names content for the history: never the plain hash of a
// found file.
func digestOrAbsent(f custody.FileState) string {
	switch {
	case !f.Exists:
		return "absent"
	case f.Digest != "":
		return f.Digest
	}
	return "(no digest)"
}
