// `adopt fleet migrate MODULE`: one request for the fleet, which sends it
// to each node that declares MODULE wave by wave within the waves' budget
// of failures; signed for those nodes, one intent per node.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/workflows/fleet"
)

// fleetMigrateCommand is `adopt fleet migrate`; its options are the fleet's flags.
func (x *cli) fleetMigrateCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate MODULE",
		Short: "Migrate a module on every node of the fleet that declares it, wave by wave",
		Long: `Migrate MODULE on every node whose configuration declares it, in the
fleet's waves (the control node alone first), each wave once the one before
has been served, each within its budget of failures (max_failed); more
failures halt it, naming the nodes. Refused at once (exit 2), nothing sent,
when no node declares the module, or a fleet migrate or flip is under way.

` + exitCodesHelp,
		Example: `  adopt fleet migrate web --fleet fleet.yaml`,
		Args:    args(cobra.ExactArgs(1)),
		RunE:    func(_ *cobra.Command, a []string) error { return x.fleetMigrate(ctx, ff, a[0]) },
	}
}

func (x *cli) fleetMigrate(ctx context.Context, ff *fleetFlags, module string) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	cfgs, err := f.Declaring(module)
	if err != nil {
		return refused(err, nil)
	}
	signed, err := x.signEach(authority.ActFleetMigrate, cfgs, map[string]string{"module": module}, f.Configs[0].Operator.FleetIntentTTL)
	if err != nil {
		return err
	}
	in := fleet.FleetRequest{Module: module, Intents: signed}
	for _, c := range cfgs {
		in.Nodes = append(in.Nodes, c.Node.Name)
	}
	ans, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetMigrate, in, "migrate "+module)
	if err != nil {
		return err
	}
	return x.opAnswer(f.Name, "migrate "+module, ans)
}
