package activities

import (
	"context"
	"fmt"

	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
)

// DriftItem is one difference between the node and what adoption recorded.
type DriftItem struct {
	Kind     string `json:"kind"` // file or firewall
	Path     string `json:"path,omitempty"`
	Recorded string `json:"recorded"` // sha256 (or "absent") recorded in custody; the fingerprint for the firewall
	Now      string `json:"now"`
	What     string `json:"what"`
}

// DriftInput is what adoption recorded.
type DriftInput struct {
	Plan     config.Plan      `json:"plan"`
	Custody  []custody.Record `json:"custody"`
	Firewall string           `json:"firewall"` // FoundFingerprint at adoption (or at the last accepted drift)
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
	if err := a.checkNode(in.Plan.Node); err != nil {
		return nil, err
	}
	res := &DriftResult{Items: []DriftItem{}}
	for _, r := range in.Custody {
		now := a.Files.Inspect(r.Path)
		switch {
		case now.Error != "":
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: shaOrAbsent(r.FileState), Now: "unreadable", What: now.Error})
		case now.Exists != r.Found || now.SHA256 != r.SHA256:
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: shaOrAbsent(r.FileState), Now: shaOrAbsent(now),
				What: fmt.Sprintf("%s changed since adoption", r.Path)})
		}
	}
	if in.Firewall != "" {
		rs, err := a.Firewall.Ruleset()
		if err != nil {
			return nil, fmt.Errorf("list the found firewall: %w", err)
		}
		if now := firewall.FoundFingerprint(rs); now != in.Firewall {
			res.Items = append(res.Items, DriftItem{Kind: "firewall", Recorded: in.Firewall, Now: now,
				What: "the found firewall's own rules changed since adoption (the mesh's marks are not counted)"})
		}
	}
	return res, nil
}

// AcceptDrift records the node as it is now: each drifted file's content
// is taken into custody anew, and the found firewall's fingerprint renewed.
func (a *Activities) AcceptDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	check, err := a.CheckDrift(ctx, in)
	if err != nil {
		return nil, err
	}
	res := &DriftResult{Items: check.Items, Firewall: in.Firewall}
	for _, it := range check.Items {
		switch it.Kind {
		case "file":
			rec, err := a.Files.Retake(it.Path)
			if err != nil {
				return nil, fmt.Errorf("accept %s: %w", it.Path, err)
			}
			res.Custody = append(res.Custody, rec)
		case "firewall":
			res.Firewall = it.Now
		}
	}
	return res, nil
}

func shaOrAbsent(f custody.FileState) string {
	if !f.Exists {
		return "absent"
	}
	return f.SHA256
}
