package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Flip states, in the order a flip goes through them.
const (
	FlipApplying  = "applying"  // the watchdog is armed; the flip may or may not be in force
	FlipFlipped   = "flipped"   // in force, waiting for confirmation
	FlipConfirmed = "confirmed" // confirmed in time: the watchdog stands down
	FlipReverted  = "reverted"  // not confirmed in time (or failed): put back as before
	FlipCommitted = "committed" // the predecessor's leftovers removed: converged
)

// FlipRecord is the node-local record of the current flip. The watchdog
// reads it, with no Temporal and no worker, to decide whether to revert.
type FlipRecord struct {
	ID        string          `json:"id"`
	Node      string          `json:"node"`
	Deadline  time.Time       `json:"deadline"`
	State     string          `json:"state"`
	Reason    string          `json:"reason,omitempty"`
	NodeFiles []string        `json:"node_files,omitempty"` // restored from custody on revert
	Revert    json.RawMessage `json:"revert,omitempty"`     // the firewall's revert plan
	Updated   time.Time       `json:"updated"`
}

const flipFile, flipLock = "flip.json", "flip.lock"

// UpdateFlip runs fn on the current flip record under an exclusive lock, so
// the watchdog and the confirming worker never both win: whichever takes the
// lock first moves the state, the other sees it. fn gets nil when there is no
// record; returning nil from fn leaves the file as it is.
func (d *Dir) UpdateFlip(fn func(cur *FlipRecord) (*FlipRecord, error)) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(d.path, flipLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
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
}

// Flip reads the current flip record (nil when there is none).
func (d *Dir) Flip() (*FlipRecord, error) { return d.readFlip() }

func (d *Dir) readFlip() (*FlipRecord, error) {
	b, err := os.ReadFile(filepath.Join(d.path, flipFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r FlipRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("flip record %s is corrupt: %w", filepath.Join(d.path, flipFile), err)
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
