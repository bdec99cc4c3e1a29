// `adopt start NODE`: start the node's migration workflow. A node whose
// last run converged stays converged unless --readopt says otherwise.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/workflows"
)

// startOpts are `adopt start`'s flags.
type startOpts struct {
	readopt bool
}

func (x *cli) startCommand(ctx context.Context) *cobra.Command {
	o := &startOpts{}
	c := &cobra.Command{
		Use:   "start NODE",
		Short: "Start the node's migration workflow: probe, then adopt",
		Long: `Start the node's migration workflow with the plan from the node's
configuration (--config): it probes the node, then adopts it.

A node whose last run converged is refused (exit 2): its firewall is the
mesh's own, and adopting it again would take that for the predecessor's.
--readopt starts a new adoption of a converged node anyway: it probes the
node as it is now, and the mesh's own table is never taken as the found
firewall.

` + exitCodesHelp,
		Example: `  adopt start n1 --config n1.yaml
  ADOPT_CONFIG=n1.yaml adopt start n1 --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error { return x.start(ctx, a[0], o) },
	}
	c.Flags().BoolVar(&o.readopt, "readopt", false, "start again on a node whose last run converged (see above)")
	return c
}

// started is what `adopt start --json` prints.
type started struct {
	Node       string `json:"node"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	Link       string `json:"link"`
	// Frozen states the predecessor's pipeline freeze (a control node).
	Frozen string `json:"frozen,omitempty"`
}

func (x *cli) start(ctx context.Context, node string, o *startOpts) error {
	if !config.ValidName(node) {
		return usagef("node name %q is invalid: it must be %s", node, config.NameRule)
	}
	if err := x.load(); err != nil {
		return err
	}
	if x.cfg.Node.Name != node {
		return usagef("the configuration (%s) describes node %q, not %q: pass that node's configuration with --config", orDefault(x.cfgPath), x.cfg.Node.Name, node)
	}
	signed, err := x.signIntent(authority.ActStart, []*config.Config{x.cfg}, nil, x.cfg.Operator.IntentTTL)
	if err != nil {
		return err
	}
	if err := x.dial(); err != nil {
		return err
	}
	id := workflows.WorkflowID(node)
	last, err := x.lastRun(ctx, node)
	if err != nil {
		return fmt.Errorf("node %s: reading its last run: %w", node, err)
	}
	if last != nil && last.running {
		return refused(fmt.Errorf("node %s already has a migration workflow, running (%s, phase %s); see `adopt status %s`", node, id, orUnknown(string(last.phase)), node), nil)
	}
	if last != nil && last.phase == workflows.PhaseConverged && !o.readopt {
		return refused(fmt.Errorf("node %s converged at %s: the mesh's firewall is its firewall and its workflow is complete; nothing needs doing. To adopt it again anyway, `adopt start %s --readopt`",
			node, x.zone().stamp(last.closed), node), nil)
	}
	run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                workflows.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true, // a node has one migration at a time
		StaticSummary:                            fmt.Sprintf("adoption of node %s (%s), %d module(s)", node, x.cfg.Node.Role, len(x.cfg.Modules)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrNode.ValueSet(node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	}, workflows.NodeWorkflow, workflows.Input{Plan: x.cfg.Plan(), Intent: signed})
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return refused(fmt.Errorf("node %s already has a migration workflow (%s); see `adopt status %s`", node, id, node), nil)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	out := started{Node: node, WorkflowID: id, RunID: run.GetRunID(), Link: x.link(node), Frozen: config.PipelineFreeze(x.cfg.Node.Role, node)}
	if x.asJSON {
		return x.writeJSON(x.stdout, out)
	}
	fmt.Fprintf(x.stdout, "started %s (run %s)\nwatch it: %s\n", id, out.RunID, out.Link)
	if out.Frozen != "" {
		fmt.Fprintf(x.stdout, "note: %s\n", out.Frozen)
	}
	ag := x.agents(ctx, node)
	for _, q := range []struct {
		h   queueHealth
		who string
		fix string
	}{{ag.Workflow, "worker", "start the orchestrator: adopt-worker orchestrate (adopt-orchestrator.service)"},
		{ag.Node, "agent", "start the node's agent on " + node + ": adopt-worker run (adopt-agent.service)"}} {
		if !q.h.alive() && !q.h.unknown() {
			fmt.Fprintf(x.stderr, "note: %s; the workflow waits for it (%s)\n", q.h.describe(q.who, x.zone()), q.fix)
		}
	}
	return nil
}
