package workflows

import (
	"time"

	"adoption/config"
)

// A module without a container but with a declared health is checked before
// it is migrated; one without either is not (there is nothing to check).
func (s *NodeSuite) TestHostServiceHealthRuns() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	calls := []string{}
	mockCutover(s.env, &calls, "")
	plan := testPlan()
	plan.Modules[1].Health = &config.Health{TCP: "127.0.0.1:8080"}
	s.signal(time.Minute, SignalMigrate, "web")
	s.signal(5*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: plan})
	st := s.result()
	s.Equal([]string{"preflight web", "open web", "healthy web"}, calls)
	s.Equal(ModuleMigrated, st.module("web").State)
}
