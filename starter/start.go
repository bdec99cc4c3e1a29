// `adopt start NODE`: start the node's migration workflow.
package main

import (
	"context"
	"errors"
	"fmt"

	"adoption/config"
	"adoption/workflows"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

func (x *cli) start(ctx context.Context, node string) error {
	if err := x.load(); err != nil {
		return err
	}
	if !config.ValidName(node) {
		return fmt.Errorf("node name %q is invalid: it must be %s", node, config.NameRule)
	}
	if x.cfg.Node.Name != node {
		return fmt.Errorf("the configuration (%s) describes node %q, not %q: pass that node's configuration with --config", orDefault(x.cfgPath), x.cfg.Node.Name, node)
	}
	if err := x.dial(); err != nil {
		return err
	}
	id := workflows.WorkflowID(node)
	run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                workflows.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true, // a node has one migration at a time
		StaticSummary:                            fmt.Sprintf("adoption of node %s (%s), %d module(s)", node, x.cfg.Node.Role, len(x.cfg.Modules)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrNode.ValueSet(node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	}, workflows.NodeWorkflow, workflows.Input{Plan: x.cfg.Plan()})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return fmt.Errorf("node %s already has a migration workflow (%s); see `adopt status %s`", node, id, node)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	fmt.Fprintf(x.stdout, "started %s (run %s)\nwatch it: %s\n", id, run.GetRunID(), x.link(node))
	return nil
}
