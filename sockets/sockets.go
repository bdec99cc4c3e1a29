// Package sockets tells who holds a port on a node: listening TCP and bound
// UDP sockets read through sock_diag (/proc/net where it is not available,
// or for a fixture root) in the node's network namespace, each with
// the process that holds it (from /proc/*/fd) and, when a container publishes
// the port, the container.
package sockets

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"adoption/netns"
)

// Listener is one socket that accepts traffic on a port.
type Listener struct {
	Proto     string `json:"proto"` // tcp or udp
	Addr      string `json:"addr"`
	Port      uint16 `json:"port"`
	PID       int    `json:"pid,omitempty"`
	Exe       string `json:"exe,omitempty"`
	Container string `json:"container,omitempty"`
}

// Holder names who holds the socket, for error messages.
func (l Listener) Holder() string {
	switch {
	case l.Container != "" && l.PID != 0:
		return fmt.Sprintf("container %s (pid %d, %s)", l.Container, l.PID, l.Exe)
	case l.Container != "":
		return "container " + l.Container
	case l.PID != 0:
		return fmt.Sprintf("pid %d (%s)", l.PID, l.Exe)
	default:
		return "an unknown process (socket owned by no visible pid)"
	}
}

// Proc reads /proc. Its root is a field so tests can point it at a fixture.
type Proc struct {
	Root  string // usually /proc
	Netns string // node.netns; "" for the worker's own
}

// Listeners lists listening sockets in the node's namespace with their holders.
func (p Proc) Listeners() ([]Listener, error) {
	var socks []netEntry
	err := netns.Do(p.Netns, func() error {
		if p.Root == "/proc" {
			if s, err := diagAll(); err == nil {
				socks = s
				return nil
			}
		}
		// thread-self: the namespace of this (locked) thread, not of the process.
		base := filepath.Join(p.Root, "thread-self", "net")
		if p.Netns == "" {
			base = filepath.Join(p.Root, "self", "net")
		}
		for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
			entries, err := parseNet(filepath.Join(base, f.file), f.proto)
			if err != nil {
				return err
			}
			socks = append(socks, entries...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	owners := p.socketOwners()
	out := make([]Listener, 0, len(socks))
	seen := map[string]bool{}
	for _, s := range socks {
		if pid, ok := owners[s.inode]; ok {
			s.PID = pid
			s.Exe = p.exe(pid)
		}
		key := fmt.Sprintf("%s/%s/%d/%d", s.Proto, s.Addr, s.Port, s.PID)
		if seen[key] {
			continue // SO_REUSEPORT groups and forks show the same listener many times
		}
		seen[key] = true
		out = append(out, s.Listener)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.Addr < b.Addr
	})
	return out, nil
}

type netEntry struct {
	Listener
	inode string
}

// parseNet reads one /proc/net/{tcp,udp}[6] table, keeping listening TCP
// sockets (state 0A) and unconnected bound UDP sockets (remote port 0).
func parseNet(path, proto string) ([]netEntry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil // no IPv6 in this namespace
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []netEntry
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, remote, state, inode := fields[1], fields[2], fields[3], fields[9]
		if proto == "tcp" && state != "0A" {
			continue
		}
		if proto == "udp" && !strings.HasSuffix(remote, ":0000") {
			continue
		}
		addr, port, err := decodeAddr(local)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, netEntry{Listener: Listener{Proto: proto, Addr: addr, Port: port}, inode: inode})
	}
	return out, sc.Err()
}

// decodeAddr decodes /proc/net's "0100007F:1F90": the address in host byte
// order in 32-bit words, the port in network order.
func decodeAddr(s string) (string, uint16, error) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("bad address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port in %q", s)
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return "", 0, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b).String(), uint16(port), nil
}

// socketOwners maps socket inodes to the first pid holding them. Socket
// inodes are global, so scanning every process sees holders in any namespace.
func (p Proc) socketOwners() map[string]int {
	owners := map[string]int{}
	for _, pid := range p.pids() {
		fdDir := filepath.Join(p.Root, strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
			if _, ok := owners[inode]; !ok {
				owners[inode] = pid
			}
		}
	}
	return owners
}

func (p Proc) pids() []int {
	entries, _ := os.ReadDir(p.Root)
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// exe names a process by its executable's base name, falling back to comm.
func (p Proc) exe(pid int) string {
	if link, err := os.Readlink(filepath.Join(p.Root, strconv.Itoa(pid), "exe")); err == nil {
		return filepath.Base(strings.TrimSuffix(link, " (deleted)"))
	}
	b, _ := os.ReadFile(filepath.Join(p.Root, strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

// Process is a running process found by name.
type Process struct {
	PID int    `json:"pid"`
	Exe string `json:"exe"`
	// UID and User run it; Unit is the systemd user unit it runs in
	// (from its cgroup: user@UID.service/.../UNIT), "" when none.
	UID  int    `json:"uid,omitempty"`
	User string `json:"user,omitempty"`
	Unit string `json:"unit,omitempty"`
}

// FindProcesses lists running processes whose executable base name or comm
// equals one of names. The worker itself is never reported.
func (p Proc) FindProcesses(names []string) []Process {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Process
	self := os.Getpid()
	for _, pid := range p.pids() {
		if pid == self {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(p.Root, strconv.Itoa(pid), "comm"))
		c := strings.TrimSpace(string(comm))
		exe := p.exe(pid)
		if want[exe] || want[c] {
			name := exe
			if !want[exe] {
				name = c
			}
			pr := Process{PID: pid, Exe: name, Unit: p.userUnit(pid), UID: -1}
			if uid, ok := p.uid(pid); ok {
				pr.UID, pr.User = uid, userName(uid)
			}
			out = append(out, pr)
		}
	}
	return out
}

// uid is the real user ID a process runs as (/proc/PID/status).
func (p Proc) uid(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(p.Root, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[1])
			return uid, err == nil
		}
	}
	return 0, false
}

// userUnit is the systemd user unit a process runs in, read from its
// cgroup path (".../user@1000.service/app.slice/sync.service"): the last
// unit under the user's manager. "" when it runs under no user manager.
func (p Proc) userUnit(pid int) string {
	b, err := os.ReadFile(filepath.Join(p.Root, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		segs := strings.Split(parts[2], "/")
		for i, seg := range segs {
			if !strings.HasPrefix(seg, "user@") || !strings.HasSuffix(seg, ".service") {
				continue
			}
			unit := ""
			for _, s := range segs[i+1:] {
				if strings.HasSuffix(s, ".service") || strings.HasSuffix(s, ".scope") {
					unit = s
				}
			}
			return unit
		}
	}
	return ""
}

// userName is the name of uid, or the number when the node has no name
// for it.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
