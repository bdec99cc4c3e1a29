package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
)

// A rehearsal runs the Rehearse activity at once, answers with it and
// leaves the module's state and the queue as they were; one of a migrated
// module is refused by the validator.
func (s *NodeSuite) TestRehearsalChangesNoState() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	calls := []string{}
	mockCutover(s.env, &calls, "")
	s.env.OnActivity(a.Rehearse, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ModuleInput) (*activities.Rehearsal, error) {
			return &activities.Rehearsal{Node: "n1", Module: in.Module, Steps: []activities.RehearsalStep{{Name: "preflight"}}}, nil
		}).Once()
	var before, after State
	var got *activities.Rehearsal
	var migratedErr error
	rehearse := func(id, module string, rejected *error, done func(any)) {
		s.env.UpdateWorkflow(UpdateRehearse, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { *rejected = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) { s.NoError(err); done(v) },
		}, RequestInput{Module: module})
	}
	var none error
	s.env.RegisterDelayedCallback(func() { before = s.query() }, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		rehearse("r1", "mail", &none, func(v any) { got = v.(*activities.Rehearsal) })
	}, time.Minute+time.Second)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalMigrate, "web")
	s.env.RegisterDelayedCallback(func() {
		rehearse("r2", "web", &migratedErr, func(any) { s.Fail("rehearsal of a migrated module ran") })
	}, 5*time.Minute)
	s.signal(6*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()

	s.NoError(none)
	s.Require().NotNil(got)
	s.Equal("mail", got.Module)
	s.Equal(before.Modules, after.Modules)
	s.Equal(before.Queue, after.Queue)
	s.Equal(before.Phase, after.Phase)
	s.Require().Error(migratedErr)
	s.Contains(migratedErr.Error(), "already migrated")
}
