// `adopt retry NODE [MODULE]`: retry a failed cutover, a failed adoption
// or genesis, or a confirmed flip's commit that stopped.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) retryCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "retry NODE [MODULE]", name: workflows.UpdateRetry, module: 1,
		short: "Retry a failed cutover, or a failed adoption, genesis or flip commit without MODULE",
		long: `Retry what failed: a module's cutover (with MODULE), or the node's adoption,
genesis or the commit of its confirmed flip (without: the commit resumes
where it stopped). The configuration given travels with the request, so
a fix reaches the workflow. Refused at once (exit 2) when nothing failed.`,
		example: `  adopt retry n1 --config n1.yaml        # after fixing a genesis collision
  adopt retry n1 --config n1.yaml        # after enabling nftables.service for a stopped commit
  adopt retry n1 mail --config n1.yaml   # after a cutover rolled back`,
	})
}
