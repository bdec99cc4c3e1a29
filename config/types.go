package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"adoption/vocab"
)

// MaxNameLen keeps a mark comment well under the kernel's 128-byte user-data
// limit (vocab.MaxNameLen).
const MaxNameLen = vocab.MaxNameLen

// ValidName reports whether s can be used as a node, module, owner or
// container name (vocab.ValidName).
func ValidName(s string) bool { return vocab.ValidName(s) }

// NameRule is the human text of the name rule, for error messages.
const NameRule = vocab.NameRule

// Port is a transport port with its protocol, written PORT/PROTO
// ("8080/tcp"); vocab.Port, named here for the many readers of a config.
type Port = vocab.Port

// ParsePort parses "PORT/PROTO" (vocab.ParsePort).
func ParsePort(s string) (Port, error) { return vocab.ParsePort(s) }

// HostPort is the port of a container's published-port key
// (vocab.HostPort).
func HostPort(key string) (Port, bool) { return vocab.HostPort(key) }

// ParsePortRange reads PORT/PROTO or FROM-TO/PROTO (vocab.ParsePortRange).
func ParsePortRange(s string) ([]Port, error) { return vocab.ParsePortRange(s) }

// ParseDeclared reads one flip.drop or flip.widen entry: PORT/PROTO or
// FROM-TO/PROTO (ParsePortRange) into ports, or, when it does not begin
// with a digit, a traffic class (NAME/PROTO or NAME, as vocab.ParseClass
// reads it) into class spellings.
func ParseDeclared(s string) ([]Port, []string, error) {
	if s != "" && (s[0] < '0' || s[0] > '9') {
		cs, err := vocab.ParseClass(s)
		return nil, cs, err
	}
	ps, err := ParsePortRange(s)
	return ps, nil, err
}

// declared splits validated flip.drop or flip.widen entries into their
// ports and class spellings; a parse error here is a programming error.
func declared(specs []string) ([]Port, []string) {
	ports := []Port{}
	var classes []string
	for _, s := range specs {
		ps, cs, err := ParseDeclared(s)
		if err != nil {
			panic(fmt.Sprintf("config: unvalidated flip entry %q: %v", s, err))
		}
		ports, classes = append(ports, ps...), append(classes, cs...)
	}
	return ports, classes
}

// MustPorts parses already validated port strings (vocab.MustPorts).
func MustPorts(specs []string) []Port { return vocab.MustPorts(specs) }

// MaxMode is the largest file mode a declared file may have: the permission
// bits plus setuid, setgid and sticky (04000, 02000, 01000).
const MaxMode = 0o7777

// ParseMode parses an octal file mode as chmod(1) writes it ("0644",
// "4755") into an os.FileMode whose set-id and sticky bits are Go's own
// flags, so os.Chmod keeps them (os.FileMode(0o4755) would silently lose
// the setuid bit). Only 3 or 4 octal digits, optionally after one leading
// 0, are accepted: a string such as "40000755" would otherwise turn into
// Go's type bits.
func ParseMode(s string) (os.FileMode, error) {
	digits := s
	if len(digits) == 5 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) < 3 || len(digits) > 4 || strings.Trim(digits, "01234567") != "" {
		return 0, fmt.Errorf("mode %q is not 3 or 4 octal digits such as 0644 or 4755", s)
	}
	v, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || v > MaxMode {
		return 0, fmt.Errorf("mode %q is above %o", s, MaxMode)
	}
	return ModeFromUnix(uint32(v)), nil
}

// ModeFromUnix turns Unix mode bits (at most 07777) into an os.FileMode.
func ModeFromUnix(v uint32) os.FileMode {
	m := os.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// FormatMode writes an os.FileMode's permission, set-id and sticky bits as
// four octal digits ("4755"), the form ParseMode reads back.
func FormatMode(m os.FileMode) string {
	v := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		v |= 0o1000
	}
	return fmt.Sprintf("%04o", v)
}

// flipIDPattern is the form of a flip's ID: the workflow names each attempt
// <node>-<n>. The ID becomes part of a file name under state_dir.
var flipIDPattern = regexp.MustCompile(`^[a-z0-9_-]+-[0-9]+$`)

// ValidFlipID reports whether id can name a flip (and a file under
// state_dir): ^[a-z0-9_-]+-[0-9]+$, at most 64 characters.
func ValidFlipID(id string) bool { return len(id) <= 64 && flipIDPattern.MatchString(id) }

// unitNamePattern is a systemd service unit a module may replace: instance
// names included, nothing that reads as a path or an option. The name
// reaches the service manager and the unit's file path.
var unitNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9:_.@\\-]{0,200}\.service$`)

// ValidUnitName reports whether s is a service unit name a module may
// replace (modules[].replaces_unit).
func ValidUnitName(s string) bool { return unitNamePattern.MatchString(s) }

// UnitNameRule says ValidUnitName in words.
const UnitNameRule = "a systemd service unit name (letters, digits and : _ . @ - \\, not starting with '-', ending in .service; no '/')"

// exeNamePattern is an executable's base name a module may replace
// (modules[].replaces_exe): it is matched against /proc and kept in a
// file name under state_dir.
var exeNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$`)

// ValidExeName reports whether s is an executable name a module may
// replace.
func ValidExeName(s string) bool { return exeNamePattern.MatchString(s) }

// ExeNameRule says ValidExeName in words.
const ExeNameRule = "an executable's base name as in /proc/PID/exe (letters, digits and _ . + -, at most 64, no '/')"
