// `adopt fleet migrate MODULE` and `adopt fleet flip`: one request for the
// fleet, which sends it to each node wave by wave within the waves' budget
// of failures. Both are Updates, signed for the nodes they go to: one
// intent per node, each sent on to its node alone.
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/workflows/fleet"
)

// fleetOpCommands are fleet migrate and fleet flip; load reads the fleet
// file and dials its Temporal.
func (x *cli) fleetOpCommands(ctx context.Context, load func() (*config.Fleet, error), fleetPath *string, timeout *time.Duration) []*cobra.Command {
	migrate := &cobra.Command{
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
		RunE: func(cmd *cobra.Command, a []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			cfgs, err := f.Declaring(a[0])
			if err != nil {
				return refused(err, nil)
			}
			signed, err := x.signEach(authority.ActFleetMigrate, cfgs, map[string]string{"module": a[0]}, f.Configs[0].Operator.FleetIntentTTL)
			if err != nil {
				return err
			}
			in := fleet.FleetRequest{Module: a[0], Intents: signed}
			for _, c := range cfgs {
				in.Nodes = append(in.Nodes, c.Node.Name)
			}
			ans, err := x.askFleet(ctx, f.Name, *fleetPath, *timeout, fleet.UpdateFleetMigrate, in, "migrate "+a[0])
			if err != nil {
				return err
			}
			return x.opAnswer(f.Name, "migrate "+a[0], ans)
		},
	}
	flip := &cobra.Command{
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			signed, err := x.fleetIntents(authority.ActFleetFlip, f.Configs)
			if err != nil {
				return err
			}
			ans, err := x.askFleet(ctx, f.Name, *fleetPath, *timeout, fleet.UpdateFleetFlip, fleet.FleetRequest{Intents: signed}, "flip")
			if err != nil {
				return err
			}
			return x.opAnswer(f.Name, "flip", ans)
		},
	}
	return []*cobra.Command{migrate, flip}
}

// opAnswer prints what the fleet took of a migrate or flip.
func (x *cli) opAnswer(name, what string, ans *fleet.FleetAnswer) error {
	if x.asJSON {
		return x.writeJSON(x.stdout, map[string]any{"fleet": name, "request": what, "targets": ans.Targets, "skipped": ans.Skipped})
	}
	fmt.Fprintf(x.stdout, "fleet %s: %s on %s, wave by wave; follow it with `adopt fleet status`\n", name, what, strings.Join(ans.Targets, ", "))
	if len(ans.Skipped) > 0 {
		fmt.Fprintf(x.stdout, "not on: %s\n", strings.Join(ans.Skipped, "; "))
	}
	return nil
}
