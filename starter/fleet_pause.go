// `adopt fleet pause`: an Update that stops the fleet starting nodes; it
// changes no node, so it carries no signed intent.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"adoption/workflows/fleet"
)

// fleetPauseCommand is `adopt fleet pause`; its options are the fleet's flags.
func (x *cli) fleetPauseCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "pause",
		Short: "Start no more nodes until resume (the nodes started go on)",
		Long: `Stop the fleet starting nodes, the rest of a wave included; the nodes
already started go on, and retry still starts a node the operator names.
It changes no node, so it carries no signed intent. The fleet refuses
(exit 2) when it is already paused or every node has started.

` + exitCodesHelp,
		Example: `  adopt fleet pause --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetPause(ctx, ff) },
	}
}

func (x *cli) fleetPause(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	if _, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetPause, fleet.FleetRequest{}, "pause"); err != nil {
		return err
	}
	if x.asJSON {
		return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetPause})
	}
	fmt.Fprintf(x.stdout, "fleet %s: paused, no node starts until `adopt fleet resume`; the nodes started go on\n", f.Name)
	return nil
}
