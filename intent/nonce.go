// This file holds the node's record of the intents it has acted on, one
// file per nonce under a directory of state_dir: an intent serves the
// workflow that first presented it, until it expires or its operation
// ends (Spend), and is refused as replayed everywhere else.

package intent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Nonces is the directory of nonce records (0700, files 0600).
type Nonces struct {
	Dir string
}

// nonceRecord is one used nonce.
type nonceRecord struct {
	Digest   string    `json:"digest"`
	Workflow string    `json:"workflow"`
	Action   string    `json:"action"`
	First    time.Time `json:"first"`
	Expires  time.Time `json:"expires"`
	Spent    time.Time `json:"spent,omitzero"`
}

var nonceRE = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

func (n Nonces) path(nonce string) (string, error) {
	if !nonceRE.MatchString(nonce) {
		return "", refuse(Malformed, "nonce %q is not 16 to 64 lowercase hex digits", nonce)
	}
	return filepath.Join(n.Dir, nonce+".json"), nil
}

// Claim records that workflow acts on v now. The same intent presented
// again by the same workflow (a retry, the next step of the operation) is
// accepted; by another workflow, with other content under the same nonce,
// or after Spend, it is refused as replayed.
func (n Nonces) Claim(s *Signed, v *Verified, workflow string, now time.Time) error {
	p, err := n.path(v.Nonce)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return fmt.Errorf("intent records %s: %w", n.Dir, err)
	}
	rec := nonceRecord{Digest: s.Digest(), Workflow: workflow, Action: v.Action, First: now.UTC(), Expires: v.Expires}
	err = writeNew(p, rec)
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	cur, err := readRecord(p)
	if err != nil {
		return err
	}
	switch {
	case cur.Digest != rec.Digest:
		return refuse(Replayed, "nonce %s was used at %s by another intent", v.Nonce, cur.First.Format(time.RFC3339))
	case cur.Workflow != workflow:
		return refuse(Replayed, "this intent was presented at %s by workflow %s, not %s: an intent serves one workflow", cur.First.Format(time.RFC3339), cur.Workflow, workflow)
	case !cur.Spent.IsZero():
		return refuse(Replayed, "this intent's %s ended at %s; sign a new request", cur.Action, cur.Spent.Format(time.RFC3339))
	}
	return nil
}

// Has reports whether the node holds a record of acting on nonce (a
// malformed nonce has none).
func (n Nonces) Has(nonce string) bool {
	p, err := n.path(nonce)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// Spend marks the intent's operation as ended: no later request may use it.
// Spending an intent never claimed records it as spent.
func (n Nonces) Spend(v *Verified, s *Signed, workflow string, now time.Time) error {
	p, err := n.path(v.Nonce)
	if err != nil {
		return err
	}
	cur, err := readRecord(p)
	if errors.Is(err, os.ErrNotExist) {
		cur = nonceRecord{Digest: s.Digest(), Workflow: workflow, Action: v.Action, First: now.UTC(), Expires: v.Expires}
	} else if err != nil {
		return err
	}
	if !cur.Spent.IsZero() {
		return nil
	}
	cur.Spent = now.UTC()
	return replace(p, cur)
}

// Prune removes the records of intents expired before now: Verify refuses
// those by their expiry, so their nonces need no keeping. A record whose
// operation has a way back (keep says so of its action) and has not ended
// (not spent) is kept however long ago it expired: the node undoes what it
// began under it (a rollback, a revert) only while it holds the record.
func (n Nonces) Prune(now time.Time, keep func(action string) bool) (int, error) {
	entries, err := os.ReadDir(n.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range entries {
		p := filepath.Join(n.Dir, e.Name())
		rec, err := readRecord(p)
		if err != nil || !now.After(rec.Expires.Add(time.Minute)) || rec.Spent.IsZero() && keep != nil && keep(rec.Action) {
			continue
		}
		if os.Remove(p) == nil {
			removed++
		}
	}
	return removed, nil
}

func readRecord(p string) (nonceRecord, error) {
	var rec nonceRecord
	b, err := os.ReadFile(p)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("intent record %s: %w", p, err)
	}
	return rec, nil
}

// writeNew creates p with rec, atomically and only if p does not exist:
// the record is written whole to a temporary file, then linked into place.
func writeNew(p string, rec nonceRecord) error {
	tmp, err := writeTemp(p, rec)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, os.ErrExist) {
			return os.ErrExist
		}
		return fmt.Errorf("intent record %s: %w", p, err)
	}
	return syncDir(filepath.Dir(p))
}

func replace(p string, rec nonceRecord) error {
	tmp, err := writeTemp(p, rec)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("intent record %s: %w", p, err)
	}
	return syncDir(filepath.Dir(p))
}

func writeTemp(p string, rec nonceRecord) (string, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".nonce-*")
	if err != nil {
		return "", fmt.Errorf("intent record: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("intent record %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
