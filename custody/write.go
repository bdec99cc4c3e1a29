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

	"golang.org/x/sys/unix"

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
	return s.write(p, content, mode, uid, gid, nil)
}

// Restore puts back exactly what was found at the path when it was taken
// into custody: its bytes, its owner, its mode with set-id and sticky bits,
// and its extended attributes (ACLs, file capabilities, labels). A path
// where nothing was found is removed again. What the kernel would not set
// (a capability the agent lacks) is refused by name and the path is left
// as it is, never restored in part.
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
		return s.remove(p)
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
	x := xattrs{}
	if rec.XattrSHA256 != "" {
		xb, err := s.Blob(rec.XattrSHA256)
		if err == nil && sha(xb) != rec.XattrSHA256 {
			err = fmt.Errorf("corrupt (sha256 %s, recorded %s)", sha(xb), rec.XattrSHA256)
		}
		if err == nil {
			x, err = decodeXattrs(xb)
		}
		if err != nil {
			return fmt.Errorf("custody copy of the extended attributes of %s (%s): %v; refusing to restore it in part", p, rec.Xattrs, err)
		}
	}
	// Set-id and sticky bits are kept exactly as found: the record's mode
	// is read as chmod(1) writes it, not as Go's permission bits alone.
	mode, err := config.ParseMode(rec.Mode)
	if err != nil {
		return fmt.Errorf("custody record of %s has mode %q: %w", p, rec.Mode, err)
	}
	if cur := s.Inspect(p); cur.Exists && cur.Link == "" && cur.SHA256 == rec.SHA256 && cur.Mode == config.FormatMode(mode) &&
		cur.UID == rec.UID && cur.GID == rec.GID && cur.XattrSHA256 == rec.XattrSHA256 {
		return nil
	}
	return s.write(p, b, mode, rec.UID, rec.GID, x)
}

// remove takes away what is at p (absent when found), and makes the
// removal durable.
func (s *Store) remove(p string) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, err := openNodeRoot(s.nodeRoot)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := root.dir(p, name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s (absent when found): %w", p, err)
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), path.Base(name), 0); err != nil {
		if err == unix.ENOENT {
			return nil
		}
		return fmt.Errorf("remove %s (absent when found): %w", p, err)
	}
	return syncDir(d, p)
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
	root, err := openNodeRoot(s.nodeRoot)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := root.dir(p, name, true)
	if err != nil {
		return err
	}
	defer d.Close()
	dfd, tmp := int(d.Fd()), tempName(path.Base(name))
	if err := unix.Symlinkat(rec.Link, dfd, tmp); err != nil {
		return fmt.Errorf("restore symlink %s -> %s: %w", p, rec.Link, err)
	}
	if err := unix.Fchownat(dfd, tmp, rec.UID, rec.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("chown symlink %s to %d:%d: %w", p, rec.UID, rec.GID, err)
	}
	if err := unix.Renameat(dfd, tmp, dfd, path.Base(name)); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("replace %s with its symlink: %w", p, err)
	}
	return syncDir(d, p)
}

// tempName is a fresh name beside name for an atomic replace.
func tempName(name string) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return path.Join(path.Dir(name), "."+path.Base(name)+".adoption-"+hex.EncodeToString(rnd[:]))
}

// write replaces the file at p: a temporary file beside it, opened beneath
// node.root (beneath.go), given its bytes, owner, mode and extended
// attributes, checked to hold exactly those (the kernel drops a setgid bit
// silently without CAP_FSETID), fsynced, renamed over p, and the directory
// fsynced. x nil leaves a new file's attributes as the kernel made them
// (the mesh's content); non-nil makes them exactly x (a restore).
func (s *Store) write(p string, content []byte, mode os.FileMode, uid, gid int, x xattrs) error {
	name, err := rel(p)
	if err != nil {
		return err
	}
	root, err := openNodeRoot(s.nodeRoot)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := root.dir(p, name, true)
	if err != nil {
		return err
	}
	defer d.Close()
	dfd, base := int(d.Fd()), path.Base(name)
	tmp := tempName(base)
	fd, err := beneathAt(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: create a temporary file beside it: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), path.Join(d.Name(), tmp))
	fail := func(err error) error {
		f.Close()
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	if _, err := f.Write(content); err != nil {
		return fail(fmt.Errorf("write %s: %w", p, err))
	}
	// Owner before mode: chown clears set-id bits. Attributes after both:
	// chown clears security.capability, and an ACL's mask is the group bits.
	if err := f.Chown(uid, gid); err != nil {
		return fail(fmt.Errorf("chown %s to %d:%d: %w", p, uid, gid, err))
	}
	if err := f.Chmod(mode); err != nil {
		return fail(fmt.Errorf("chmod %s: %w", p, err))
	}
	if x != nil {
		if err := setXattrs(fd, p, x); err != nil {
			return fail(fmt.Errorf("%w; %s was left as it was", err, p))
		}
	}
	if err := exact(f, p, mode, uid, gid, x); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("replace %s: %w", p, err)
	}
	return syncDir(d, p)
}

