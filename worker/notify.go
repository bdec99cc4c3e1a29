// This file tells systemd how the service is doing (sd_notify(3)): READY=1
// once it works (the orchestrator: Temporal answered and its worker polls;
// the node agent: its node is watched, Temporal or not), STATUS= what the
// agent waits for (`systemctl status` shows it), STOPPING=1 when it shuts
// down. Outside systemd (NOTIFY_SOCKET unset) it does nothing.
package main

import (
	"fmt"
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifySocketEnv is where systemd says its notification socket is.
const notifySocketEnv = "NOTIFY_SOCKET"

// sdNotify sends state (e.g. "READY=1") to the service manager with
// go-systemd's daemon.SdNotify; without NOTIFY_SOCKET it sends nothing.
func sdNotify(state string) error {
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("sd_notify %s: %w", notifySocketEnv, err)
	}
	return nil
}

// ready tells systemd the worker works; a failure to say so is logged (the
// unit's start then times out and says why).
func ready(log *slog.Logger) {
	if err := sdNotify(daemon.SdNotifyReady); err != nil {
		log.Error("cannot tell systemd the worker is ready", "err", err)
	}
}

// stopping tells systemd the worker is shutting down.
func stopping(log *slog.Logger) {
	if err := sdNotify(daemon.SdNotifyStopping); err != nil {
		log.Warn("cannot tell systemd the worker is stopping", "err", err)
	}
}

// notifyStatus tells systemd what the service is doing, in a line that
// `systemctl status` shows.
func notifyStatus(log *slog.Logger, text string) {
	if err := sdNotify("STATUS=" + text); err != nil {
		log.Warn("cannot tell systemd the worker's status", "err", err)
	}
}
