package nodestate

// The node's own records of what its agent did, which the agent's gates
// read instead of trusting a request: each module's cutover (migrating,
// confirmed once its last check passed on the node, rolled back) with the
// content its files were converged to, and the found firewall's
// fingerprint as adopted (or as last accepted); and the workflow the node
// serves (its owner).

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// Cutover states, as the node records them.
const (
	// CutoverMigrating: the cutover changed something on the node (its
	// container created, its files converged) and is not confirmed yet.
	CutoverMigrating = "migrating"
	// CutoverConfirmed: the cutover's last check passed on the node; it is
	// migrated, and no rollback undoes it.
	CutoverConfirmed = "confirmed"
	// CutoverRolledBack: a rollback put the predecessor and the files back.
	CutoverRolledBack = "rolled-back"
)

// CutoverRecord is the node's record of one module's cutover.
type CutoverRecord struct {
	Module    string `json:"module"`
	State     string `json:"state"`
	Container string `json:"container,omitempty"`
	// Files maps each declared file the cutover converged to the plain
	// sha256 of the content written: what the node's own drift check
	// expects there. It never leaves the node.
	Files map[string]string `json:"files,omitempty"`
	// Unit is the predecessor's system unit the cutover took over
	// (replaces_unit), and UnitDisabled says the confirmed cutover
	// disabled it: a release enables it again.
	Unit         string    `json:"unit,omitempty"`
	UnitDisabled bool      `json:"unit_disabled,omitempty"`
	Confirmed    time.Time `json:"confirmed,omitzero"`
	Updated      time.Time `json:"updated"`
}

const cutoversFile, cutoversLock = "cutovers.json", "cutovers.lock"

// Cutovers reads every module's cutover record.
func (d *Dir) Cutovers() (map[string]CutoverRecord, error) {
	out := map[string]CutoverRecord{}
	if _, err := d.readJSON(cutoversFile, "cutover records", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateCutover runs fn on module's record (nil when there is none) under
// an exclusive lock; a nil result leaves the records as they are.
func (d *Dir) UpdateCutover(module string, fn func(cur *CutoverRecord) (*CutoverRecord, error)) error {
	return d.locked(cutoversLock, func() error {
		all, err := d.Cutovers()
		if err != nil {
			return err
		}
		var cur *CutoverRecord
		if r, ok := all[module]; ok {
			cur = &r
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return err
		}
		next.Module, next.Updated = module, time.Now().UTC()
		all[module] = *next
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return err
		}
		return WriteFileAtomic(filepath.Join(d.path, cutoversFile), b, 0o600)
	})
}

// Baseline is what the node's own drift check compares the found firewall
// with: its fingerprint at adoption, or at the last accepted drift.
type Baseline struct {
	Firewall string    `json:"firewall"`
	At       time.Time `json:"at"`
}

const baselineFile = "baseline.json"

// Baseline reads the firewall baseline; ok is false when none is recorded
// (a node adopted by an older agent).
func (d *Dir) Baseline() (Baseline, bool, error) {
	var b Baseline
	ok, err := d.readJSON(baselineFile, "firewall baseline", &b)
	return b, ok, err
}

// SetBaseline records the found firewall's fingerprint as the baseline.
func (d *Dir) SetBaseline(b Baseline) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(d.path, baselineFile), raw, 0o600)
}

// Owner is the workflow a node serves: the one whose verified start
// intent adopted it. A workflow keeps its ID across continue-as-new and
// retries, so the ID (with the namespace) is what is recorded, not a run.
type Owner struct {
	Namespace string    `json:"namespace"`
	Workflow  string    `json:"workflow"`
	At        time.Time `json:"at"`
}

const ownerFile = "workflow.json"

// OwnerFile is the owner record's path, for messages: removing it (root on
// the node) lets another workflow adopt the node.
func (d *Dir) OwnerFile() string { return filepath.Join(d.path, ownerFile) }

// Owner reads the owner record; ok is false when the node serves no
// workflow yet (never adopted, or released).
func (d *Dir) Owner() (Owner, bool, error) {
	var o Owner
	ok, err := d.readJSON(ownerFile, "owner record", &o)
	return o, ok, err
}

// SetOwner records o as the workflow the node serves. A record already
// there is kept: the first verified start decides, until a release.
func (d *Dir) SetOwner(o Owner) (Owner, error) {
	if cur, ok, err := d.Owner(); err != nil || ok {
		return cur, err
	}
	if err := d.Ensure(); err != nil {
		return Owner{}, err
	}
	raw, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return Owner{}, err
	}
	return o, WriteFileAtomic(filepath.Join(d.path, ownerFile), raw, 0o600)
}

// ClearOwner removes the owner record (after a release).
func (d *Dir) ClearOwner() error {
	err := os.Remove(filepath.Join(d.path, ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// The owners whose marks the node placed itself (OpenRules under their
// intent): a reconcile puts back only theirs. A release forgets them all.
const openedFile, openedLock = "opened.json", "opened.lock"

// Opened reads the owners the node placed marks for, with when it first
// did.
func (d *Dir) Opened() (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if _, err := d.readJSON(openedFile, "owners whose marks the node placed", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// RecordOpened adds owner to the owners the node placed marks for.
func (d *Dir) RecordOpened(owner string) error {
	return d.updateOpened(func(all map[string]time.Time) {
		if _, ok := all[owner]; !ok {
			all[owner] = time.Now().UTC()
		}
	})
}

// ForgetOpened takes owner out of them (its marks closed); "" forgets
// every owner (a release).
func (d *Dir) ForgetOpened(owner string) error {
	return d.updateOpened(func(all map[string]time.Time) {
		for o := range all {
			if owner == "" || o == owner {
				delete(all, o)
			}
		}
	})
}

func (d *Dir) updateOpened(fn func(map[string]time.Time)) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	return d.locked(openedLock, func() error {
		all, err := d.Opened()
		if err != nil {
			return err
		}
		fn(all)
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return err
		}
		return WriteFileAtomic(filepath.Join(d.path, openedFile), b, 0o600)
	})
}
