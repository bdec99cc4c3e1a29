package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// DriftItem is nodewire.DriftItem.
type DriftItem = nodewire.DriftItem

// DriftInput is nodewire.DriftInput.
type DriftInput = nodewire.DriftInput

// DriftResult is nodewire.DriftResult.
type DriftResult = nodewire.DriftResult

// CheckDrift compares every custody file and the found firewall's own rules
// with what adoption recorded (a predecessor daemon restarted, someone
// edited a file by hand). It changes nothing. A file is compared with the
// node's own records only (its custody index, or the mesh's content in its
// own configuration), never with a digest the request brings: drift must
// not answer "is the file's content X?" for an X of the asker's choosing.
func (a *Activities) CheckDrift(ctx context.Context, in DriftInput) (*DriftResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	return a.driftOf(auth, in)
}

// driftOf compares as CheckDrift says, and writes nothing: a node adopted
// before it kept its own firewall baseline records one only under a
// drift-accept intent (AcceptDrift), never because a request's
// fingerprint matches.
func (a *Activities) driftOf(auth *authority.Authority, in DriftInput) (*DriftResult, error) {
	for _, r := range in.Custody {
		if err := authority.CheckDeclared(auth, r.Path); err != nil {
			return nil, err
		}
	}
	res := &DriftResult{Items: []DriftItem{}}
	for _, r := range in.Custody {
		base, ok, err := a.driftBaseline(auth, r)
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: "unknown", Now: "unchecked",
				What: fmt.Sprintf("%s has no custody record on node %s (its state_dir was replaced?); accepting the drift takes the file as it is now", r.Path, a.Node)})
			continue
		}
		now := a.Files.Inspect(r.Path)
		switch {
		case now.Error != "":
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(base.FileState), Now: "unreadable", What: now.Error})
		case now.Exists != base.Found || !sameContent(base.FileState, now):
			res.Items = append(res.Items, DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(base.FileState), Now: digestOrAbsent(now),
				What: fmt.Sprintf("%s changed since adoption", r.Path)})
		}
	}
	if in.Firewall != "" {
		rs, err := a.Firewall.Ruleset()
		if err != nil {
			return nil, fmt.Errorf("list the found firewall: %w", err)
		}
		now := flip.FoundFingerprint(rs)
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
	v, err := a.checkIntent(ctx, auth, in.Intent, []authority.Form{{Actions: []string{authority.ActDriftAccept}}})
	if err != nil {
		return nil, err
	}
	for _, r := range in.Custody { // not used, but never an undeclared path
		if err := authority.CheckDeclared(auth, r.Path); err != nil {
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

// driftBaseline is what the node itself says a path should hold. A record
// whose SHA256 is the digest the node's own plan declares for that path is
// the workflow saying a migrated module converged it to the mesh's
// content: the baseline is the node's own copy of that content. Any other
// record stands for what custody found (an older history's records carry
// the found content's plain sha256 there), which the node's custody index
// holds; the record's own digests are not looked at, so the answer is the
// same whatever they say (ok is false when the index holds nothing for the
// path).
func (a *Activities) driftBaseline(auth *authority.Authority, r custody.Record) (base custody.Record, ok bool, err error) {
	if r.SHA256 == "" {
		return a.Files.Record(r.Path)
	}
	for _, m := range auth.Plan.Modules {
		for _, f := range m.Files {
			if f.Path != r.Path || f.SHA256 != r.SHA256 {
				continue
			}
			content, ok := auth.Contents[f.SHA256]
			if !ok {
				return base, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no content with digest %.12s for %s in this worker's configuration", f.SHA256, f.Path), ErrMissingContent, nil)
			}
			sum := sha256.Sum256(content)
			return custody.Record{FileState: custody.FileState{Path: r.Path, Exists: true, SHA256: hex.EncodeToString(sum[:]), Digest: f.SHA256}, Found: true}, true, nil
		}
	}
	return a.Files.Record(r.Path)
}

// sameContent compares the node's baseline with what is there now, by the
// plain hashes, which never leave the node.
func sameContent(base, now custody.FileState) bool {
	if !base.Exists && !now.Exists {
		return true
	}
	return base.SHA256 != "" && base.SHA256 == now.SHA256
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
