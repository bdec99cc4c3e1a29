package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"adoption/firewall"
)

// namePattern is the one pattern every name (node, module, owner, container)
// must match. It is strict on purpose: a name ends up in an nftables rule
// comment (adoption:<node>:<owner>:<port>/<proto>, at most 128 bytes), in a
// Docker container name and in file paths under state_dir, so it may carry
// neither ':' nor '/' nor anything a shell or a path would interpret.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,30}[a-z0-9])?$`)

// MaxNameLen keeps a mark comment well under the kernel's 128-byte user-data
// limit: "adoption:" + node + ":" + owner + ":" + "65535/tcp".
const MaxNameLen = 32

// ValidName reports whether s can be used as a node, module, owner or
// container name.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NameRule is the human text of namePattern, for error messages.
const NameRule = "1-32 characters: lowercase letters, digits, '-' and '_', starting and ending with a letter or digit"

// Port is a transport port with its protocol, written PORT/PROTO ("8080/tcp").
type Port struct {
	Num   uint16 `json:"port"`
	Proto string `json:"proto"`
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }

// ParsePort parses "PORT/PROTO" where PROTO is tcp or udp and PORT is 1-65535.
func ParsePort(s string) (Port, error) {
	num, proto, ok := strings.Cut(s, "/")
	if !ok {
		return Port{}, fmt.Errorf("want PORT/PROTO such as 8080/tcp")
	}
	if err := checkProto(proto); err != nil {
		return Port{}, err
	}
	// Digits only, no sign, no padding: the same text must mean the same
	// port to every parser it reaches (the container engine's included).
	n, err := strconv.Atoi(num)
	if err != nil || strings.Trim(num, "0123456789") != "" || strings.HasPrefix(num, "0") || n < 1 || n > 65535 {
		return Port{}, fmt.Errorf("port %q is not a number from 1 to 65535", num)
	}
	return Port{Num: uint16(n), Proto: proto}, nil
}

// Validate is the one definition of a port the mesh can open, mark or
// drop: PORT 1-65535 (0 is not a port) and PROTO tcp or udp. ParsePort
// returns only valid ports; a Port that arrives decoded from JSON (a plan,
// a request) is checked with this.
func (p Port) Validate() error {
	var errs []error
	if p.Num == 0 {
		errs = append(errs, fmt.Errorf("port 0 is not a port: want 1-65535"))
	}
	if err := checkProto(p.Proto); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkProto(proto string) error {
	if proto != "tcp" && proto != "udp" {
		return fmt.Errorf("protocol %q is not tcp or udp", proto)
	}
	return nil
}

// HostPort is the port of a container's published-port key
// ([IP:]PORT/PROTO); ok is false when the key does not name a valid port.
// The address does not matter to the firewall, which filters by port.
func HostPort(key string) (p Port, ok bool) {
	if i := strings.LastIndex(key, ":"); i >= 0 {
		key = key[i+1:]
	}
	p, err := ParsePort(key)
	return p, err == nil
}

// MaxDropRange is the most ports one flip.drop range may name: the plan
// carries each port, and the plan travels in workflow histories.
const MaxDropRange = 1024

// ParsePortRange reads PORT/PROTO or FROM-TO/PROTO (9000-9010/tcp, FROM
// below TO, at most MaxDropRange ports) into its ports, in order.
func ParsePortRange(s string) ([]Port, error) {
	num, proto, ok := strings.Cut(s, "/")
	from, to, isRange := strings.Cut(num, "-")
	if !ok || !isRange {
		p, err := ParsePort(s)
		if err != nil {
			return nil, err
		}
		return []Port{p}, nil
	}
	lo, err := ParsePort(from + "/" + proto)
	if err != nil {
		return nil, fmt.Errorf("range %q: %w", s, err)
	}
	hi, err := ParsePort(to + "/" + proto)
	if err != nil {
		return nil, fmt.Errorf("range %q: %w", s, err)
	}
	if hi.Num <= lo.Num {
		return nil, fmt.Errorf("range %q does not go up: write FROM-TO/PROTO with FROM below TO", s)
	}
	if int(hi.Num)-int(lo.Num)+1 > MaxDropRange {
		return nil, fmt.Errorf("range %q names %d ports, more than %d", s, int(hi.Num)-int(lo.Num)+1, MaxDropRange)
	}
	out := make([]Port, 0, int(hi.Num)-int(lo.Num)+1)
	for n := int(lo.Num); n <= int(hi.Num); n++ {
		out = append(out, Port{Num: uint16(n), Proto: lo.Proto})
	}
	return out, nil
}

// ParseDeclared reads one flip.drop or flip.widen entry: PORT/PROTO or
// FROM-TO/PROTO (ParsePortRange) into ports, or, when it does not begin
// with a digit, a traffic class (NAME/PROTO or NAME, as firewall.ParseClass
// reads it) into class spellings.
func ParseDeclared(s string) ([]Port, []string, error) {
	if s != "" && (s[0] < '0' || s[0] > '9') {
		cs, err := firewall.ParseClass(s)
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

// MustPortRanges is MustPorts for specs that may be ranges
// (ParsePortRange), expanded to their ports.
func MustPortRanges(specs []string) []Port {
	out := make([]Port, 0, len(specs))
	for _, s := range specs {
		ps, err := ParsePortRange(s)
		if err != nil {
			panic(fmt.Sprintf("config: unvalidated port range %q: %v", s, err))
		}
		out = append(out, ps...)
	}
	return out
}

// MustPorts parses already validated port strings; it is only called after
// Validate succeeded, so a parse error here is a programming error.
func MustPorts(specs []string) []Port {
	out := make([]Port, 0, len(specs))
	for _, s := range specs {
		p, err := ParsePort(s)
		if err != nil {
			panic(fmt.Sprintf("config: unvalidated port %q: %v", s, err))
		}
		out = append(out, p)
	}
	return out
}

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
