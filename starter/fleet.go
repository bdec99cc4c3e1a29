// `adopt fleet start|next|retry|pause|resume|status|migrate|flip`: every
// node of a fleet adopted in order (or in waves) by the Fleet workflow.
// This file only wires the subcommands, one file each (fleet_*.go); what
// they send and how is in fleet_ask.go. next, retry, pause, resume,
// migrate and flip are Updates: the fleet's validator refuses (exit 2)
// what it would turn away or what would change nothing, and its answer
// says what it did.
package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"adoption/config"
)

// fleetFlags are the options every fleet subcommand shares, the flags of
// `adopt fleet` itself: the fleet file and how long the fleet's workflow
// may take to answer.
type fleetFlags struct {
	path    string
	timeout time.Duration
}

// fleetCommand is `adopt fleet` and its subcommands.
func (x *cli) fleetCommand(ctx context.Context) *cobra.Command {
	ff := &fleetFlags{}
	fc := &cobra.Command{Use: "fleet", Short: "Adopt every node of a fleet in order, the control node first",
		Example: `  adopt fleet start --fleet fleet.yaml
  adopt fleet status --fleet fleet.yaml --json`}
	fc.PersistentFlags().DurationVar(&ff.timeout, "timeout", 10*time.Second, "how long the fleet's workflow may take to answer")
	fc.PersistentFlags().StringVar(&ff.path, "fleet", "fleet.yaml", "fleet file: temporal settings, a name, and the node configuration files in order")
	fc.AddCommand(
		x.fleetStartCommand(ctx, ff),
		x.fleetNextCommand(ctx, ff),
		x.fleetRetryCommand(ctx, ff),
		x.fleetPauseCommand(ctx, ff),
		x.fleetResumeCommand(ctx, ff),
		x.fleetStatusCommand(ctx, ff),
		x.fleetMigrateCommand(ctx, ff),
		x.fleetFlipCommand(ctx, ff),
	)
	return fc
}

// loadFleet reads the fleet file and dials its Temporal.
func (x *cli) loadFleet(ff *fleetFlags) (*config.Fleet, error) {
	f, err := config.LoadFleet(ff.path)
	if err != nil {
		return nil, err
	}
	if err := x.dialWith(&f.Temporal, "temporal.* of "+ff.path); err != nil {
		return nil, err
	}
	return f, nil
}
