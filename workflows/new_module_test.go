// Tests of a module new in the plan a migrate carries: it has no state
// until the request is served, and must still be queued once only.
package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/config"
)

// withDB is testPlan with a module db that the node's plan does not have.
func withDB() *config.Plan {
	p := testPlan()
	p.Modules = append(p.Modules, config.ModulePlan{Name: "db", Ports: []config.Port{{Num: 5432, Proto: "tcp"}}})
	return &p
}

// Two migrates of the same new module while the first waits in the queue
// (behind mail's cutover): the second is refused, by signal and by Update,
// and db's cutover runs once. Before, both were queued, and the second
// cutover failed its preflight (already migrated), leaving db failed.
func (s *NodeSuite) TestNewModuleQueuedOnce() {
	s.expectAdoption(time.Second)
	s.slowCreate(2 * time.Minute)
	mockCutover(s.env, &s.calls, "")
	s.expectRelease()
	var updErr error
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "db", Plan: withDB()})
	}, time.Minute+10*time.Second)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "db", Plan: withDB()})
		s.env.UpdateWorkflow(UpdateMigrate, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updErr = err }, OnAccept: func() { s.Fail("a second migrate db was accepted") },
			OnComplete: func(any, error) {},
		}, RequestInput{Module: "db", Plan: withDB()})
	}, time.Minute+20*time.Second)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Require().Error(updErr)
	s.Contains(updErr.Error(), "module db is already queued")
	s.Equal(ModuleMigrated, st.module("db").State)
	s.Equal(1, st.module("db").Attempts)
	s.Equal(1, strings.Count(strings.Join(s.calls, ","), "preflight db"), "calls: %v", s.calls)
	var refused bool
	for _, e := range st.Events {
		refused = refused || strings.HasPrefix(e.Text, "refused migrate db: module db is already queued")
	}
	s.True(refused, "events: %+v", st.Events)
}

// A migrate served for a module already migrated (queued twice by a run
// from before the check) is skipped with an event, not cut over again.
func (s *NodeSuite) TestMigrateOfMigratedModuleSkipped() {
	mockCutover(s.env, &s.calls, "")
	wf := func(ctx workflow.Context) (*State, error) {
		n := &node{s: State{Node: "n1", Phase: PhaseAdopted, Plan: testPlan(),
			Modules: []ModuleState{{Name: "mail", State: ModuleMigrated, Attempts: 1}, {Name: "web", State: ModulePending}}}}
		n.migrate(ctx, "mail")
		return &n.s, nil
	}
	s.env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "twice"})
	s.env.ExecuteWorkflow("twice")
	st := s.result()
	s.Empty(s.calls)
	s.Equal(ModuleMigrated, st.module("mail").State)
	s.Equal(1, st.module("mail").Attempts)
	s.Require().NotEmpty(st.Events)
	s.Contains(st.Events[len(st.Events)-1].Text, "skipped migrate mail: it is already migrated")
}
