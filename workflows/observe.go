// This file makes the workflows observable without changing their code: an
// interceptor reports each node's phase as the series adoption_phase{node,
// phase} (1 for the phase it is in, 0 for the one it left) by watching the
// search attribute upserts the workflow already makes, through the SDK's
// workflow metrics handler, which records nothing while a history is
// replayed (deterministic, and invisible to the history); and it gives the
// workflow's logger the node (node=...), read from the workflow ID.
package workflows

import (
	"strings"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PhaseMetric is the series of each node's phase; the orchestrator also
// sets it at start from visibility (a replay emits nothing).
const PhaseMetric = "adoption_phase"

// Observe is the interceptor (client.Options.Interceptors) of the workflow
// worker: adoption_phase and node-tagged workflow logs.
func Observe() interceptor.Interceptor { return &observer{} }

type observer struct{ interceptor.InterceptorBase }

func (*observer) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
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
		h.WithTags(map[string]string{"node": o.node, "phase": o.phase}).Gauge(PhaseMetric).Update(0)
	}
	h.WithTags(map[string]string{"node": node, "phase": phase}).Gauge(PhaseMetric).Update(1)
	o.node, o.phase = node, phase
	return nil
}

// GetLogger adds node=<name> to a node workflow's log lines.
func (o *phaseOutbound) GetLogger(ctx workflow.Context) log.Logger {
	l := o.Next.GetLogger(ctx)
	if node, ok := strings.CutPrefix(o.Next.GetInfo(ctx).WorkflowExecution.ID, WorkflowID("")); ok && node != "" {
		return log.With(l, "node", node)
	}
	return l
}
