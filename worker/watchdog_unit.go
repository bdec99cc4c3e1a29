// This file starts the flip watchdog as a systemd unit of its own when the
// agent runs under systemd (adopt-agent.service sets ADOPT_WATCHDOG_UNIT):
// a child of the agent would live in the agent's cgroup, and stopping the
// agent's unit would end the pending revert with it.
package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// watchdogUnitEnv names the unit to start instead of a detached child.
const watchdogUnitEnv = "ADOPT_WATCHDOG_UNIT"

var unitName = regexp.MustCompile(`^[A-Za-z0-9@_.:-]{1,200}\.service$`)

// startWatchdogUnit runs `systemctl start UNIT` and then checks that the
// unit really started: a failed condition (no flip record where the unit
// looks for it) is no error to systemctl, and a flip must never proceed on
// the assumption that its watchdog runs.
func startWatchdogUnit(unit string) error {
	if !unitName.MatchString(unit) {
		return fmt.Errorf("%s=%q is not a systemd service name (like adopt-watchdog.service); fix the agent's unit", watchdogUnitEnv, unit)
	}
	if out, err := exec.Command("systemctl", "start", unit).CombinedOutput(); err != nil {
		return fmt.Errorf("systemctl start %s (%s): %v: %s", unit, watchdogUnitEnv, err, strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("systemctl", "show", "--property=ConditionResult", "--value", unit).Output()
	if err != nil {
		return fmt.Errorf("systemctl show %s: %w", unit, err)
	}
	if r := strings.TrimSpace(string(out)); r != "yes" {
		return fmt.Errorf("%s did not start (its condition is %q): does its ConditionPathExists point at node.state_dir/flip.json? A drop-in must match node.state_dir", unit, r)
	}
	return nil
}
