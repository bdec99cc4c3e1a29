package custody

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"adoption/config"
)

// Converge writes the mesh's content to a declared path, atomically (a
// temporary file in the same directory, fsynced, renamed over the path),
// with the given mode and owner. The custody copy of what was found stays,
// so Restore can put it back. Writing what is already there is a no-op.
func (s *Store) Converge(p string, content []byte, mode os.FileMode, uid, gid int) error {
	if cur := s.Inspect(p); cur.Exists && cur.Link == "" && cur.SHA256 == sha(content) && cur.Mode == config.FormatMode(mode) && cur.UID == uid && cur.GID == gid {
		return nil
	}
	return s.write(p, content, mode, uid, gid)
}

// Restore puts back, byte for byte and with its mode and owner, what was
// found at the path when it was taken into custody; a path where nothing was
// found is removed again.
func (s *Store) Restore(p string) error {
	s.mu.Lock()
	idx, err := s.index()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	rec, ok := idx[p]
	if !ok {
		return fmt.Errorf("%s is not in custody: nothing to restore it from", p)
	}
	if !rec.Found {
		name, err := rel(p)
		if err != nil {
			return err
		}
		root, err := s.openRoot()
		if err != nil {
			return err
		}
		defer root.Close()
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s (absent when found): %w", p, err)
		}
		return nil
	}
	if rec.Link != "" {
		return s.restoreLink(p, rec)
	}
	b, err := s.Blob(rec.SHA256)
	if err != nil {
		return fmt.Errorf("custody copy of %s: %w", p, err)
	}
	if sha(b) != rec.SHA256 {
		return fmt.Errorf("custody copy of %s is corrupt (sha256 %s, recorded %s); refusing to restore it", p, sha(b), rec.SHA256)
	}
	// Set-id and sticky bits are kept exactly as found: the record's mode
	// is read as chmod(1) writes it, not as Go's permission bits alone.
	mode, err := config.ParseMode(rec.Mode)
	if err != nil {
		return fmt.Errorf("custody record of %s has mode %q: %w", p, rec.Mode, err)
	}
	if cur := s.Inspect(p); cur.Exists && cur.Link == "" && cur.SHA256 == rec.SHA256 && cur.Mode == config.FormatMode(mode) && cur.UID == rec.UID && cur.GID == rec.GID {
		return nil
	}
	return s.write(p, b, mode, rec.UID, rec.GID)
}

// restoreLink puts a found symlink back as a symlink with its target and
// owner: created beside the path and renamed over it, so the path is never
// missing and nothing is written through a link.
func (s *Store) restoreLink(p string, rec Record) error {
	if cur := s.Inspect(p); cur.Exists && cur.Link == rec.Link && cur.UID == rec.UID && cur.GID == rec.GID {
		return nil
	}
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	dir := path.Dir(name)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", p, err)
	}
	tmp := tempName(name)
	if err := root.Symlink(rec.Link, tmp); err != nil {
		return fmt.Errorf("restore symlink %s -> %s: %w", p, rec.Link, err)
	}
	if err := root.Lchown(tmp, rec.UID, rec.GID); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("chown symlink %s to %d:%d: %w", p, rec.UID, rec.GID, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("replace %s with its symlink: %w", p, err)
	}
	return nil
}

// tempName is a fresh name beside name for an atomic replace.
func tempName(name string) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return path.Join(path.Dir(name), "."+path.Base(name)+".adoption-"+hex.EncodeToString(rnd[:]))
}

// write replaces the file at p through os.Root, so neither ".." nor a
// symlink in the path can lead outside node.root.
func (s *Store) write(p string, content []byte, mode os.FileMode, uid, gid int) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, err := s.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	dir := path.Dir(name)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", p, err)
	}
	tmp := tempName(name)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	cleanup := func() { _ = root.Remove(tmp) }
	if _, err := f.Write(content); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("write %s: %w", p, err)
	}
	// Owner before mode: chown clears set-id bits.
	if err := f.Chown(uid, gid); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("chown %s to %d:%d: %w", p, uid, gid, err)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		cleanup()
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		cleanup()
		return err
	}
	if err := f.Close(); err != nil {
		cleanup()
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		cleanup()
		return fmt.Errorf("replace %s: %w", p, err)
	}
	return nil
}

// Record returns the custody record of a path.
func (s *Store) Record(p string) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.index()
	if err != nil {
		return Record{}, false, err
	}
	r, ok := idx[p]
	return r, ok, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Retake records what is at the path now as the new custody copy: the
// operator accepted a drift, so a later rollback or revert restores this.
func (s *Store) Retake(p string) (Record, error) {
	s.mu.Lock()
	if err := s.ensure(); err != nil {
		s.mu.Unlock()
		return Record{}, err
	}
	idx, err := s.index()
	if err == nil {
		delete(idx, p)
		err = s.writeIndex(idx)
	}
	s.mu.Unlock()
	if err != nil {
		return Record{}, err
	}
	return s.Take(p)
}
