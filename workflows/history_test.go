package workflows

import (
	"reflect"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"

	"adoption/activities"
)

// While the node's agent does not answer, the activity is scheduled once
// (no resubmission) and waits in its queue with no timer beside it: status
// finds it among the pending activities, and the state says nothing of a
// wait meanwhile or after.
func (s *NodeSuite) TestDownAgentWaitsOnce() {
	s.expectAdoption(8 * time.Minute)
	s.expectRelease()
	var during, after State
	s.env.RegisterDelayedCallback(func() { during = s.query() }, 6*time.Minute)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 9*time.Minute)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})

	s.result()
	s.Equal(PhaseProbing, during.Phase)
	s.Empty(during.Waiting)
	s.Empty(after.Waiting)
	s.Equal([]string{"probe", "adopt", "release"}, s.calls, "the probe must be scheduled once")
}

// A request still queued when the workflow ends is answered in its state
// with the reason, not silently dropped.
func (s *NodeSuite) TestQueuedRequestAnsweredWhenWorkflowEnds() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.Release, mock.Anything, mock.Anything).After(time.Minute).Run(s.record("release")).
		Return(&activities.ReleaseResult{}, nil).Once()
	s.signal(time.Minute, SignalRelease, "")
	s.signal(time.Minute+time.Second, SignalMigrate, "mail")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})

	st := s.result()
	s.Equal(PhaseReleased, st.Phase)
	s.Empty(st.Queue)
	found := false
	for _, e := range st.Events {
		found = found || strings.Contains(e.Text, "not served: migrate mail: node n1 is released")
	}
	s.True(found, "no answer for the queued migrate in %+v", st.Events)
}

// Every activity named as heartbeating exists (a rename would silently
// drop its heartbeat timeout), and names resolve as the SDK registers them.
func (s *NodeSuite) TestHeartbeatingActivitiesExist() {
	t := reflect.TypeOf(&activities.Activities{})
	for name := range heartbeating {
		_, ok := t.MethodByName(name)
		s.True(ok, "heartbeating activity %s is not a method of activities.Activities", name)
	}
	s.Equal("Probe", activityName(a.Probe))
	s.Equal("Preview", activityName(a.Preview))
	s.False(heartbeating[activityName(a.Preview)])
}
