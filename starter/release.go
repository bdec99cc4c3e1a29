// `adopt release NODE`: end adoption early, leaving the node as found.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) releaseCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "release NODE", name: workflows.UpdateRelease,
		short:   "Remove every marked rule and leave the node as found",
		long:    `End the node's adoption: every marked rule removed, the found firewall exactly as found.`,
		example: `  adopt release n1`,
	})
}
