// `adopt fleet next`: an Update that lets the fleet start its next node
// without waiting for the node before it.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/workflows/fleet"
)

// fleetNextCommand is `adopt fleet next`; its options are the fleet's flags.
func (x *cli) fleetNextCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "next",
		Short: "Start the next node now, before the current one has migrated every module",
		Long: `Let the fleet start its next node without waiting for the node before it:
to go on past a node that failed, or before a node has migrated every module.
The fleet refuses (exit 2) when there is no next node, or the next one starts
by itself anyway (a grant then would only start a later node early).

` + exitCodesHelp,
		Example: `  adopt fleet next --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE:    func(*cobra.Command, []string) error { return x.fleetNext(ctx, ff) },
	}
}

func (x *cli) fleetNext(ctx context.Context, ff *fleetFlags) error {
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	signed, err := x.fleetIntents(authority.ActFleetNext, f.Configs)
	if err != nil {
		return err
	}
	ans, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetNext, fleet.FleetRequest{Intents: signed}, "next")
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, map[string]any{"fleet": f.Name, "signalled": fleet.UpdateFleetNext, "node": ans.Node, "passed_over": ans.PassedOver})
	}
	if len(ans.PassedOver) > 0 {
		fmt.Fprintf(x.stdout, "fleet %s: goes on without %s (a retry can still start them)\n", f.Name, strings.Join(ans.PassedOver, ", "))
	}
	if ans.Node != "" {
		fmt.Fprintf(x.stdout, "fleet %s: node %s may start now, without waiting for the node before it (see adopt fleet status)\n", f.Name, ans.Node)
	}
	return nil
}
