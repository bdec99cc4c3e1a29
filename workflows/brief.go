// The briefing's question to the node: `adopt brief NODE` is an Update
// that runs the Brief activity on the node's queue at once (not queued: it
// changes nothing) and answers with the preview, drift and key conflicts
// as the node measures them now. The workflow's state does not move: no
// plan replaced, no preview or drift recorded.
package workflows

import (
	"fmt"
	"time"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// UpdateBrief asks the node for its briefing's live parts.
const UpdateBrief = "brief"

func (n *node) registerBrief(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateBrief,
		func(ctx workflow.Context, in RequestInput) (*nodewire.NodeBriefing, error) {
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				TaskQueue:              NodeQueue(n.s.Node),
				ScheduleToStartTimeout: 20 * time.Second,
				StartToCloseTimeout:    2 * time.Minute,
				HeartbeatTimeout:       heartbeatTimeout,
				Summary:                "briefing: preview, drift and key conflicts, asked now (changes nothing)",
				RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
			})
			bi := nodewire.BriefInput{Plan: n.s.Plan.Ref(), Spec: MeshSpec(&n.s), Custody: n.s.Custody, Firewall: n.s.FirewallFingerprint,
				NodeFileDecisions: n.nodeFileDecisions(false)}
			for _, m := range n.s.Modules {
				if m.State == ModuleMigrated {
					continue
				}
				bm := nodewire.BriefModule{Module: m.Name}
				for _, d := range n.decisionsFor(m.Name) {
					d.Intent = nil // nothing is applied
					bm.Decisions = append(bm.Decisions, d)
				}
				bi.Modules = append(bi.Modules, bm)
			}
			var nb nodewire.NodeBriefing
			if err := workflow.ExecuteActivity(actx, a.Brief, bi).Get(ctx, &nb); err != nil {
				return nil, fmt.Errorf("briefing of node %s: %s", n.s.Node, errorMessage(err))
			}
			if pv := nb.Preview; pv != nil {
				// The workflow's own refusals, with the drift the node
				// finds now rather than the drift last recorded.
				more := n.refusalsWith(ctx, nb.Drift)
				if len(more) > 0 {
					pv.Approved = false
					pv.Reasons = append(pv.Reasons, more...)
				}
			}
			return &nb, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
			if err := late(ctx, in); err != nil {
				return err
			}
			switch n.s.Phase {
			case PhaseAdopted, PhaseMigrating, PhaseFlipping:
				return nil
			}
			return fmt.Errorf("node %s is %s: a briefing asks an adopted node; `adopt status %s` shows what the workflow recorded", n.s.Node, n.s.Phase, n.s.Node)
		}},
	)
}
