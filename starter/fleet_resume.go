// `adopt fleet resume`: an Update that lets a paused fleet start nodes
// again, signed as next is.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/workflows/fleet"
)

// fleetResumeCommand is `adopt fleet resume`; its options are the fleet's flags.
func (x *cli) fleetResumeCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "resume",
		Short: "Let a paused fleet start nodes again",
		Long: `Let a paused fleet go on. Like next, it is signed: the nodes the fleet
starts from now on adopt under this intent. The fleet refuses (exit 2) when
it is not paused.

` + exitCodesHelp,
		Example: `  adopt fleet resume --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetResume(ctx, ff) },
	}
}

func (x *cli) fleetResume(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	signed, err := x.fleetIntents(authority.ActFleetResume, f.Configs)
	if err != nil {
		return err
	}
	ans, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetResume, fleet.FleetRequest{Intents: signed}, "resume")
	if err != nil {
		return err
	}
	if x.asJSON {
		return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetResume, "node": ans.Node})
	}
	fmt.Fprintf(x.stdout, "fleet %s: resumed", f.Name)
	if ans.Node != "" {
		fmt.Fprintf(x.stdout, "; node %s starts now", ans.Node)
	}
	fmt.Fprintln(x.stdout)
	return nil
}
