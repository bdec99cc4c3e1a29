// `adopt drift accept NODE`: record the node as it is now.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) driftCommand(ctx context.Context) *cobra.Command {
	c := &cobra.Command{Use: "drift", Short: "Drift found while adopted: a file or the found firewall changed since adoption",
		Example: `  adopt drift accept n1`}
	c.AddCommand(x.requestCommand(ctx, requestSpec{
		use: "accept NODE", name: workflows.SignalDriftAccept,
		short:   "Record the node as it is now (custody renewed); the flip is no longer blocked",
		long:    `Accept the drift found: custody is renewed from the node as it is now. Refused (exit 2) when there is no drift.`,
		example: `  adopt drift accept n1`,
	}))
	return c
}
