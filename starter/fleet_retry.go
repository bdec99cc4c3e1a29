// `adopt fleet retry NODE`: an Update that starts a node of the fleet again
// whose workflow failed, was terminated or could not start.
package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows/fleet"
)

// fleetRetryCommand is `adopt fleet retry`; its options are the fleet's flags.
func (x *cli) fleetRetryCommand(ctx context.Context, ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "retry NODE",
		Short: "Start a node again whose workflow failed, was terminated or could not start (its plan read afresh)",
		Long: `Start a node of the fleet again whose workflow failed, was terminated or
could not start, with its plan read afresh from its agent. The fleet refuses
(exit 2) a node that is not the fleet's, has not failed (waiting, converged,
released) or whose workflow it knows still runs.

` + exitCodesHelp,
		Example: `  adopt fleet retry n2 --fleet fleet.yaml`,
		Args:    args(cobra.ExactArgs(1)),
		RunE:    func(_ *cobra.Command, a []string) error { return x.fleetRetry(ctx, ff, a[0]) },
	}
}

func (x *cli) fleetRetry(ctx context.Context, ff *fleetFlags, node string) error {
	if !config.ValidName(node) {
		return usagef("fleet retry: node name %q is invalid: it must be %s", node, config.NameRule)
	}
	f, err := x.loadFleet(ff)
	if err != nil {
		return err
	}
	var cfgs []*config.Config
	for _, c := range f.Configs {
		if c.Node.Name == node {
			cfgs = append(cfgs, c)
		}
	}
	var signed *intent.Signed
	if len(cfgs) > 0 { // a node not the fleet's is the fleet's to refuse, by name
		if signed, err = x.fleetIntent(authority.ActFleetRetry, cfgs); err != nil {
			return err
		}
	}
	if _, err := x.askFleet(ctx, f.Name, ff.path, ff.timeout, fleet.UpdateFleetRetry, fleet.FleetRequest{Node: node, Intent: signed}, "retry of node "+node); err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetRetry, "node": node})
	}
	fmt.Fprintf(x.stdout, "fleet %s: retry of node %s asked (see adopt fleet status)\n", f.Name, node)
	return nil
}
