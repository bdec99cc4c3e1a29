// `adopt flip NODE`: replace the found firewall with the mesh's.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func (x *cli) flipCommand(ctx context.Context) *cobra.Command {
	return x.requestCommand(ctx, requestSpec{
		use: "flip NODE", name: workflows.UpdateFlip,
		short: "Flip the node: preview, then replace the found firewall with the mesh's",
		long: `Queue the flip. Refused at once (exit 2), with every reason, while a module
is not migrated (nor queued to be), drift is not reviewed, or the node is
not adopted. When served, the flip runs the preview again and flips only if
it approves; unless confirmed within flip.confirm_timeout it is reverted.`,
		example: `  adopt preview n1 --config n1.yaml && adopt flip n1 --config n1.yaml
  adopt flip n1 --config n1.yaml --wait`,
		waitFor:  func(string) waitGoal { return waitGoal{phase: string(workflows.PhaseConverged)} },
		waitWhat: "the flip is confirmed and the node converged (it ends at once, non-zero, if the flip is reverted or not applied)",
	})
}
