// This file reports each node's phase as the series adoption_phase{node,
// phase} (1 for the phase it is in, 0 for the one it left), through the
// SDK's workflow metrics handler, which records nothing while a history is
// replayed: deterministic, and invisible to the history. It watches the
// search attribute upserts the workflow already makes, so the workflow code
// itself does not change.
package workflows

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PhaseMetrics is the worker interceptor (client.Options.Interceptors) that
// emits adoption_phase.
func PhaseMetrics() interceptor.Interceptor { return &phaseMetrics{} }

type phaseMetrics struct{ interceptor.InterceptorBase }

func (*phaseMetrics) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &phaseInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type phaseInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *phaseInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&phaseOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

// phaseOutbound remembers the last phase it reported for this execution
// (rebuilt identically on replay, when nothing is emitted).
type phaseOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	node, phase string
}

func (o *phaseOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, updates ...temporal.SearchAttributeUpdate) error {
	err := o.Next.UpsertTypedSearchAttributes(ctx, updates...)
	sa := temporal.NewSearchAttributes(updates...)
	phase, okPhase := sa.GetKeyword(AttrPhase)
	node, okNode := sa.GetKeyword(AttrNode)
	if err != nil || !okPhase || !okNode {
		return err
	}
	h := o.Next.GetMetricsHandler(ctx)
	if o.phase != "" && (o.phase != phase || o.node != node) {
		h.WithTags(map[string]string{"node": o.node, "phase": o.phase}).Gauge("adoption_phase").Update(0)
	}
	h.WithTags(map[string]string{"node": node, "phase": phase}).Gauge("adoption_phase").Update(1)
	o.node, o.phase = node, phase
	return nil
}
