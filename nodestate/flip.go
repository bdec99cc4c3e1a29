package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Flip states, in the order a flip goes through them.
const (
	FlipApplying  = "applying"  // the watchdog is armed; the flip may or may not be in force (treated as in force)
	FlipFlipped   = "flipped"   // in force, waiting for confirmation
	FlipConfirmed = "confirmed" // confirmed in time: the watchdog stands down
	FlipReverted  = "reverted"  // not confirmed in time (or failed): put back as before
	// FlipNotApplied: the batch is known not to have gone in (stale, refused
	// by the kernel as a whole): the node is as before, nothing to revert.
	FlipNotApplied = "not-applied"
	FlipCommitted  = "committed" // the predecessor's leftovers removed: converged
)

// FlipRecord is the node-local record of the current flip. The watchdog
// reads it, with no Temporal and no worker, to decide whether to revert.
type FlipRecord struct {
	ID        string    `json:"id"`
	Node      string    `json:"node"`
	Deadline  time.Time `json:"deadline"`
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	NodeFiles []string  `json:"node_files,omitempty"` // restored from custody on revert
	// Revert is the firewall's revert plan. Written before the batch (the
	// node's name is enough to revert), completed once the batch is in.
	Revert json.RawMessage `json:"revert,omitempty"`
	// Mesh is the spec of the mesh's ruleset the flip applies, and
	// Derived its fingerprint (the one the preview approved): commit
	// writes it for boot, the agent reasserts it after converged.
	Mesh    json.RawMessage `json:"mesh,omitempty"`
	Derived string          `json:"derived,omitempty"`
	// CommitDone names the steps of the commit done so far, in order, so
	// that a commit that stops says what it changed and a retry resumes;
	// Listing is where the predecessor's firewall was saved.
	CommitDone []string  `json:"commit_done,omitempty"`
	Listing    string    `json:"listing,omitempty"`
	Updated    time.Time `json:"updated"`
}

// Pending reports whether the record is a flip that may be in force and
// is not confirmed: what the watchdog watches.
func (r *FlipRecord) Pending() bool {
	return r != nil && (r.State == FlipApplying || r.State == FlipFlipped)
}

const flipFile, flipLock = "flip.json", "flip.lock"

// UpdateFlip runs fn on the current flip record under an exclusive lock, so
// the watchdog and the confirming worker never both win: whichever takes the
// lock first moves the state, the other sees it. fn gets nil when there is no
// record; returning nil from fn leaves the file as it is.
func (d *Dir) UpdateFlip(fn func(cur *FlipRecord) (*FlipRecord, error)) error {
	return d.locked(flipLock, func() error {
		cur, err := d.readFlip()
		if err != nil {
			return err
		}
		next, err := fn(cur)
		if err != nil || next == nil {
			return err
		}
		next.Updated = time.Now().UTC()
		b, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return err
		}
		return WriteFileAtomic(filepath.Join(d.path, flipFile), b, 0o600)
	})
}

// locked runs fn holding the exclusive lock file name under the state
// directory: whoever takes it first moves the record, the other sees it.
func (d *Dir) locked(name string, fn func() error) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(d.path, name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return fn()
}

// Flip reads the current flip record (nil when there is none).
func (d *Dir) Flip() (*FlipRecord, error) { return d.readFlip() }

func (d *Dir) readFlip() (*FlipRecord, error) {
	var r FlipRecord
	if ok, err := d.readJSON(flipFile, "flip record", &r); !ok || err != nil {
		return nil, err
	}
	return &r, nil
}

// SaveListing keeps a copy of the predecessor's firewall as it was removed.
func (d *Dir) SaveListing(name, listing string) (string, error) {
	if err := d.Ensure(); err != nil {
		return "", err
	}
	p := filepath.Join(d.path, name)
	return p, WriteFileAtomic(p, []byte(listing), 0o600)
}

// Converged reports whether the node carries the converged marker.
func (d *Dir) Converged() (bool, error) {
	_, err := os.Stat(filepath.Join(d.path, "converged.json"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// MarkConverged replaces the adopted marker: the mesh's own table is now the
// node's firewall.
func (d *Dir) MarkConverged(node string, at time.Time) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(map[string]any{"node": node, "converged_at": at}, "", "  ")
	if err := WriteFileAtomic(filepath.Join(d.path, "converged.json"), b, 0o600); err != nil {
		return err
	}
	return d.ClearAdopted()
}

// LockWatchdog takes the node's watchdog lock without waiting: ok is false
// when another watchdog holds it. The lock ends with the process, so a
// watchdog that died leaves nothing to clean up.
func (d *Dir) LockWatchdog() (release func(), ok bool, err error) {
	if err := d.Ensure(); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(d.path, "watchdog.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	// The holder's pid, for the operator (and tests) to find it.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, true, nil
}
