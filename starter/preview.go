// `adopt preview NODE`: which open ports a flip would close.
package main

import (
	"context"

	"adoption/firewall"
	"adoption/workflows"

	"go.temporal.io/sdk/client"
)

func (x *cli) preview(ctx context.Context, node string, asJSON bool) error {
	if err := x.dial(); err != nil {
		return err
	}
	h, err := x.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   workflows.UpdatePreview,
		Args:         []any{x.requestInput(node, "")},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return requestError(node, "preview", "", err)
	}
	var pv firewall.Preview
	if err := h.Get(ctx, &pv); err != nil {
		return requestError(node, "preview", "", err)
	}
	if asJSON {
		return writeJSON(x.stdout, pv)
	}
	printPreview(x.stdout, &pv)
	return nil
}
