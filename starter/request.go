// The requests (migrate, retry, flip, release, prune, drift accept): sent
// as Updates to the node's workflow.
package main

import (
	"context"
	"errors"
	"fmt"

	"adoption/workflows"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

func (x *cli) request(ctx context.Context, node, kind, module string) error {
	if err := x.dial(); err != nil {
		return err
	}
	h, err := x.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   kind,
		Args:         []any{x.requestInput(node, module)},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return requestError(node, kind, module, err)
	}
	var res workflows.RequestResult
	if err := h.Get(ctx, &res); err != nil {
		return requestError(node, kind, module, err)
	}
	fmt.Fprintf(x.stdout, "node %s: queued %s (position %d); follow it with `adopt status %s` or %s\n", node, res.Accepted, res.Queued, node, x.link(node))
	return nil
}

// requestInput builds a request. The configuration is the plan's source of
// truth: when it describes this node, the request carries it, so a fixed
// port, module or flip.drop reaches the running workflow.
func (x *cli) requestInput(node, module string) workflows.RequestInput {
	in := workflows.RequestInput{Module: module}
	if x.load() == nil && x.cfg.Node.Name == node {
		p := x.cfg.Plan()
		in.Plan = &p
	}
	return in
}

func requestError(node, kind, module string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("node %s has no running migration workflow; start it with `adopt start %s`", node, node)
	}
	what := kind
	if module != "" {
		what += " " + module
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return fmt.Errorf("node %s refused %s: %s", node, what, ae.Message())
	}
	return fmt.Errorf("node %s: %s: %w", node, what, err)
}
