// Package custody keeps the files the mesh found at the paths it declares.
// Their bytes are copied into a node-local store under state_dir (0600 blobs
// named by sha256), with their extended attributes; only the metadata
// (path, keyed digest, size, mode, owner, attribute names) leaves the node,
// so secrets in those files never reach a workflow history. Every path
// under node.root is reached through beneath.go.
package custody

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"adoption/config"
	"adoption/nodestate"
)

// FileState is what is at a declared path now.
type FileState struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Size   int64  `json:"size,omitempty"`
	// SHA256 is the plain hash of the content (of a symlink: of its
	// target). It names the custody blob and stays on the node: a short
	// secret could be guessed from it, so the activities clear it before a
	// result reaches a workflow history, where Digest stands for it. A
	// record a workflow sends back with SHA256 set names the mesh's
	// content by the plan's hash (a migrated module's file).
	SHA256 string `json:"sha256,omitempty"`
	// Digest is HMAC-SHA256 of the same bytes, keyed with the node's own
	// key (state_dir/custody.key): comparable on the node, not guessable
	// from the history.
	Digest string `json:"digest,omitempty"`
	Mode   string `json:"mode,omitempty"` // octal mode with set-id and sticky bits, e.g. "0644", "4755"
	// Link is the target of a symlink found at the path: it is recorded
	// and restored as a symlink, never followed.
	Link string `json:"link,omitempty"`
	// Xattrs names a regular file's extended attributes as found, sorted
	// and comma-separated (a string keeps FileState comparable): POSIX
	// ACLs, file capabilities, security labels, user attributes. Their
	// values stay on the node, in the custody blob named by XattrSHA256
	// (cleared by Public, like SHA256), and a restore sets them again.
	Xattrs      string `json:"xattrs,omitempty"`
	XattrSHA256 string `json:"xattr_sha256,omitempty"`
	UID         int    `json:"uid"`
	GID         int    `json:"gid"`
	Error       string `json:"error,omitempty"` // why it could not be read (a FIFO, a device, too large, escapes the root...)
}

// MaxFileSize is the largest file custody takes: declared files are
// configuration, and a huge one is a mistake (or an attack on the disk
// under state_dir), refused with a clear reason.
const MaxFileSize = 16 << 20

// Public is the state as a workflow history may hold it: no plain hash.
func (f FileState) Public() FileState {
	f.SHA256, f.XattrSHA256 = "", ""
	return f
}

// Record is a file taken into custody: its state when found. Found=false
// records that nothing was at the path, so a rollback knows to remove it.
type Record struct {
	FileState
	Found bool `json:"found"`
	// Base is the plain hash of the custody blob of the file as first
	// found, set once a drift was accepted (Retake): the per-key merges
	// keep it as their base, so a key the node changed since it was found
	// stays a conflict. An empty blob stands for a file found absent.
	// Public clears it, like SHA256.
	Base string `json:"base,omitempty"`
}

// Public is the record as a workflow history may hold it: no plain hash.
func (r Record) Public() Record {
	r.FileState, r.Base = r.FileState.Public(), ""
	return r
}

// Store is the custody store of one node.
type Store struct {
	nodeRoot string
	stateDir *nodestate.Dir
	dir      string // state_dir/custody
	keyPath  string // state_dir/custody.key
	mu       sync.Mutex
	keyMu    sync.Mutex
	key      []byte // loaded once found
}

// New names the custody store under stateDir for files under nodeRoot. It
// creates nothing until the first Take, so inspecting stays read-only.
func New(nodeRoot, stateDir string) *Store {
	return &Store{nodeRoot: nodeRoot, stateDir: nodestate.New(stateDir), dir: filepath.Join(stateDir, "custody"),
		keyPath: filepath.Join(stateDir, "custody.key")}
}

func (s *Store) ensure() error {
	if err := s.stateDir.Ensure(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("custody store %s: %w", s.dir, err)
	}
	_, err := s.ensureKey()
	return err
}

// rel turns a declared absolute path into a name relative to the node root,
// refusing anything that is not clean; beneathAt then refuses any symlink
// on the way (beneath.go).
func rel(path string) (string, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.Contains(path, "..") || path == "/" {
		return "", fmt.Errorf("declared path %q must be a clean absolute path under node.root", path)
	}
	return strings.TrimPrefix(path, "/"), nil
}

// Inspect reports the file at path without changing anything.
func (s *Store) Inspect(path string) FileState {
	st, _, _ := s.read(path, nil)
	return st
}

