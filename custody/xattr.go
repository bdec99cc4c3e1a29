// This file holds a found file's extended attributes: POSIX ACLs
// (system.posix_acl_access), file capabilities (security.capability),
// SELinux labels and user/trusted attributes. They are read from the open
// file, kept node-locally as one blob, set again on restore, and checked
// after setting: a restore is exact or refused, never silently partial.
package custody

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// xattrs maps an attribute's name to its raw value.
type xattrs map[string][]byte

// names lists the attributes, sorted.
func (x xattrs) names() []string {
	out := make([]string, 0, len(x))
	for n := range x {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// encode is the attributes' canonical bytes (JSON sorts the names), the
// content of their custody blob; nil for none.
func (x xattrs) encode() []byte {
	if len(x) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string][]byte(x))
	return b
}

func decodeXattrs(b []byte) (xattrs, error) {
	x := xattrs{}
	if err := json.Unmarshal(b, (*map[string][]byte)(&x)); err != nil {
		return nil, err
	}
	return x, nil
}

// readXattrs lists and reads every attribute of the open file fd.
func readXattrs(fd int) (xattrs, error) {
	var list []byte
	for size := 1024; ; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Flistxattr(fd, buf)
		if err == unix.ERANGE && size < 1<<20 {
			continue
		}
		if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
			return xattrs{}, nil // the filesystem has none
		}
		if err != nil {
			return nil, fmt.Errorf("list extended attributes: %w", err)
		}
		list = buf[:n]
		break
	}
	out := xattrs{}
	for _, name := range strings.Split(string(bytes.TrimRight(list, "\x00")), "\x00") {
		if name == "" {
			continue
		}
		v, err := getXattr(fd, name)
		if err != nil {
			return nil, fmt.Errorf("read extended attribute %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func getXattr(fd int, name string) ([]byte, error) {
	for size := 256; ; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Fgetxattr(fd, name, buf)
		if err == unix.ERANGE && size < 1<<20 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// setXattrs makes the attributes of the open file fd exactly want:
// extra ones (an ACL inherited from the directory's default ACL) are
// removed, wanted ones set. It runs after chown and chmod: chown clears
// security.capability, and an access ACL's mask is the mode's group bits.
func setXattrs(fd int, declared string, want xattrs) error {
	have, err := readXattrs(fd)
	if err != nil {
		return fmt.Errorf("%s: %w", declared, err)
	}
	for _, n := range have.names() {
		if _, ok := want[n]; !ok {
			if err := unix.Fremovexattr(fd, n); err != nil {
				return fmt.Errorf("%s: remove extended attribute %s the found file did not have: %w; %s", declared, n, err, xattrHint(n))
			}
		}
	}
	for _, n := range want.names() {
		if err := unix.Fsetxattr(fd, n, want[n], 0); err != nil {
			return fmt.Errorf("%s: set extended attribute %s as found: %w; %s", declared, n, err, xattrHint(n))
		}
	}
	return nil
}

// xattrHint says what the agent needs to set an attribute of this kind.
func xattrHint(name string) string {
	switch {
	case name == "security.capability":
		return "file capabilities need CAP_SETFCAP in the agent's (and the watchdog's) CapabilityBoundingSet"
	case strings.HasPrefix(name, "system.posix_acl_"):
		return "a POSIX ACL needs CAP_FOWNER for a file the agent does not own, and a filesystem mounted with ACL support"
	case strings.HasPrefix(name, "trusted."):
		return "trusted.* attributes need CAP_SYS_ADMIN"
	case strings.HasPrefix(name, "security."):
		return "security.* attributes are the security module's: the label must be allowed by its policy"
	}
	return "the filesystem under node.root must support extended attributes"
}

// equalXattrs compares two attribute sets byte for byte, naming the first
// difference.
func equalXattrs(want, have xattrs) (string, bool) {
	for _, n := range want.names() {
		v, ok := have[n]
		if !ok {
			return fmt.Sprintf("extended attribute %s is missing (%s)", n, xattrHint(n)), false
		}
		if !bytes.Equal(v, want[n]) {
			return fmt.Sprintf("extended attribute %s differs from what was found (%s)", n, xattrHint(n)), false
		}
	}
	for _, n := range have.names() {
		if _, ok := want[n]; !ok {
			return fmt.Sprintf("extended attribute %s is there but was not found at adoption", n), false
		}
	}
	return "", true
}
