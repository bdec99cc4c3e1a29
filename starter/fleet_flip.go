// `adopt fleet flip`: one request for the fleet, which flips each migrated
// node wave by wave within the waves' budget of failures; signed for
// every node, one intent per node.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/workflows/fleet"
)

// fleetFlipCommand is `adopt fleet flip`; its options are the fleet's flags.
func (x *cli) fleetFlipCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "flip",
		Short: "Flip every migrated node of the fleet, wave by wave",
		Long: `Flip every node of the fleet that is adopted with every module migrated, in
the fleet's waves, each within its budget of failures (max_failed). Each
node's flip runs its own preview first: a refused preview fails that node and
is named. Refused at once (exit 2) when no node is migrated, or a fleet
migrate or flip is under way.

` + exitCodesHelp,
		Example: `  adopt fleet flip --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetFlip(ctx, ff) },
	}
}

func (x *cli) fleetFlip(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	signed, err := x.fleetIntents(authority.ActFleetFlip, f.Configs)
	if err != nil {
		return err
	}
	ans, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetFlip, fleet.FleetRequest{Intents: signed}, "flip")
	if err != nil {
		return err
	}
	return x.opAnswer(f.Name, "flip", ans)
}
