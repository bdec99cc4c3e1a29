// This file holds the briefing of a running workflow with the parts the
// node answered now (preview, drift, each module's key conflicts) in place
// of what the workflow last recorded.

package briefing

import (
	"time"

	"adoption/activities/nodewire"
	"adoption/workflows"
)

// BuildAsked is Build on state with the node's answer nb laid over it.
// Without an answer (nil), the recorded parts stand, and the source says
// why the node was not asked.
func BuildAsked(state workflows.State, nb *nodewire.NodeBriefing, why string, now time.Time) Brief {
	if nb == nil {
		b := Build(state.Plan, nil, &state, now)
		b.Source = "the node's workflow, as last recorded (the node was not asked: " + why + ")"
		return b
	}
	if nb.Preview != nil {
		state.LastPreview = nb.Preview
	}
	if nb.DriftError == "" {
		state.Drift = nb.Drift
	}
	mods := make([]workflows.ModuleState, len(state.Modules))
	copy(mods, state.Modules)
	for i := range mods {
		for _, mc := range nb.Conflicts {
			if mc.Module == mods[i].Name && mc.Error == "" {
				// The node answers for the files; the container's
				// conflicts (by the module's name) stay as recorded.
				var kept []workflows.FileConflict
				for _, c := range mods[i].Conflicts {
					if c.Path == mods[i].Name {
						kept = append(kept, c)
					}
				}
				mods[i].Conflicts = kept
				for _, c := range mc.Conflicts {
					mods[i].Conflicts = append(mods[i].Conflicts, workflows.FileConflict(c))
				}
			}
		}
	}
	state.Modules = mods
	b := Build(state.Plan, nil, &state, now)
	b.Source = "the node, asked now (preview, drift, key conflicts), and its workflow"
	for _, e := range []string{nb.PreviewError, nb.DriftError} {
		if e != "" {
			b.Risks = append(b.Risks, "the node could not answer: "+e)
		}
	}
	for _, mc := range nb.Conflicts {
		if mc.Error != "" {
			b.Risks = append(b.Risks, "module "+mc.Module+": its conflicts could not be measured: "+mc.Error)
		}
	}
	return b
}
