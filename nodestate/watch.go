package nodestate

// This file holds the record of the watch the node's agent runs: the
// request that authorised its loop, as the loop wrote it (package
// activities/watch decides what it holds), so that an agent restarted
// while Temporal is unreachable resumes its checks.

import (
	"errors"
	"os"
	"path/filepath"
)

const watchFile = "watch.json"

// Watch reads the watch record; ok is false when there is none.
func (d *Dir) Watch() (b []byte, ok bool, err error) {
	b, err = os.ReadFile(filepath.Join(d.path, watchFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// SetWatch writes the watch record atomically, 0600.
func (d *Dir) SetWatch(b []byte) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(d.path, watchFile), b, 0o600)
}

// ClearWatch removes the watch record.
func (d *Dir) ClearWatch() error {
	err := os.Remove(filepath.Join(d.path, watchFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
