// This file holds the one way custody reaches a path under node.root:
// openat2(2) with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from a descriptor of
// the root, for every component, the last one with O_NOFOLLOW too. Reading,
// writing, renaming and removing a declared file, and reading a module's
// env_file, all open through beneathAt; nothing else opens a path there.
package custody

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveBeneath is the rule for every path under node.root: never leave
// the root (not by "..", not by an absolute link), never follow a symlink
// in any component. With node.root at / a relative link in an
// intermediate directory would otherwise redirect a write anywhere on the
// host.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS

// beneathAt opens name (relative, clean) under the directory dirfd with
// resolveBeneath and O_NOFOLLOW|O_CLOEXEC added to flags. It is the only
// caller of openat2 in the package: the rule is decided here once.
func beneathAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveBeneath}
	for range 8 {
		fd, err := unix.Openat2(dirfd, name, &how)
		if err == unix.EINTR || err == unix.EAGAIN { // EAGAIN: a rename raced the lookup; try again
			continue
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// nodeRoot is node.root opened for one operation.
type nodeRoot struct {
	path string // as configured, for messages
	fd   int    // O_PATH|O_DIRECTORY
}

// openNodeRoot opens node.root itself. Its own path is the operator's
// (configured, followed as written); everything beneath it is held to
// resolveBeneath.
func openNodeRoot(root string) (*nodeRoot, error) {
	if root == "" {
		return nil, errors.New("node.root is empty: set node.root in the node's configuration")
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("node.root %s: %w", root, err)
	}
	return &nodeRoot{path: root, fd: fd}, nil
}

func (r *nodeRoot) Close() error { return unix.Close(r.fd) }

// dir opens the directory holding the declared file (rel is its path
// relative to the root), as a real directory: O_DIRECTORY, read-only, so
// it can be fsynced after a rename in it. With create, missing directories
// are made one component at a time (0755), each again beneath the one
// before, so a directory planted between two steps is still refused if it
// is a link. A missing directory without create is fs.ErrNotExist.
func (r *nodeRoot) dir(declared, rel string, create bool) (*os.File, error) {
	d := path.Dir(rel)
	if d == "." {
		fd, err := beneathAt(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, fmt.Errorf("open node.root %s: %w", r.path, err)
		}
		return os.NewFile(uintptr(fd), r.path), nil
	}
	fd, err := beneathAt(r.fd, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		return os.NewFile(uintptr(fd), path.Join(r.path, d)), nil
	}
	if err != unix.ENOENT || !create {
		return nil, r.refusal(declared, d, err)
	}
	cur, err := beneathAt(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open node.root %s: %w", r.path, err)
	}
	for _, comp := range strings.Split(d, "/") {
		if err := unix.Mkdirat(cur, comp, 0o755); err == nil {
			_ = unix.Fsync(cur) // the new entry outlives a crash
		} else if err != unix.EEXIST {
			unix.Close(cur)
			return nil, fmt.Errorf("create the directory of %s under node.root %s: mkdir %s: %w", declared, r.path, comp, err)
		}
		next, err := beneathAt(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(cur)
		if err != nil {
			return nil, r.refusal(declared, d, err)
		}
		cur = next
	}
	return os.NewFile(uintptr(cur), path.Join(r.path, d)), nil
}

// refusal turns an openat2 error on the way to declared into a sentence
// that names the path, why, and what to do. For a link it names the
// component and its target, found by walking the path without following.
func (r *nodeRoot) refusal(declared, rel string, err error) error {
	// A link as the last component of a directory opened O_NOFOLLOW is
	// ENOTDIR, in the middle ELOOP: look for one whatever the error.
	if err == unix.ELOOP || err == unix.EXDEV || err == unix.ENOTDIR {
		if comp, target, ok := r.firstLink(rel); ok {
			return fmt.Errorf("%s: %s is a symlink (-> %s) under node.root %s; custody never follows a symlink beneath node.root, so a link cannot redirect a read or a write. Declare the path the link leads to, or replace the link with a real directory: %w",
				declared, "/"+comp, target, r.path, err)
		}
	}
	switch err {
	case unix.ELOOP, unix.EXDEV:
		return fmt.Errorf("%s: the path would leave node.root %s or pass through a symlink; custody refuses it: declare a path with no symlink in it: %w", declared, r.path, err)
	case unix.ENOTDIR:
		return fmt.Errorf("%s: a component of /%s under node.root %s is not a directory; custody refuses it: fix the path in the configuration or on the node: %w", declared, rel, r.path, err)
	case unix.ENOSYS:
		return fmt.Errorf("%s: the kernel lacks openat2(2) (Linux 5.6 or later): custody will not open paths under node.root %s without RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; upgrade the kernel, or allow openat2 in a seccomp filter that denies it: %w", declared, r.path, err)
	case unix.ENOENT:
		return fmt.Errorf("%s: /%s does not exist under node.root %s: %w", declared, rel, r.path, os.ErrNotExist)
	}
	return fmt.Errorf("%s: open /%s under node.root %s: %w", declared, rel, r.path, err)
}

// firstLink finds the first component of rel that is a symlink, and its
// target, looking at each with fstatat(AT_SYMLINK_NOFOLLOW) from the
// directory before it.
func (r *nodeRoot) firstLink(rel string) (string, string, bool) {
	cur, err := unix.Dup(r.fd)
	if err != nil {
		return "", "", false
	}
	defer func() { unix.Close(cur) }()
	comps := strings.Split(rel, "/")
	for i, comp := range comps {
		var st unix.Stat_t
		if err := unix.Fstatat(cur, comp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return "", "", false
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(cur, comp, buf)
			if err != nil {
				return strings.Join(comps[:i+1], "/"), "?", true
			}
			return strings.Join(comps[:i+1], "/"), string(buf[:n]), true
		}
		next, err := beneathAt(cur, comp, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return "", "", false
		}
		unix.Close(cur)
		cur = next
	}
	return "", "", false
}

// syncDir makes a rename, a link or an unlink in d durable: without it a
// crash can bring back the old name after the new content was reported
// written.
func syncDir(d *os.File, declared string) error {
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%s: fsync its directory %s after the change: %w", declared, d.Name(), err)
	}
	return nil
}

// openRegular opens the declared file for reading as custody reads: a
// regular file only, opened non-blocking (a FIFO swapped in cannot hang the
// agent), checked with fstat, and no larger than limit. It returns nil and
// no error when nothing is at the path. The caller closes dir and f.
func openRegular(root *nodeRoot, declared, rel string, limit int64) (f *os.File, info os.FileInfo, err error) {
	d, err := root.dir(declared, rel, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	// Look before opening: opening a device can act (a tape rewinds, a
	// terminal becomes the controlling one). fstat after opening decides.
	var ls unix.Stat_t
	err = unix.Fstatat(int(d.Fd()), path.Base(rel), &ls, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lstat %s under node.root %s: %w", declared, root.path, err)
	}
	if ls.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, nil, fmt.Errorf("%s is a symlink under node.root %s; it is not followed: name the file it points to", declared, root.path)
	}
	if ls.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, fmt.Errorf("%s is a %s, not a regular file; refused without opening it (declare only regular files)", declared, kindOf(ls.Mode))
	}
	if ls.Size > limit {
		return nil, nil, fmt.Errorf("%s is %d bytes, above custody's limit of %d; refused without reading it: declare a smaller file", declared, ls.Size, limit)
	}
	fd, err := beneathAt(int(d.Fd()), path.Base(rel), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err == unix.ENOENT {
		return nil, nil, nil
	}
	if err == unix.ELOOP {
		return nil, nil, fmt.Errorf("%s is a symlink under node.root %s; it is not followed: name the file it points to", declared, root.path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s under node.root %s: %w", declared, root.path, err)
	}
	f = os.NewFile(uintptr(fd), path.Join(root.path, rel))
	info, err = f.Stat()
	if err == nil {
		err = acceptable(declared, info, limit)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// ReadFile reads a file under node.root held to custody's rules: beneath
// the root with no symlink in any component, a regular file only (a FIFO,
// a device such as /dev/zero or a directory is refused at once, without
// blocking), at most limit bytes. A module's env_file is read with it.
func ReadFile(root, declared string, limit int64) ([]byte, error) {
	rel, err := rel(declared)
	if err != nil {
		return nil, err
	}
	r, err := openNodeRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, _, err := openRegular(r, declared, rel, limit)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("%s does not exist under node.root %s", declared, root)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", declared, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes while being read; refused", declared, limit)
	}
	return b, nil
}

// kindOf names a file type from stat's mode, as a refusal says it.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "regular file"
}
