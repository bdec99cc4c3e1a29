package relay

import (
	"testing"

	"adoption/firewall/flip"
	"adoption/workflows"
)

// served reads a node's status: done, still going, or why not.
func TestServed(t *testing.T) {
	mig := NodeRequest{Node: "n1", Kind: KindMigrate, Module: "web"}
	flp := NodeRequest{Node: "n1", Kind: KindFlip}
	mod := func(state, why string) []workflows.ModuleState {
		return []workflows.ModuleState{{Name: "web", State: state, LastError: why}}
	}
	for _, c := range []struct {
		what string
		in   NodeRequest
		st   workflows.State
		ok   bool
		why  string
	}{
		{"migrated", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleMigrated, "")}, true, ""},
		{"migrating", mig, workflows.State{Phase: workflows.PhaseMigrating, Modules: mod(workflows.ModuleMigrating, "")}, false, ""},
		{"failed", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleFailed, "boom")}, false, "migrate web failed: boom"},
		{"failed, queued again", mig, workflows.State{Phase: workflows.PhaseAdopted, Modules: mod(workflows.ModuleFailed, "boom"), Queue: []workflows.Request{{Kind: KindMigrate, Module: "web"}}}, false, ""},
		{"not declared", mig, workflows.State{Phase: workflows.PhaseAdopted}, false, "node n1 does not declare module web"},
		{"converged", flp, workflows.State{Phase: workflows.PhaseConverged}, true, ""},
		{"flip queued", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Reasons: []string{"old"}}, Queue: []workflows.Request{{Kind: KindFlip}}}, false, ""},
		{"flipping", flp, workflows.State{Phase: workflows.PhaseFlipping}, false, ""},
		{"refused by the flip's preview", flp, workflows.State{Phase: workflows.PhaseAdopted, LastError: "flip refused by the preview: 9999/tcp would close"}, false, "flip refused by the preview: 9999/tcp would close"},
		{"preview refused", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Reasons: []string{"8443/tcp would close"}}}, false, "preview refused: 8443/tcp would close"},
		{"reverted", flp, workflows.State{Phase: workflows.PhaseAdopted, LastPreview: &flip.Preview{Approved: true}, Events: []workflows.Event{{Text: "flip reverted: not confirmed"}}}, false, "the flip ended without converging: flip reverted: not confirmed"},
		{"released", flp, workflows.State{Phase: workflows.PhaseReleased}, false, "node n1 is released"},
	} {
		ok, why := served(c.in, c.st)
		if ok != c.ok || why != c.why {
			t.Errorf("%s: served %v %q, want %v %q", c.what, ok, why, c.ok, c.why)
		}
	}
}
