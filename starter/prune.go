// `adopt prune NODE`: remove the predecessor containers kept for rollback.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) pruneCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "prune NODE", name: workflows.UpdatePrune,
		short:   "Remove the stopped predecessor containers kept for rollback (never their volumes)",
		long:    `Remove the stopped predecessor containers kept for rollback; their volumes stay.`,
		example: `  adopt prune n1`,
	})
}
