package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
	"adoption/firewall/flip"
)

// A briefing runs the Brief activity on the node at once with the modules
// still to migrate, answers with what the node found (its drift refusing
// the preview it returns), and records nothing: no preview, no drift, no
// event.
func (s *NodeSuite) TestBriefAsksTheNodeAndRecordsNothing() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var sent activities.BriefInput
	s.env.OnActivity(a.Brief, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BriefInput) (*activities.NodeBriefing, error) {
			sent = in
			return &activities.NodeBriefing{Preview: &flip.Preview{Approved: true},
				Drift: []activities.DriftItem{{Kind: "file", Path: "/srv/app/settings", What: "changed since adoption"}}}, nil
		}).Once()
	var before, after State
	var got *activities.NodeBriefing
	s.env.RegisterDelayedCallback(func() { before = s.query() }, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateBrief, "b1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { s.Fail("refused: " + err.Error()) }, OnAccept: func() {},
			OnComplete: func(v any, err error) { s.NoError(err); got, _ = v.(*activities.NodeBriefing) },
		}, RequestInput{})
	}, time.Minute+time.Second)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()

	s.Require().NotNil(got)
	s.Len(sent.Modules, 2)
	s.Equal("n1", sent.Spec.Node)
	s.False(got.Preview.Approved, "the node's drift and the pending modules refuse the preview")
	s.Contains(got.Preview.Reasons, "1 drift(s) not reviewed: accept them (adopt drift accept n1) or restore the originals")
	s.Equal(before.LastPreview, after.LastPreview)
	s.Equal(before.Drift, after.Drift)
	s.Equal(len(before.Events), len(after.Events))
}
