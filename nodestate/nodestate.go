// Package nodestate keeps the node-local markers under node.state_dir: that
// the node is adopted (so nothing ever loads the mesh's own table on it, even
// when Temporal is unreachable), and later the pre-flip snapshot and the
// watchdog's deadline.
package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Dir is a node's state directory, created 0700.
type Dir struct{ path string }

// New names the state directory; nothing is created until something is
// written, so read-only commands (probe) leave the node untouched.
func New(path string) *Dir { return &Dir{path: path} }

// Ensure creates the directory if needed and tightens it to 0700.
func (d *Dir) Ensure() error {
	if err := os.MkdirAll(d.path, 0o700); err != nil {
		return fmt.Errorf("state_dir %s: %w (check node.state_dir)", d.path, err)
	}
	if err := os.Chmod(d.path, 0o700); err != nil {
		return fmt.Errorf("state_dir %s: %w", d.path, err)
	}
	return nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Marker records that a node is adopted.
type Marker struct {
	Node      string    `json:"node"`
	AdoptedAt time.Time `json:"adopted_at"`
	Workflow  string    `json:"workflow"`
}

const adoptedFile = "adopted.json"

// MarkAdopted writes the adopted marker atomically. Writing it again with the
// same node keeps the first adoption time, so a retried activity is harmless.
func (d *Dir) MarkAdopted(m Marker) error {
	if old, ok, err := d.Adopted(); err != nil {
		return err
	} else if ok {
		if old.Node != m.Node {
			return fmt.Errorf("state_dir %s is already adopted by node %q, not %q: check node.name and node.state_dir", d.path, old.Node, m.Node)
		}
		return nil
	}
	if err := d.Ensure(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(d.path, adoptedFile), b, 0o600)
}

// Adopted reads the adopted marker.
func (d *Dir) Adopted() (Marker, bool, error) {
	var m Marker
	ok, err := d.readJSON(adoptedFile, "adopted marker", &m)
	return m, ok, err
}

// readJSON decodes the state file name into v; ok is false when there is
// none. what names the file in the error of a corrupt one.
func (d *Dir) readJSON(name, what string, v any) (ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(d.path, name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s %s is corrupt: %w", what, filepath.Join(d.path, name), err)
	}
	return true, nil
}

// ClearAdopted removes the marker (after a release).
func (d *Dir) ClearAdopted() error {
	err := os.Remove(filepath.Join(d.path, adoptedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// WriteFileAtomic writes b to path through a temporary file in the same
// directory, fsynced and renamed, so a crash leaves either the old or the new
// file, never a torn one.
func WriteFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
