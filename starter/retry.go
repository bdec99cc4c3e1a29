// `adopt retry NODE [MODULE]`: retry a failed cutover, or a failed
// adoption or genesis.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) retryCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "retry NODE [MODULE]", name: workflows.UpdateRetry, module: 1,
		short: "Retry a failed cutover, or a failed adoption or genesis without MODULE",
		long: `Retry what failed: a module's cutover (with MODULE), or the node's adoption
or genesis (without). The configuration given travels with the request, so
a fix reaches the workflow. Refused at once (exit 2) when nothing failed.`,
		example: `  adopt retry n1 --config n1.yaml        # after fixing a genesis collision
  adopt retry n1 mail --config n1.yaml   # after a cutover rolled back`,
	})
}
