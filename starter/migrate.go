// `adopt migrate NODE MODULE`: a module's container takes over the
// predecessor's.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) migrateCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "migrate NODE MODULE", name: workflows.UpdateMigrate, module: 2,
		short: "Migrate a module: its container takes over the predecessor's",
		long: `Queue the migration of one module on the node. Refused at once (exit 2) when
the module is unknown, already migrated, failed (use retry) or the node is
flipping, converged or released.`,
		example: `  adopt migrate n1 mail --config n1.yaml
  adopt migrate n1 mail --config n1.yaml --json`,
	})
}
