// This file gives adoption_phase back to an orchestrator that (re)starts:
// the workflows emit it only when a phase changes and never on replay, so a
// new process would serve no phase for a node that sits in one for days.
// At start it reads every running node workflow's AdoptionNode and
// AdoptionPhase search attributes from visibility and sets the same series
// the workflow would (same tags as the SDK's workflow handler adds).
package main

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"adoption/workflows"
)

// workflowLister is the part of client.Client the phases are read with.
type workflowLister interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// republishPhases sets adoption_phase{node,phase}=1 for each running node
// workflow and returns how many it set.
func republishPhases(ctx context.Context, c workflowLister, namespace string, h client.MetricsHandler) (int, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.NodeWorkflow)
	dc := converter.GetDefaultDataConverter()
	n := 0
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query, NextPageToken: token})
		if err != nil {
			return n, fmt.Errorf("list the running %s workflows to re-emit adoption_phase: %w", workflows.NodeWorkflow, err)
		}
		for _, e := range resp.GetExecutions() {
			f := e.GetSearchAttributes().GetIndexedFields()
			var node, phase string
			if f[workflows.AttrNode.GetName()] == nil || f[workflows.AttrPhase.GetName()] == nil ||
				dc.FromPayload(f[workflows.AttrNode.GetName()], &node) != nil || dc.FromPayload(f[workflows.AttrPhase.GetName()], &phase) != nil ||
				node == "" || phase == "" {
				continue // not yet upserted: the workflow emits it itself
			}
			h.WithTags(map[string]string{"namespace": namespace, "task_queue": workflows.TaskQueue,
				"workflow_type": workflows.NodeWorkflow, "node": node, "phase": phase}).Gauge(workflows.PhaseMetric).Update(1)
			n++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return n, nil
		}
	}
}
