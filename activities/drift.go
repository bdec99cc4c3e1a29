package activities

import (
	"context"
	"fmt"

	"adoption/config"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/intent"
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
		if now := flip.FoundFingerprint(rs); now != in.Firewall {
			res.Items = append(res.Items, DriftItem{Kind: "firewall", Recorded: in.Firewall, Now: now,
				What: "the found firewall's own rules changed since adoption (the mesh's marks are not counted)"})
		}
	}
	return res, nil
}

// AcceptDrift records the node as it is now: each drifted file's content
// is taken into custody anew, and the found firewall's fingerprint renewed.
func (a *Activities) AcceptDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, []allowed{{actions: []string{ActDriftAccept}}})
	if err != nil {
		return nil, err
	}
	check, err := a.CheckDrift(ctx, in)
	if err != nil {
		return nil, err
	}
	res := &DriftResult{Items: check.Items, Firewall: in.Firewall}
	for _, it := range check.Items {
		switch it.Kind {
		case "file":
			rec, err := a.Files.Retake(it.Path) // declared: CheckDrift checked every path
			if err != nil {
				return nil, fmt.Errorf("accept %s: %w", it.Path, err)
			}
			rec.FileState = rec.FileState.Public()
			res.Custody = append(res.Custody, rec)
		case "firewall":
			res.Firewall = it.Now
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
