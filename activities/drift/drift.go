// Package drift is the node's own drift check: what changed, since the
// node took it, in each declared file in custody (against the file as
// found or last accepted, or the content a cutover converged it to) and in
// the found firewall's own rules (against the baseline fingerprint). It
// reads the node's records and its files, writes nothing, and names
// content by keyed digest only: a plain hash never leaves the node.
package drift

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// The node's parts the check reads. Each is small so a test can replace it.
type (
	// Files is the node's custody of found files.
	Files interface {
		Inspect(path string) custody.FileState
		Record(path string) (custody.Record, bool, error)
	}
	// Records are the node's own records under state_dir: each module's
	// cutover (the files it converged) and the found firewall's baseline.
	Records interface {
		Cutovers() (map[string]nodestate.CutoverRecord, error)
		Baseline() (nodestate.Baseline, bool, error)
	}
	// Firewall lists the found firewall.
	Firewall interface {
		Ruleset() (*firewall.Ruleset, error)
	}
)

// Check is the drift check on one node's parts.
type Check struct {
	Node     string // node.name, named in what the check finds
	Files    Files
	Records  Records
	Firewall Firewall
}

// Of compares as the CheckDrift activity says, and writes nothing: a node adopted
// before it kept its own firewall baseline records one only under a
// drift-accept intent (AcceptDrift), never because a request's
// fingerprint matches.
func (c Check) Of(auth *authority.Authority, in nodewire.DriftInput) (*nodewire.DriftResult, error) {
	for _, r := range in.Custody {
		if err := authority.CheckDeclared(auth, r.Path); err != nil {
			return nil, err
		}
	}
	res := &nodewire.DriftResult{Items: []nodewire.DriftItem{}}
	for _, r := range in.Custody {
		base, ok, err := c.baseline(auth, r)
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Items = append(res.Items, nodewire.DriftItem{Kind: "file", Path: r.Path, Recorded: "unknown", Now: "unchecked",
				What: fmt.Sprintf("%s has no custody record on node %s (its state_dir was replaced?); accepting the drift takes the file as it is now", r.Path, c.Node)})
			continue
		}
		now := c.Files.Inspect(r.Path)
		switch {
		case now.Error != "":
			res.Items = append(res.Items, nodewire.DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(base.FileState), Now: "unreadable", What: now.Error})
		case now.Exists != base.Found || !sameContent(base.FileState, now):
			res.Items = append(res.Items, nodewire.DriftItem{Kind: "file", Path: r.Path, Recorded: digestOrAbsent(base.FileState), Now: digestOrAbsent(now),
				What: fmt.Sprintf("%s changed since adoption", r.Path)})
		}
	}
	if in.Firewall != "" {
		rs, err := c.Firewall.Ruleset()
		if err != nil {
			return nil, fmt.Errorf("list the found firewall: %w", err)
		}
		now := flip.FoundFingerprint(rs)
		if now != in.Firewall {
			res.Items = append(res.Items, nodewire.DriftItem{Kind: "firewall", Recorded: in.Firewall, Now: now,
				What: "the found firewall's own rules changed since adoption (the mesh's marks are not counted)"})
		}
	}
	return res, nil
}

// Now is the node's own drift check: every declared file in custody
// against what the node recorded for it (the file as found or as last
// accepted; for a file a cutover converged, the content it wrote), and the
// found firewall's own rules against the baseline fingerprint recorded at
// adoption (or at the last accepted drift). Nothing from a request enters
// it. converged maps a converged file's path to its module.
func (c Check) Now(auth *authority.Authority) (items []nodewire.DriftItem, converged map[string]string, fw string, err error) {
	recs, err := c.Records.Cutovers()
	if err != nil {
		return nil, nil, "", fmt.Errorf("read node %s's cutover records: %w", c.Node, err)
	}
	expect := map[string]string{}
	converged = map[string]string{}
	for _, r := range recs {
		if r.State == nodestate.CutoverRolledBack {
			continue
		}
		for p, s := range r.Files {
			expect[p], converged[p] = s, r.Module
		}
	}
	for _, p := range auth.Plan.DeclaredPaths() {
		rec, ok, err := c.Files.Record(p)
		if err != nil {
			return nil, nil, "", fmt.Errorf("custody record of %s: %w", p, err)
		}
		if !ok {
			continue // never taken: nothing recorded to drift from
		}
		now := c.Files.Inspect(p)
		if now.Error != "" {
			items = append(items, nodewire.DriftItem{Kind: "file", Path: p, Recorded: digestOrAbsent(rec.FileState), Now: "unreadable", What: now.Error})
			continue
		}
		if s, ok := expect[p]; ok {
			if !now.Exists || now.SHA256 != s {
				items = append(items, nodewire.DriftItem{Kind: "file", Path: p, Recorded: "as module " + converged[p] + "'s cutover wrote it", Now: digestOrAbsent(now),
					What: fmt.Sprintf("%s changed since module %s's cutover wrote it", p, converged[p])})
			}
			continue
		}
		if now.Exists != rec.Found || (now.Exists && now.SHA256 != rec.SHA256) {
			items = append(items, nodewire.DriftItem{Kind: "file", Path: p, Recorded: digestOrAbsent(rec.FileState), Now: digestOrAbsent(now),
				What: fmt.Sprintf("%s changed since adoption", p)})
		}
	}
	rs, err := c.Firewall.Ruleset()
	if err != nil {
		return nil, nil, "", fmt.Errorf("list the found firewall: %w", err)
	}
	fw = flip.FoundFingerprint(rs)
	base, ok, err := c.Records.Baseline()
	if err != nil {
		return nil, nil, "", err
	}
	switch {
	case !ok:
		items = append(items, nodewire.DriftItem{Kind: "firewall", Recorded: "none", Now: fw,
			What: "node " + c.Node + " has no baseline of the found firewall recorded (adopted by an older agent): accept the firewall as it is now (adopt drift accept " + c.Node + ")"})
	case base.Firewall != fw:
		items = append(items, nodewire.DriftItem{Kind: "firewall", Recorded: base.Firewall, Now: fw,
			What: "the found firewall's own rules changed since adoption (the mesh's marks are not counted)"})
	}
	return items, converged, fw, nil
}

// baseline is what the node itself says a path should hold. A record
// whose SHA256 is the digest the node's own plan declares for that path is
// the workflow saying a migrated module converged it to the mesh's
// content: the baseline is the node's own copy of that content. Any other
// record stands for what custody found (an older history's records carry
// the found content's plain sha256 there), which the node's custody index
// holds; the record's own digests are not looked at, so the answer is the
// same whatever they say (ok is false when the index holds nothing for the
// path).
func (c Check) baseline(auth *authority.Authority, r custody.Record) (base custody.Record, ok bool, err error) {
	if r.SHA256 == "" {
		return c.Files.Record(r.Path)
	}
	for _, m := range auth.Plan.Modules {
		for _, f := range m.Files {
			if f.Path != r.Path || f.SHA256 != r.SHA256 {
				continue
			}
			content, ok := auth.Contents[f.SHA256]
			if !ok {
				return base, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no content with digest %.12s for %s in this worker's configuration", f.SHA256, f.Path), nodewire.ErrMissingContent, nil)
			}
			sum := sha256.Sum256(content)
			return custody.Record{FileState: custody.FileState{Path: r.Path, Exists: true, SHA256: hex.EncodeToString(sum[:]), Digest: f.SHA256}, Found: true}, true, nil
		}
	}
	return c.Files.Record(r.Path)
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
