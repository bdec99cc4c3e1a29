// A predecessor that is a bare executable, run by no unit
// (modules[].replaces_exe): Processes answers the Manager interface for
// "exe:NAME". Its processes are found by executable name in /proc; Stop
// keeps the main one's command line, working directory, environment and
// user in a file under state_dir (0600: the environment may hold
// secrets, and it never leaves the node), then sends SIGTERM to every one
// (SIGKILL after 10 s); Start runs that command line again, in a session
// of its own. What starts the executable at boot is not the mesh's to
// know: Disable and Enable do nothing, and the runbook says so.

package units

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"adoption/sockets"
)

// Processes manages executables found in Proc's /proc, keeping what it
// stopped under Dir.
type Processes struct {
	Proc sockets.Proc
	Dir  string
}

// stopped is what Start runs again.
type stopped struct {
	Cmdline []string `json:"cmdline"`
	Exe     string   `json:"exe"`
	Cwd     string   `json:"cwd"`
	Env     []string `json:"env"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
}

func (p Processes) exe(name string) (string, error) {
	exe, ok := strings.CutPrefix(name, ExePrefix)
	if !ok {
		return "", fmt.Errorf("%q does not name an executable (%sNAME)", name, ExePrefix)
	}
	return exe, CheckName(name)
}

func (p Processes) record(exe string) string {
	return filepath.Join(p.Dir, "predecessor-exe-"+exe+".json")
}

// pids are the running processes of exe, the main (oldest, lowest) first.
func (p Processes) pids(exe string) []int {
	var out []int
	for _, pr := range p.Proc.FindProcesses([]string{exe}) {
		// A zombie is gone, only not reaped yet by its parent.
		if b, err := os.ReadFile(filepath.Join(p.Proc.Root, strconv.Itoa(pr.PID), "stat")); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pr.PID)
	}
	sort.Ints(out)
	return out
}

// Unit: known when it runs or when Stop kept its command line.
func (p Processes) Unit(_ context.Context, name string) (State, error) {
	exe, err := p.exe(name)
	if err != nil {
		return State{}, err
	}
	st := State{Name: name, Enabled: true}
	if pids := p.pids(exe); len(pids) > 0 {
		st.Known, st.Active, st.MainPID = true, true, pids[0]
		return st, nil
	}
	if _, err := os.Stat(p.record(exe)); err == nil {
		st.Known = true
	}
	return st, nil
}

// Stop keeps the main process's command line (unless an earlier Stop
// did), then stops every process of the executable.
func (p Processes) Stop(ctx context.Context, name string) error {
	exe, err := p.exe(name)
	if err != nil {
		return err
	}
	pids := p.pids(exe)
	if len(pids) == 0 {
		return nil
	}
	if _, err := os.Stat(p.record(exe)); errors.Is(err, os.ErrNotExist) {
		rec, err := p.read(pids[0])
		if err != nil {
			return fmt.Errorf("read how %s (pid %d) runs, to start it again on a rollback: %w", exe, pids[0], err)
		}
		b, _ := json.Marshal(rec)
		if err := os.MkdirAll(p.Dir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p.record(exe), b, 0o600); err != nil {
			return fmt.Errorf("keep how %s runs: %w", exe, err)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(p.pids(exe)) > 0 {
		if time.Now().After(deadline) {
			for _, pid := range p.pids(exe) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// read is how process pid runs, from /proc.
func (p Processes) read(pid int) (stopped, error) {
	base := filepath.Join(p.Proc.Root, strconv.Itoa(pid))
	var rec stopped
	b, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil {
		return rec, err
	}
	rec.Cmdline = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if rec.Exe, err = os.Readlink(filepath.Join(base, "exe")); err != nil {
		return rec, err
	}
	if rec.Cwd, err = os.Readlink(filepath.Join(base, "cwd")); err != nil {
		return rec, err
	}
	if b, err = os.ReadFile(filepath.Join(base, "environ")); err == nil && len(b) > 0 {
		rec.Env = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(base, &st); err != nil {
		return rec, err
	}
	rec.UID, rec.GID = int(st.Uid), int(st.Gid)
	return rec, nil
}

// Start runs the kept command line again, detached, and waits until the
// executable runs; the record goes once it does.
func (p Processes) Start(ctx context.Context, name string) error {
	exe, err := p.exe(name)
	if err != nil {
		return err
	}
	if len(p.pids(exe)) > 0 {
		return nil
	}
	b, err := os.ReadFile(p.record(exe))
	if err != nil {
		return fmt.Errorf("start %s again: nothing kept of how it ran (%v); start it by hand", exe, err)
	}
	var rec stopped
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Cmdline) == 0 {
		return fmt.Errorf("start %s again: %s is not what Stop wrote: %v", exe, p.record(exe), err)
	}
	cmd := exec.Command(rec.Exe, rec.Cmdline[1:]...)
	cmd.Args[0] = rec.Cmdline[0]
	cmd.Dir, cmd.Env = rec.Cwd, rec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if rec.UID != os.Getuid() || rec.GID != os.Getgid() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(rec.UID), Gid: uint32(rec.GID)}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s again: %w", exe, err)
	}
	go func() { _ = cmd.Wait() }() // reaped if it exits (a daemon forks and its parent goes)
	deadline := time.Now().Add(5 * time.Second)
	for len(p.pids(exe)) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("start %s again: not running 5 s after its start", exe)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return os.Remove(p.record(exe))
}

// Disable does nothing: what starts an executable at boot is not known.
func (p Processes) Disable(context.Context, string) error { return nil }

// Enable does nothing, as Disable.
func (p Processes) Enable(context.Context, string) error { return nil }
