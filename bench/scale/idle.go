package scale

// This file holds the idle phase (-scale-idle): the simulated nodes, each
// with one module, adopted and migrated outside a fleet with the default
// intervals, then left alone for a window; what their histories gained in
// it is the background load of an idle adopted node, per day.

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/bench/report"
	"adoption/config"
	"adoption/workflows"
)

// idleModule is the module each node migrates before the window: its
// cutover is the opening of its port, so reconcile has marks to keep.
var idleModule = config.ModulePlan{Name: "web", Ports: []config.Port{{Num: 8080, Proto: "tcp"}}}

// IdleDetails is what the idle phase measured.
type IdleDetails struct {
	WindowS         float64 `json:"window_s"`
	Nodes           int     `json:"nodes"`
	Orchestrator    string  `json:"orchestrator"` // the tree its workflows were built from
	EventsBefore    Stats   `json:"history_events_at_window_start"`
	EventsInWindow  Stats   `json:"history_events_in_window"`
	EventsPerDay    Stats   `json:"history_events_per_node_per_day"` // in the window, times a day over the window
	ReconcileEveryS float64 `json:"reconcile_interval_s"`
	DriftEveryS     float64 `json:"drift_interval_s"`
}

// idle runs the phase over every simulated node.
func (r *scaleRun) idle(ctx context.Context) ([]report.Row, error) {
	fmt.Fprintf(r.out, "scale idle: adopting %d nodes with module %s (reconcile %s, drift %s) ...\n", r.o.Nodes, idleModule.Name, r.plans[0].ReconcileInterval, r.plans[0].DriftInterval)
	for _, p := range r.plans {
		if _, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WorkflowID(p.Node), TaskQueue: workflows.TaskQueue},
			workflows.NodeWorkflow, workflows.Input{Plan: p}); err != nil {
			return nil, fmt.Errorf("start %s: %w", p.Node, err)
		}
		if err := r.c.SignalWorkflow(ctx, workflows.WorkflowID(p.Node), "", workflows.SignalMigrate, workflows.RequestInput{Module: idleModule.Name}); err != nil {
			return nil, fmt.Errorf("migrate %s on %s: %w", idleModule.Name, p.Node, err)
		}
	}
	for _, p := range r.plans {
		if err := r.waitMigrated(ctx, p.Node); err != nil {
			return nil, err
		}
	}
	// Let the last requests' own tail (the first watch or timer) settle.
	time.Sleep(5 * time.Second)
	det := &IdleDetails{WindowS: r.o.Idle.Seconds(), Nodes: r.o.Nodes, Orchestrator: r.o.OrchTree,
		ReconcileEveryS: r.plans[0].ReconcileInterval.Seconds(), DriftEveryS: r.plans[0].DriftInterval.Seconds()}
	if det.Orchestrator == "" {
		det.Orchestrator = "this tree"
	}
	before := make([]float64, len(r.plans))
	for i, p := range r.plans {
		e, _, err := history(ctx, r.c, workflows.WorkflowID(p.Node))
		if err != nil {
			return nil, err
		}
		before[i] = float64(e)
	}
	fmt.Fprintf(r.out, "scale idle: every node migrated; idle for %s ...\n", r.o.Idle)
	select {
	case <-time.After(r.o.Idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	in, per := make([]float64, len(r.plans)), make([]float64, len(r.plans))
	for i, p := range r.plans {
		e, _, err := history(ctx, r.c, workflows.WorkflowID(p.Node))
		if err != nil {
			return nil, err
		}
		in[i] = float64(e) - before[i]
		per[i] = in[i] * (24 * time.Hour).Seconds() / r.o.Idle.Seconds()
	}
	det.EventsBefore, det.EventsInWindow, det.EventsPerDay = stats(before), stats(in), stats(per)
	r.d.Idle = det
	fmt.Fprintf(r.out, "scale idle: events in %s: median %.0f (min %.0f, max %.0f); per node per day: median %.0f\n",
		r.o.Idle, det.EventsInWindow.Median, det.EventsInWindow.Min, det.EventsInWindow.Max, det.EventsPerDay.Median)
	return []report.Row{report.Absolute("scale", fmt.Sprintf("idle adopted node with a migrated module (reconcile %s, drift %s): history events per node per day, from a %s window (orchestrator: %s)",
		r.plans[0].ReconcileInterval, r.plans[0].DriftInterval, r.o.Idle, det.Orchestrator), det.EventsPerDay.Median, "events/day",
		fmt.Sprintf("SIMULATION, %d nodes, median", r.o.Nodes), "measured in the window and scaled to a day; a watch that answers only at its 6 h bound adds nothing within a shorter window", 0)}, nil
}

// waitMigrated waits until node's module is migrated (its status query).
func (r *scaleRun) waitMigrated(ctx context.Context, node string) error {
	for {
		v, err := r.c.QueryWorkflow(ctx, workflows.WorkflowID(node), "", workflows.QueryStatus)
		if err == nil {
			var st workflows.State
			if err := v.Get(&st); err != nil {
				return err
			}
			if st.Phase == workflows.PhaseAdopted && st.MigratedCount() == 1 {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s not migrated within -scale-timeout: %v", node, err)
		}
		time.Sleep(time.Second)
	}
}
