// Package custody keeps the files the mesh found at the paths it declares.
// Their bytes are copied into a node-local store under state_dir (0600 blobs
// named by sha256); only the metadata (path, hash, size, mode, owner) leaves
// the node, so secrets in those files never reach a workflow history.
package custody

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"adoption/nodestate"
)

// FileState is what is at a declared path now.
type FileState struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Mode   string `json:"mode,omitempty"` // octal permission bits, e.g. "0644"
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Error  string `json:"error,omitempty"` // why it could not be read (not a regular file, escapes the root...)
}

// Record is a file taken into custody: its state when found. Found=false
// records that nothing was at the path, so a rollback knows to remove it.
type Record struct {
	FileState
	Found bool `json:"found"`
}

// Store is the custody store of one node.
type Store struct {
	nodeRoot string
	stateDir *nodestate.Dir
	dir      string // state_dir/custody
	mu       sync.Mutex
}

// New names the custody store under stateDir for files under nodeRoot. It
// creates nothing until the first Take, so inspecting stays read-only.
func New(nodeRoot, stateDir string) *Store {
	return &Store{nodeRoot: nodeRoot, stateDir: nodestate.New(stateDir), dir: filepath.Join(stateDir, "custody")}
}

func (s *Store) ensure() error {
	if err := s.stateDir.Ensure(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("custody store %s: %w", s.dir, err)
	}
	return nil
}

// rel turns a declared absolute path into a name relative to the node root,
// refusing anything that is not clean: os.Root then refuses symlinks that
// lead outside the root.
func rel(path string) (string, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.Contains(path, "..") || path == "/" {
		return "", fmt.Errorf("declared path %q must be a clean absolute path under node.root", path)
	}
	return strings.TrimPrefix(path, "/"), nil
}

func (s *Store) openRoot() (*os.Root, error) {
	r, err := os.OpenRoot(s.nodeRoot)
	if err != nil {
		return nil, fmt.Errorf("node.root %s: %w", s.nodeRoot, err)
	}
	return r, nil
}

// Inspect reports the file at path without changing anything.
func (s *Store) Inspect(path string) FileState {
	st, _ := s.read(path, nil)
	return st
}

// read stats and hashes the file at path, copying its bytes to w when w is
// not nil. A missing file is not an error.
func (s *Store) read(path string, w io.Writer) (FileState, error) {
	st := FileState{Path: path}
	fail := func(err error) (FileState, error) {
		st.Error = err.Error()
		return st, err
	}
	name, err := rel(path)
	if err != nil {
		return fail(err)
	}
	root, err := s.openRoot()
	if err != nil {
		return fail(err)
	}
	defer root.Close()
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return fail(fmt.Errorf("open %s under %s: %w", path, s.nodeRoot, err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !info.Mode().IsRegular() {
		return fail(fmt.Errorf("%s is not a regular file (%s); declare files only", path, info.Mode().Type()))
	}
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, f)
	if err != nil {
		return fail(fmt.Errorf("read %s: %w", path, err))
	}
	st.Exists, st.Size = true, n
	st.SHA256 = hex.EncodeToString(h.Sum(nil))
	st.Mode = fmt.Sprintf("%04o", info.Mode().Perm())
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.UID, st.GID = int(sys.Uid), int(sys.Gid)
	}
	return st, nil
}

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
	st, err := s.read(path, tmp)
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
	if st.Exists {
		if err := os.Chmod(tmp.Name(), 0o600); err != nil {
			return Record{}, err
		}
		if err := os.Rename(tmp.Name(), s.blobPath(st.SHA256)); err != nil {
			return Record{}, fmt.Errorf("custody store: %w", err)
		}
	}
	idx[path] = rec
	return rec, s.writeIndex(idx)
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
	return nodestate.WriteFileAtomic(s.indexPath(), b, 0o600)
}
