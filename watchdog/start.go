package watchdog

// This file holds how the watchdog is started so that it outlives whoever
// started it: its own session, and on a node run by systemd its own
// transient scope, so neither the agent's death nor `systemctl stop` of the
// agent's unit (which kills the unit's whole control group) takes it along.
// Re-arming is idempotent: the watchdog holds a lock on the node's state
// directory, and a second one started beside it leaves at once.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"adoption/nodestate"
)

// systemdRunning is how systemd itself tells that it is PID 1
// (sd_booted(3)).
func systemdRunning() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// Command is how to run the watchdog: the executable and its arguments
// (adopt-worker watchdog --config FILE).
type Command struct {
	Path string
	Args []string
	Log  string // appended to; the watchdog's own log
}

// StartDetached starts the watchdog as a process of its own and does not
// wait for it.
func StartDetached(c Command) error {
	logf, err := os.OpenFile(c.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	run, err := exec.LookPath("systemd-run")
	if err != nil || !systemdRunning() {
		run = ""
	}
	name, args := detached(c, run)
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the flip watchdog (%s): %w", name, err)
	}
	go cmd.Wait() //nolint:errcheck // reaped while the starter lives; init adopts it otherwise
	return nil
}

// detached is the command line that starts c: through systemdRun (when
// systemd runs the node) in a transient scope of its own, out of the
// agent's control group; else as is (StartDetached gives it its own
// session either way).
func detached(c Command, systemdRun string) (string, []string) {
	if systemdRun == "" {
		return c.Path, c.Args
	}
	return systemdRun, append([]string{"--scope", "--quiet", "--collect",
		"--description=adoption flip watchdog", "--", c.Path}, c.Args...)
}

// Rearm starts the watchdog again when the node's flip record says a flip
// may be in force unconfirmed: a watchdog that died with a previous agent
// (a container's processes all end with it) or with a reboot is back before
// anything else is tried, Temporal first of all. It says what it did.
func Rearm(records Records, start func() error, log io.Writer) error {
	rec, err := records.Flip()
	if err != nil {
		return fmt.Errorf("read the flip record: %w", err)
	}
	if !rec.Pending() {
		return nil
	}
	if err := start(); err != nil {
		return fmt.Errorf("re-arm the watchdog of pending flip %s: %w", rec.ID, err)
	}
	fmt.Fprintf(log, "watchdog: re-armed for flip %s (%s, deadline %s)\n", rec.ID, rec.State, rec.Deadline.Format("2006-01-02T15:04:05Z07:00"))
	return nil
}

// Exclusive is Options.Exclusive for a state directory.
func Exclusive(d *nodestate.Dir) func() (func(), bool, error) {
	return d.LockWatchdog
}