// read records what is at path, copying a regular file's bytes to w when w
// is not nil, and returns its extended attributes. A missing file is not
// an error. It never blocks and never follows a symlink in any component
// (beneath.go): the last component is looked at with fstatat first, a
// symlink is recorded by its target, only a regular file is opened (with
// O_NONBLOCK, and checked again with fstat, so a FIFO swapped in between
// cannot hang the agent), and a file above MaxFileSize is refused.
func (s *Store) read(path string, w io.Writer) (FileState, xattrs, error) {
	st := FileState{Path: path}
	fail := func(err error) (FileState, xattrs, error) {
		st.Error = err.Error()
		return st, nil, err
	}
	name, err := rel(path)
	if err != nil {
		return fail(err)
	}
	root, err := openNodeRoot(s.nodeRoot)
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	d, err := root.dir(path, name, false)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil, nil
	}
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	base := pathpkg.Base(name)
	var ls unix.Stat_t
	err = unix.Fstatat(int(d.Fd()), base, &ls, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return st, nil, nil
	}
	if err != nil {
		return fail(fmt.Errorf("lstat %s under %s: %w", path, s.nodeRoot, err))
	}
	if ls.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(int(d.Fd()), base, buf)
		if err != nil {
			return fail(fmt.Errorf("readlink %s: %w", path, err))
		}
		target := string(buf[:n])
		st.Exists, st.Link, st.Mode = true, target, "0777"
		st.SHA256, st.Digest = sha(linkBytes(target)), s.digest(linkBytes(target))
		st.UID, st.GID = int(ls.Uid), int(ls.Gid)
		return st, nil, nil
	}
	f, info, err := openRegular(root, path, name, MaxFileSize)
	if err != nil {
		return fail(err)
	}
	if f == nil {
		return st, nil, nil // removed between the two looks
	}
	defer f.Close()
	h := sha256.New()
	var mac hash.Hash
	dst := []io.Writer{h}
	if key := s.hmacKey(); key != nil {
		mac = hmac.New(sha256.New, key)
		dst = append(dst, mac)
	}
	if w != nil {
		dst = append(dst, w)
	}
	n, err := io.Copy(io.MultiWriter(dst...), io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", path, err))
	}
	if n > MaxFileSize {
		return fail(fmt.Errorf("%s grew past %d bytes while being read; custody takes configuration files only", path, MaxFileSize))
	}
	x, err := readXattrs(int(f.Fd()))
	if err != nil {
		return fail(fmt.Errorf("%s: %w; custody cannot record it exactly", path, err))
	}
	st.Exists, st.Size = true, n
	st.SHA256 = hex.EncodeToString(h.Sum(nil))
	if mac != nil {
		st.Digest = digestPrefix + hex.EncodeToString(mac.Sum(nil))
	}
	st.Mode = config.FormatMode(info.Mode())
	st.UID, st.GID = owner(info)
	if len(x) > 0 {
		st.Xattrs, st.XattrSHA256 = strings.Join(x.names(), ","), sha(x.encode())
	}
	return st, x, nil
}

// acceptable refuses what custody cannot hold exactly: anything but a
// regular file (a FIFO would block a reader, a device would stream
// forever), and a regular file above limit.
func acceptable(path string, info fs.FileInfo, limit int64) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s, not a regular file or a symlink; custody refuses it (declare only files, or remove it from the configuration)", path, kind(info.Mode()))
	}
	if info.Size() > limit {
		return fmt.Errorf("%s is %d bytes, above custody's limit of %d; custody takes configuration files only", path, info.Size(), limit)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return m.Type().String()
}

func owner(info fs.FileInfo) (int, int) {
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid), int(sys.Gid)
	}
	return 0, 0
}

// linkBytes is what a symlink's hash covers: its target, marked so that a
// file whose content is the same text hashes differently.
func linkBytes(target string) []byte { return []byte("symlink\x00" + target) }

// Take copies the file at path into custody and records it. It is
// idempotent: a path already in custody keeps its first record, because that
// is what was found at adoption; a retried activity must not replace it with
// something written since.
func (s *Store) Take(path string) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensure(); err != nil {
		return Record{}, err
	}
	idx, err := s.index()
	if err != nil {
		return Record{}, err
	}
	if r, ok := idx[path]; ok {
		return r, nil
	}
	tmp, err := os.CreateTemp(s.dir, ".blob-*")
	if err != nil {
		return Record{}, fmt.Errorf("custody store: %w", err)
	}
	defer os.Remove(tmp.Name())
	st, x, err := s.read(path, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Record{}, fmt.Errorf("take custody of %s: %w", path, err)
	}
	rec := Record{FileState: st, Found: st.Exists}
	if st.Exists && st.Link == "" {
		if err := os.Chmod(tmp.Name(), 0o600); err != nil {
			return Record{}, err
		}
		if err := os.Rename(tmp.Name(), s.blobPath(st.SHA256)); err != nil {
			return Record{}, fmt.Errorf("custody store: %w", err)
		}
		if len(x) > 0 {
			if err := s.putBlob(x.encode()); err != nil {
				return Record{}, fmt.Errorf("custody store: the extended attributes of %s: %w", path, err)
			}
		}
	}
	idx[path] = rec
	return rec, s.writeIndex(idx)
}

// putBlob keeps b under its sha256, 0600, fsynced, with the directory
// fsynced after the rename.
func (s *Store) putBlob(b []byte) error {
	sum := sha(b)
	if _, err := os.Stat(s.blobPath(sum)); err == nil {
		return nil
	}
	return nodestate.WriteFileAtomic(s.blobPath(sum), b, 0o600)
}

// Blob returns the bytes kept for a hash. It is for node-local use only
// (restore, drift); never send the result to Temporal.
func (s *Store) Blob(sum string) ([]byte, error) {
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("custody: %q is not a sha256", sum)
	}
	return os.ReadFile(s.blobPath(sum))
}

// Records lists the custody records, sorted by path.
func (s *Store) Records() ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, err := s.index()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(idx))
	for _, r := range idx {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Store) blobPath(sum string) string { return filepath.Join(s.dir, sum) }

func (s *Store) indexPath() string { return filepath.Join(s.dir, "index.json") }

func (s *Store) index() (map[string]Record, error) {
	idx := map[string]Record{}
	b, err := os.ReadFile(s.indexPath())
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("custody index %s is corrupt: %w", s.indexPath(), err)
	}
	return idx, nil
}

func (s *Store) writeIndex(idx map[string]Record) error {
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if err := nodestate.WriteFileAtomic(s.indexPath(), b, 0o600); err != nil {
		return err
	}
	return s.syncStore()
}

// syncStore fsyncs the store's directory, so that the blobs and the index
// renamed into it outlive a crash: the record is what a restore trusts.
func (s *Store) syncStore() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync the custody store %s: %w", s.dir, err)
	}
	return nil
}