// exact checks the written file against what was asked, before it
// replaces anything: the kernel does not fail a chmod that drops a setgid
// bit, it drops the bit.
func exact(f *os.File, p string, mode os.FileMode, uid, gid int, x xattrs) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	gotUID, gotGID := owner(info)
	if got, want := config.FormatMode(info.Mode()), config.FormatMode(mode); got != want {
		why := "the kernel did not keep the mode asked for"
		switch {
		case mode&os.ModeSetgid != 0 && info.Mode()&os.ModeSetgid == 0 && !hasCap(unix.CAP_FSETID):
			why = fmt.Sprintf("the kernel dropped the setgid bit: group %d is not the agent's and the agent lacks CAP_FSETID; add CAP_FSETID to CapabilityBoundingSet in adopt-agent.service and adopt-watchdog.service", gid)
		case mode&(os.ModeSetuid|os.ModeSetgid) != 0 && info.Mode()&(os.ModeSetuid|os.ModeSetgid) != mode&(os.ModeSetuid|os.ModeSetgid):
			why = fmt.Sprintf("the kernel dropped a set-id bit (CAP_FSETID held: %v, CAP_FOWNER held: %v; both belong in CapabilityBoundingSet of adopt-agent.service and adopt-watchdog.service), or the filesystem under node.root is mounted nosuid", hasCap(unix.CAP_FSETID), hasCap(unix.CAP_FOWNER))
		}
		return fmt.Errorf("%s: would be mode %s, not %s as asked: %s; refused, %s was left as it was", p, got, want, why, p)
	}
	if gotUID != uid || gotGID != gid {
		return fmt.Errorf("%s: would be owned by %d:%d, not %d:%d as asked (CAP_CHOWN effective: %v); refused, %s was left as it was", p, gotUID, gotGID, uid, gid, hasCap(unix.CAP_CHOWN), p)
	}
	if x == nil {
		return nil
	}
	have, err := readXattrs(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if why, ok := equalXattrs(x, have); !ok {
		return fmt.Errorf("%s: %s; refused, %s was left as it was", p, why, p)
	}
	return nil
}

// hasCap reports whether the agent holds capability c in its effective
// set, for a refusal to say what is missing.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
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
// The copy as first found stays the per-key merges' base (Record.Base).
func (s *Store) Retake(p string) (Record, error) {
	s.mu.Lock()
	if err := s.ensure(); err != nil {
		s.mu.Unlock()
		return Record{}, err
	}
	idx, err := s.index()
	old, had := idx[p]
	base := old.Base
	if err == nil && had && base == "" {
		switch {
		case old.Found && old.Link == "":
			base = old.SHA256
		case !old.Found:
			base = sha(nil)
			err = s.putBlob(nil)
		}
	}
	if err == nil {
		delete(idx, p)
		err = s.writeIndex(idx)
	}
	s.mu.Unlock()
	if err != nil {
		return Record{}, err
	}
	rec, err := s.Take(p)
	if err != nil || base == "" {
		return rec, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if idx, err = s.index(); err != nil {
		return Record{}, err
	}
	rec = idx[p]
	rec.Base = base
	idx[p] = rec
	return rec, s.writeIndex(idx)
}

// Link makes p a symlink to target (owned by root), for a path taken into
// custody first: Restore takes it away again, or puts back what was found.
// A link already there with that target is left as it is.
func (s *Store) Link(p, target string) error {
	if _, ok, err := s.Record(p); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s is not in custody: refusing to replace it", p)
		}
		return err
	}
	return s.restoreLink(p, Record{FileState: FileState{Path: p, Link: target}})
}

// Remove takes away what is at p (a link that enables a unit), for a path
// taken into custody first: Restore puts back what was found.
func (s *Store) Remove(p string) error {
	if _, ok, err := s.Record(p); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s is not in custody: refusing to remove it", p)
		}
		return err
	}
	return s.remove(p)
}
