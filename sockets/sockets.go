// Package sockets tells who holds a port on a node: listening TCP and bound
// UDP sockets read through sock_diag (/proc/net where it is not available,
// or for a fixture root) in the node's network namespace, each with
// the process that holds it (from /proc/*/fd) and, when a container publishes
// the port, the container. /proc is read with github.com/prometheus/procfs.
package sockets

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

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
		base := filepath.Join(p.Root, "thread-self")
		if p.Netns == "" {
			base = filepath.Join(p.Root, "self")
		}
		for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
			entries, err := parseNet(base, f.file, f.proto)
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
	wanted := make(map[string]bool, len(socks))
	for _, s := range socks {
		wanted[s.inode] = true
	}
	owners := p.socketOwners(wanted)
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

// socketLink opens the link of a descriptor that is a socket:
// "socket:[INODE]".
const socketLink = "socket:["

type netEntry struct {
	Listener
	inode string
}

// parseNet reads one /proc/net table (file: tcp, tcp6, udp or udp6) of the
// process directory dir (/proc/self, /proc/thread-self) with procfs,
// keeping listening TCP sockets (state TCP_LISTEN, as sock_diag says it)
// and unconnected bound UDP sockets (remote port 0).
func parseNet(dir, file, proto string) ([]netEntry, error) {
	fs, err := procfs.NewFS(dir)
	if err != nil {
		return nil, err
	}
	var rows procfs.NetIPSocket
	switch file {
	case "tcp":
		t, e := fs.NetTCP()
		rows, err = procfs.NetIPSocket(t), e
	case "tcp6":
		t, e := fs.NetTCP6()
		rows, err = procfs.NetIPSocket(t), e
	case "udp":
		u, e := fs.NetUDP()
		rows, err = procfs.NetIPSocket(u), e
	case "udp6":
		u, e := fs.NetUDP6()
		rows, err = procfs.NetIPSocket(u), e
	default:
		return nil, fmt.Errorf("no /proc/net table %q", file)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no IPv6 in this namespace
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "net", file), err)
	}
	var out []netEntry
	for _, r := range rows {
		if proto == "tcp" && r.St != tcpListen || proto == "udp" && r.RemPort != 0 {
			continue
		}
		out = append(out, netEntry{Listener: Listener{Proto: proto, Addr: r.LocalAddr.String(), Port: uint16(r.LocalPort)},
			inode: strconv.FormatUint(r.Inode, 10)})
	}
	return out, nil
}

// procs are the processes under p.Root, by pid, with procfs; none when it
// cannot be read.
func (p Proc) procs() []procfs.Proc {
	fs, err := procfs.NewFS(p.Root)
	if err != nil {
		return nil
	}
	all, err := fs.AllProcs()
	if err != nil {
		return nil
	}
	sort.Slice(all, func(i, j int) bool { return all[i].PID < all[j].PID })
	return all
}

// socketOwners maps the socket inodes in wanted to the first pid holding
// them. Socket inodes are global, so scanning every process sees holders
// in any namespace; the scan stops once every wanted socket has its holder.
func (p Proc) socketOwners(wanted map[string]bool) map[string]int {
	owners := map[string]int{}
	buf := make([]byte, 64)
	for _, proc := range p.procs() {
		if len(owners) == len(wanted) {
			break
		}
		p.socketsHeld(proc.PID, buf, func(inode string) {
			if _, ok := owners[inode]; !ok && wanted[inode] {
				owners[inode] = proc.PID
			}
		})
	}
	return owners
}

// socketsHeld calls held with the inode of each socket process pid holds,
// none when its descriptors cannot be read (gone, or not ours to read).
// Each link is read relative to the process's fd directory, into buf: the
// scan reads every descriptor of every process, and procfs resolves
// /proc/PID/fd/N from the root for each and allocates its text.
func (p Proc) socketsHeld(pid int, buf []byte, held func(inode string)) {
	dir, err := os.Open(filepath.Join(p.Root, strconv.Itoa(pid), "fd"))
	if err != nil {
		return
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return
	}
	raw, err := dir.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(dfd uintptr) {
		for _, name := range names {
			n, err := unix.Readlinkat(int(dfd), name, buf)
			if err != nil || n < len("socket:[]") || n == len(buf) {
				continue
			}
			if link := buf[:n]; bytes.HasPrefix(link, []byte(socketLink)) && link[n-1] == ']' {
				held(string(link[len(socketLink) : n-1]))
			}
		}
	})
}

// exe names a process by its executable's base name, falling back to comm.
func (p Proc) exe(pid int) string {
	exe, _ := p.names(pid, make([]byte, 4096))
	return exe
}

// names are the base name of process pid's executable (its comm when the
// link cannot be read) and its comm, read relative to its /proc
// directory into buf: FindProcesses reads them of every process.
func (p Proc) names(pid int, buf []byte) (exe, comm string) {
	dir, err := os.Open(filepath.Join(p.Root, strconv.Itoa(pid)))
	if err != nil {
		return "", ""
	}
	defer dir.Close()
	raw, err := dir.SyscallConn()
	if err != nil {
		return "", ""
	}
	_ = raw.Control(func(dfd uintptr) {
		if fd, err := unix.Openat(int(dfd), "comm", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			if n, err := unix.Read(fd, buf); err == nil {
				comm = strings.TrimSpace(string(buf[:n]))
			}
			unix.Close(fd)
		}
		if n, err := unix.Readlinkat(int(dfd), "exe", buf); err == nil && n > 0 && n < len(buf) {
			exe = filepath.Base(strings.TrimSuffix(string(buf[:n]), " (deleted)"))
		}
	})
	if exe == "" {
		exe = comm
	}
	return exe, comm
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
	buf := make([]byte, 4096)
	for _, proc := range p.procs() {
		if proc.PID == self {
			continue
		}
		exe, c := p.names(proc.PID, buf)
		if want[exe] || want[c] {
			name := exe
			if !want[exe] {
				name = c
			}
			pr := Process{PID: proc.PID, Exe: name, Unit: userUnit(proc), UID: -1}
			if uid, ok := procUID(proc); ok {
				pr.UID, pr.User = uid, userName(uid)
			}
			out = append(out, pr)
		}
	}
	return out
}

// procUID is the real user ID a process runs as.
func procUID(proc procfs.Proc) (int, bool) {
	st, err := proc.NewStatus()
	if err != nil {
		return 0, false
	}
	return int(st.UIDs[0]), true
}

// userUnit is the systemd user unit a process runs in, read from its
// cgroup path (".../user@1000.service/app.slice/sync.service"): the last
// unit under the user's manager. "" when it runs under no user manager.
func userUnit(proc procfs.Proc) string {
	cgs, err := proc.Cgroups()
	if err != nil {
		return ""
	}
	for _, cg := range cgs {
		segs := strings.Split(cg.Path, "/")
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
