// The briefing's questions to the node: the flip's preview, drift and each
// module's key conflicts, measured now, read-only. Nothing on the node is
// changed, no plan replaced, no intent spent; only keys, digests and fates
// travel back, never a file's content or an env value.

package activities

import (
	"context"
	"errors"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
)

// BriefInput is nodewire.BriefInput.
type BriefInput = nodewire.BriefInput

// BriefModule is nodewire.BriefModule.
type BriefModule = nodewire.BriefModule

// NodeBriefing is nodewire.NodeBriefing.
type NodeBriefing = nodewire.NodeBriefing

// ModuleConflicts is nodewire.ModuleConflicts.
type ModuleConflicts = nodewire.ModuleConflicts

// Brief measures the node for its briefing. Only the plan is checked (the
// node's own): it answers what Preview, the drift check and a rehearsal's
// conflict check answer, and changes nothing.
func (a *Activities) Brief(ctx context.Context, in BriefInput) (*NodeBriefing, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	out := &NodeBriefing{Drift: []DriftItem{}}
	heartbeat(ctx, "brief: preview")
	if pv, err := a.preview(ctx, auth, in.Spec, in.NodeFileDecisions); err != nil {
		out.PreviewError = message(err)
	} else {
		out.Preview = pv
	}
	heartbeat(ctx, "brief: drift")
	if d, err := a.drift().Of(auth, DriftInput{Plan: in.Plan, Custody: in.Custody, Firewall: in.Firewall}); err != nil {
		out.DriftError = message(err)
	} else {
		out.Drift = d.Items
	}
	for _, bm := range in.Modules {
		name := bm.Module
		m, ok := auth.Plan.Module(name)
		if !ok {
			out.Conflicts = append(out.Conflicts, ModuleConflicts{Module: name, Error: "not in the node's plan"})
			continue
		}
		heartbeat(ctx, "brief: "+name+"'s files")
		mc := ModuleConflicts{Module: name}
		merges, err := a.conflictsOf(auth, m, bm.Decisions)
		for _, fm := range merges {
			mc.Conflicts = append(mc.Conflicts, fm.Conflicts...)
		}
		var ae *temporal.ApplicationError
		if err != nil && !(errors.As(err, &ae) && ae.Type() == ErrFileConflict) {
			mc.Error = message(err)
		}
		out.Conflicts = append(out.Conflicts, mc)
	}
	return out, nil
}

// message is an error's text without the SDK's wrapping.
func message(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}
