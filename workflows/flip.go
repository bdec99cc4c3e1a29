// Flip phase: the preview that must approve, the flip of the firewall to
// the mesh's derived ruleset, its confirmation or revert, and the commit.

package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall"
)

// preview compares what the found firewall opens now with what the mesh's
// derived ruleset would open, and adds the workflow's own refusals: a
// module not migrated, drift not reviewed.
func (n *node) preview(ctx workflow.Context) (*firewall.Preview, error) {
	var pv firewall.Preview
	in := activities.PreviewInput{Plan: n.s.Plan, Spec: MeshSpec(&n.s)}
	if err := n.exec(ctx, "flip preview: which open ports would close", a.Preview, in, &pv); err != nil {
		return nil, err
	}
	for _, m := range n.s.Modules {
		if m.State != ModuleMigrated {
			pv.Approved = false
			pv.Reasons = append(pv.Reasons, fmt.Sprintf("module %s is %s, not migrated: run adopt migrate %s %s first", m.Name, m.State, n.s.Node, m.Name))
		}
	}
	if len(n.s.Drift) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, fmt.Sprintf("%d drift(s) not reviewed: accept them (adopt drift accept %s) or restore the originals", len(n.s.Drift), n.s.Node))
	}
	n.s.LastPreview = &pv
	return &pv, nil
}

// flip runs a preview and, only if it approves, the flip: the found
// firewall out of force and the mesh's derived ruleset in, in one step; then
// the confirmation within flip.confirm_timeout (or the revert, which the
// node's watchdog does by itself if this workflow cannot), then the commit.
func (n *node) flip(ctx workflow.Context) {
	pv, err := n.preview(ctx)
	if err != nil {
		n.s.LastError = "flip preview: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	if !pv.Approved {
		n.s.LastError = "flip refused by the preview: " + strings.Join(pv.Reasons, "; ")
		n.event(ctx, n.s.LastError)
		return
	}
	n.s.LastError = ""
	n.setPhase(ctx, PhaseFlipping)
	n.s.FlipAttempts++
	id := fmt.Sprintf("%s-%d", n.s.Node, n.s.FlipAttempts)
	n.s.Flip = &FlipStatus{ID: id, State: "flipping"}
	back := func(why string) {
		n.s.Flip.State, n.s.Flip.Error = "reverted", why
		n.s.LastError = "flip " + id + " reverted: " + why
		n.event(ctx, n.s.LastError)
		n.setPhase(ctx, PhaseAdopted)
	}
	var fr activities.FlipResult
	in := activities.FlipInput{Plan: n.s.Plan, Spec: MeshSpec(&n.s), ExpectFound: pv.FoundFingerprint, ID: id, ConfirmTimeout: n.s.Plan.ConfirmTimeout}
	if err := n.exec(ctx, "flip: replace the found firewall with the mesh's, in one transaction", a.Flip, in, &fr); err != nil {
		n.revertFlip(ctx, id)
		back(errorMessage(err))
		return
	}
	n.s.Flip.State, n.s.Flip.Deadline = "flipped", fr.Deadline
	n.event(ctx, fmt.Sprintf("flipped (%s): confirming by %s", id, fr.Deadline.Format(time.RFC3339)))
	n.publish(ctx)

	// The confirmation must run by the deadline: reaching the worker at all
	// proves the new ruleset still lets it talk to Temporal.
	cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeQueue(n.s.Node),
		ScheduleToCloseTimeout: n.s.Plan.ConfirmTimeout,
		Summary:                "flip: confirm (declared ports answer, worker reaches Temporal)",
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 5 * time.Second},
	})
	var cr activities.FlipResult
	if err := workflow.ExecuteActivity(cctx, a.ConfirmFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}).Get(ctx, &cr); err != nil {
		n.revertFlip(ctx, id)
		back(fmt.Sprintf("not confirmed within %s: %s", n.s.Plan.ConfirmTimeout, errorMessage(err)))
		return
	}
	n.s.Flip.State = "confirmed"
	var cm activities.FlipResult
	if err := n.exec(ctx, "flip: commit (save and remove the predecessor's firewall, prune predecessors)", a.CommitFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}, &cm); err != nil {
		n.s.Flip.Error = "commit: " + errorMessage(err)
		n.s.LastError = "flip " + id + " is confirmed, but removing the predecessor's leftovers failed: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
	} else {
		n.s.Flip.State, n.s.Flip.Listing = "committed", cm.Listing
	}
	// The found firewall's chains are gone, and the marks with them.
	n.s.Marks, n.s.Opened = nil, nil
	n.event(ctx, "converged: the mesh's own ruleset is the node's firewall")
	n.setPhase(ctx, PhaseConverged)
}

// revertFlip asks the node to revert a flip; the watchdog may have already.
func (n *node) revertFlip(ctx workflow.Context, id string) {
	var res activities.FlipResult
	if err := n.exec(ctx, "flip: revert to the firewall as it was", a.RevertFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}, &res); err != nil {
		n.event(ctx, "revert of "+id+" failed: "+errorMessage(err)+" (the node's watchdog reverts it at the deadline)")
	}
}

// MeshSpec derives what the mesh's own ruleset opens: the management
// ports, the foundation's (once genesis opened them) and every migrated
// module's, with the host ports its container publishes for forwarding.
func MeshSpec(s *State) firewall.MeshSpec {
	spec := firewall.MeshSpec{Node: s.Node, Drop: s.Plan.Drop}
	for _, p := range s.Plan.ManagementPorts {
		spec.Input = append(spec.Input, firewall.Allow{Port: p, Owner: "management"})
	}
	if s.Genesis.State == "done" {
		for _, fp := range s.Plan.Foundation {
			spec.Input = append(spec.Input, firewall.Allow{Port: fp.Port, Owner: activities.OwnerFoundation})
		}
	}
	for _, m := range s.Plan.Modules {
		if st := s.module(m.Name); st == nil || st.State != ModuleMigrated {
			continue
		}
		for _, p := range m.Ports {
			spec.Input = append(spec.Input, firewall.Allow{Port: p, Owner: m.Name})
		}
		if m.Container == nil {
			continue
		}
		for _, h := range workflow.DeterministicKeys(m.Container.Ports) {
			if i := strings.LastIndex(h, ":"); i >= 0 {
				h = h[i+1:] // [IP:]PORT/PROTO: the address does not matter to the filter
			}
			if p, err := config.ParsePort(h); err == nil {
				spec.Forward = append(spec.Forward, firewall.Allow{Port: p, Owner: m.Name})
			}
		}
	}
	return spec
}
