package workflows

import (
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
)

// A cutover whose last step failed in the workflow's eyes (its answer
// lost, a retry unhealthy) but that the node had confirmed is refused a
// rollback by the node: the module is migrated, with an event saying so,
// and its marked rules are left open.
func (s *NodeSuite) TestRollbackRefusedAsConfirmedLeavesTheModuleMigrated() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CutoverRollback, mock.Anything, mock.Anything).Run(s.record("rollback refused")).
		Return(nil, temporal.NewNonRetryableApplicationError("refused by the node's own records: module mail's cutover was confirmed on node n1", activities.ErrCutoverConfirmed, nil)).Once()
	mockCutover(s.env, &s.calls, "healthy mail")
	s.expectRelease()
	s.signal(time.Minute, SignalMigrate, "mail")
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Equal(ModuleMigrated, st.module("mail").State)
	s.NotContains(s.calls, "close mail")
	var said bool
	for _, e := range st.Events {
		said = said || strings.Contains(e.Text, "cutover mail: migrated (the node had confirmed it")
	}
	s.True(said, "events: %+v", st.Events)
}
