package briefing

import (
	"strings"
	"testing"
	"time"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall/flip"
	"adoption/workflows"
)

// A declared file changed since custody: the workflow recorded no drift and
// no conflict, the node answers both now, and the briefing says what the
// node answered (source included); without an answer it says the node was
// not asked, and why.
func TestBriefSaysWhatTheNodeAnswers(t *testing.T) {
	const p = "/srv/app/settings"
	plan := config.Plan{Node: "n1", Modules: []config.ModulePlan{{Name: "app", Files: []config.FilePlan{{Path: p, Format: "env"}}}}}
	st := workflows.State{Node: "n1", Phase: workflows.PhaseAdopted, Plan: plan,
		Modules: []workflows.ModuleState{{Name: "app", State: workflows.ModulePending}}}
	render := func(b Brief) string {
		var md strings.Builder
		if err := Markdown(&md, b); err != nil {
			t.Fatal(err)
		}
		return md.String()
	}
	recorded := render(BuildAsked(st, nil, "its agent is down", time.Now()))
	if !strings.Contains(recorded, "the node was not asked: its agent is down") {
		t.Errorf("a briefing without the node's answer must say so:\n%s", recorded)
	}

	nb := &activities.NodeBriefing{
		Preview: &flip.Preview{Reasons: []string{"1 drift(s) not reviewed"}},
		Drift:   []activities.DriftItem{{Kind: "file", Path: p, Recorded: "aa", Now: "bb", What: p + " changed since adoption"}},
		Conflicts: []activities.ModuleConflicts{{Module: "app", Conflicts: []activities.FileConflict{
			{Path: p, Key: "LEVEL", Why: "changed on the node since custody; the mesh sets it otherwise"}}}},
	}
	asked := render(BuildAsked(st, nb, "", time.Now()))
	for _, want := range []string{
		"the node, asked now",
		p + " LEVEL: changed on the node since custody",
		p + ": " + p + " changed since adoption",
		"refused",
	} {
		if !strings.Contains(asked, want) {
			t.Errorf("the briefing lacks %q:\n%s", want, asked)
		}
	}
	if st.Modules[0].Conflicts != nil {
		t.Error("BuildAsked changed the caller's state")
	}
}
