package workflows

import "time"

// The node drops the fleet's ask: no request, no event, nothing changed.
func (s *NodeSuite) TestNodeDropsTheFleetsAsk() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var before, after State
	s.env.RegisterDelayedCallback(func() { before = s.query() }, time.Minute)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(SignalFleetAsk, nil) }, time.Minute+time.Second)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()
	s.Equal(before.Events, after.Events)
	s.Equal(before.Queue, after.Queue)
}
