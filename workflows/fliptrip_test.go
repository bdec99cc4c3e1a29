package workflows

import (
	"errors"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/firewall/flip"
	"adoption/witness"
)

// Workflow tests of the flip in one round trip, the node's only flip: one
// node activity, the witness beside it, its verdict by query; an agent
// that predates it is refused. flip_test.go has the flip's outcomes that
// the node's record decides (revert, commit, not applied).

// verdictAt queries the witness's verdict on flip id at time at.
func (s *NodeSuite) verdictAt(at time.Duration, id string, into *activities.WitnessVerdict) {
	s.env.RegisterDelayedCallback(func() {
		v, err := s.env.QueryWorkflow(activities.QueryFlipWitness, id)
		s.Require().NoError(err)
		s.Require().NoError(v.Get(into))
	}, at)
}

// Approved: one node activity, the witness started beside it (told which
// pending activity to wait for), its verdict answered by the query while
// flipOnlyThenRelease runs a node on flipOnly's plan, flips it a minute
// in and releases it at six; it returns its state queried at five.
func (s *NodeSuite) flipOnlyThenRelease() State {
	var after State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 5*time.Minute)
	s.signal(6*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	s.result()
	return after
}

// the node's activity runs; converged, with no other flip activity.
func (s *NodeSuite) TestFlipTripConverges() {
	s.expectAdoption(time.Second)
	var in activities.FlipTripInput
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).After(time.Minute).Run(func(args mock.Arguments) {
		in = args[1].(activities.FlipTripInput)
		s.calls = append(s.calls, "fliptrip")
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Listing: "/x", Preview: &flip.Preview{Approved: true, FoundFingerprint: "f1"}}, nil).Once()
	var verdict activities.WitnessVerdict
	s.signal(time.Minute, SignalFlip, "")
	s.verdictAt(90*time.Second, "n1-1", &verdict)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal([]string{"probe", "adopt", "fliptrip"}, s.calls)
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(FlipStateCommitted, st.Flip.State)
	s.Equal("/x", st.Flip.Listing)
	s.Equal(1, st.FlipAttempts)
	s.True(in.Witness && in.Preview)
	s.Equal("n1-1", in.ID)
	s.Require().Len(s.witnessed, 1)
	s.Require().NotNil(s.witnessed[0].After)
	s.Equal(witness.After{WorkflowID: s.witnessed[0].After.WorkflowID, RunID: s.witnessed[0].After.RunID, Activity: "FlipTrip", FlipID: "n1-1"}, *s.witnessed[0].After)
	s.Equal(activities.WitnessAnswered, verdict.State)
	s.Equal("n1-1", verdict.ID)
	s.Require().NotNil(st.LastPreview)
	s.Equal("f1", st.LastPreview.FoundFingerprint)
	said := false
	for _, e := range st.Events {
		said = said || strings.HasPrefix(e.Text, "flipped (n1-1): applied, reached Temporal, witnessed from outside (22/tcp on 192.0.2.1), confirmed")
	}
	s.True(said, "the flip's event names the witness's answer")
}

// A node that read the verdict from the witness's heartbeat commits before
// the witness completes (it lingers until the node read it): the workflow
// waits for the witness, which is not cancelled, and the flip's event still
// names what answered.
func (s *NodeSuite) TestFlipTripWitnessCompletesAfterTheNode() {
	s.expectAdoption(time.Second)
	s.witnessAfter = 2 * time.Minute
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).After(time.Minute).Run(s.record("fliptrip")).
		Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Listing: "/x", Preview: &flip.Preview{Approved: true}}, nil).Once()
	var during State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { during = s.query() }, 150*time.Second)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(FlipStateCommitted, st.Flip.State)
	s.Equal(PhaseFlipping, during.Phase, "converged before the witness completed")
	said := false
	for _, e := range st.Events {
		said = said || strings.HasPrefix(e.Text, "flipped (n1-1): applied, reached Temporal, witnessed from outside (22/tcp on 192.0.2.1), confirmed")
	}
	s.True(said, "the flip's event names the witness's answer")
}

// A node that confirmed on the witness's answer says which in its result:
// the workflow converges in the task that hears the node, while the
// witness is still pending, and the flip's event names what answered. A
// result that carries another flip's verdict, or none, waits for the
// witness as before.
func (s *NodeSuite) TestFlipTripVerdictCarriedConvergesAtOnce() {
	for _, tc := range []struct {
		name    string
		carried *activities.WitnessVerdict
		atOnce  bool
	}{
		{"this flip's answer", &activities.WitnessVerdict{ID: "n1-1", State: activities.WitnessAnswered, Why: "22/tcp on 192.0.2.9"}, true},
		{"another flip's answer", &activities.WitnessVerdict{ID: "n1-0", State: activities.WitnessAnswered, Why: "22/tcp on 192.0.2.9"}, false},
		{"no verdict", nil, false},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.expectAdoption(time.Second)
			// The node's activity takes a minute, the witness three.
			s.witnessAfter = 3 * time.Minute
			s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).After(time.Minute).Run(s.record("fliptrip")).
				Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Listing: "/x", Preview: &flip.Preview{Approved: true}, Witness: tc.carried}, nil).Once()
			s.signal(time.Minute, SignalFlip, "")
			s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
			st := s.result()
			s.Equal(PhaseConverged, st.Phase)
			s.Equal(FlipStateCommitted, st.Flip.State)
			answered := "22/tcp on 192.0.2.1"
			if tc.atOnce {
				answered = "22/tcp on 192.0.2.9"
			}
			var began, flipped time.Time
			for _, e := range st.Events {
				if strings.HasPrefix(e.Text, "flip n1-1: witnessed from outside the node once applied") {
					began = e.At
				}
				if strings.HasPrefix(e.Text, "flipped (n1-1): applied, reached Temporal, witnessed from outside ("+answered+"), confirmed") {
					flipped = e.At
				}
			}
			s.Require().False(began.IsZero(), "the flip's start is an event")
			s.Require().False(flipped.IsZero(), "the flip's event names the answer it went on with (%s)", answered)
			took := flipped.Sub(began)
			if tc.atOnce {
				s.Less(took, 2*time.Minute, "converged with the node's result, before the witness ended")
			} else {
				s.GreaterOrEqual(took, 3*time.Minute, "waited for the witness")
			}
		})
	}
}

// The witness finds the operator locked out: the verdict says so to the
// node, which reverts; the workflow asks the node, and the node stays
// adopted with the reason.
func (s *NodeSuite) TestFlipTripLockedOutReverts() {
	s.expectAdoption(time.Second)
	s.lockedOut = temporal.NewNonRetryableApplicationError("management port(s) of node n1 did not answer from 10.8.0.2: 22/tcp", witness.ErrLockedOut, nil)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).After(time.Minute).Run(s.record("fliptrip")).
		Return(nil, temporal.NewNonRetryableApplicationError("flip reverted: not confirmed: the way in: locked out", activities.ErrFlipReverted, nil)).Once()
	s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).
		Return(&activities.FlipResult{State: FlipStateReverted}, nil).Once()
	s.expectRelease()
	var verdict activities.WitnessVerdict
	var after State
	s.signal(time.Minute, SignalFlip, "")
	s.verdictAt(90*time.Second, "n1-1", &verdict)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 5*time.Minute)
	s.signal(6*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	s.result()
	s.Equal([]string{"probe", "adopt", "fliptrip", "revert", "release"}, s.calls)
	s.Equal(activities.WitnessLockedOut, verdict.State)
	s.Contains(verdict.Why, "did not answer from 10.8.0.2")
	s.Equal(PhaseAdopted, after.Phase)
	s.Equal(FlipStateReverted, after.Flip.State)
	s.Contains(after.Flip.Error, "the way in: locked out")
}

// The agent dies mid-way: the activity is retried with the same flip ID
// (the node resumes from its record) and the flip counts once.
func (s *NodeSuite) TestFlipTripRetriedWithSameID() {
	s.expectAdoption(time.Second)
	var ids []string
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ids = append(ids, args[1].(activities.FlipTripInput).ID)
	}).Return(nil, errors.New("activity heartbeat timeout: the agent died")).Once()
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ids = append(ids, args[1].(activities.FlipTripInput).ID)
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted}, nil).Once()
	s.signal(time.Minute, SignalFlip, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal([]string{"n1-1", "n1-1"}, ids)
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(1, st.FlipAttempts)
	s.Equal(FlipStateCommitted, st.Flip.State)
}

// The node's own preview refuses: nothing recorded, the flip never tried,
// the node stays adopted with the preview's reasons, and nothing reverts.
func (s *NodeSuite) TestFlipTripPreviewRefused() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.record("fliptrip")).
		Return(&activities.FlipResult{ID: "n1-1", State: activities.FlipPreviewRefused, Preview: &flip.Preview{Reasons: []string{"port 25/tcp would close"}}}, nil).Once()
	s.expectRelease()
	after := s.flipOnlyThenRelease()
	s.Equal([]string{"probe", "adopt", "fliptrip", "release"}, s.calls)
	s.Equal(PhaseAdopted, after.Phase)
	s.Nil(after.Flip)
	s.Equal(0, after.FlipAttempts)
	s.Contains(after.LastError, "flip refused by the preview: port 25/tcp would close")
	s.Require().NotNil(after.LastPreview)
	s.False(after.LastPreview.Approved)
}

// An agent older than FlipTrip does not know it: the flip is refused with
// nothing else tried (no other flip activity, no revert), no attempt
// counted, the node adopted as before and LastError naming the upgrade. The
// same flip once the agent is upgraded converges, as the first attempt.
func (s *NodeSuite) TestFlipTripOlderAgentRefused() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.record("fliptrip")).
		Return(nil, temporal.NewNonRetryableApplicationError("unable to find activityType=FlipTrip", errNotRegistered, nil)).Once()
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).
		Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted}, nil).Once()
	var refused State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { refused = s.query() }, 5*time.Minute)
	s.signal(6*time.Minute, SignalFlip, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal(PhaseAdopted, refused.Phase)
	s.Nil(refused.Flip)
	s.Zero(refused.FlipAttempts)
	s.Contains(refused.LastError, "node n1's agent predates the flip in one round trip")
	s.Contains(refused.LastError, "nothing changed on the node: upgrade adopt-worker on it")
	s.Equal([]string{"probe", "adopt", "fliptrip", "fliptrip n1-1"}, s.calls)
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(1, st.FlipAttempts)
	s.Equal("n1-1", st.Flip.ID)
	s.Empty(st.LastError)
}

// The node refuses the flip as stale (its firewall moved between its own
// preview and the transaction): not applied, previewed apart once, and that
// preview's reasons are what the operator reads; no second flip is tried.
func (s *NodeSuite) TestFlipTripStaleRefusedPreviewsApart() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.record("fliptrip")).
		Return(nil, temporal.NewNonRetryableApplicationError("the found firewall changed since the preview", activities.ErrStalePreview, nil)).Once()
	s.env.OnActivity(a.Preview, mock.Anything, mock.Anything).Run(s.record("preview")).
		Return(&flip.Preview{Reasons: []string{"port 9999/tcp would close"}}, nil).Once()
	s.expectRelease()
	after := s.flipOnlyThenRelease()
	s.Equal([]string{"probe", "adopt", "fliptrip", "preview", "release"}, s.calls)
	s.Equal(PhaseAdopted, after.Phase)
	s.Require().NotNil(after.Flip)
	s.Equal(FlipStateNotApplied, after.Flip.State)
	s.Contains(after.LastError, "flip refused by the preview: port 9999/tcp would close")
}

// Stale, and the preview apart approves: the flip is tried once more, as a
// new attempt, and converges.
func (s *NodeSuite) TestFlipTripStaleApprovedFlipsAgain() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.record("fliptrip")).
		Return(nil, temporal.NewNonRetryableApplicationError("the found firewall changed since the preview", activities.ErrStalePreview, nil)).Once()
	s.env.OnActivity(a.Preview, mock.Anything, mock.Anything).Run(s.record("preview")).
		Return(&flip.Preview{Approved: true}, nil).Once()
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.record("fliptrip")).
		Return(&activities.FlipResult{ID: "n1-2", State: FlipStateCommitted}, nil).Once()
	s.signal(time.Minute, SignalFlip, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal([]string{"probe", "adopt", "fliptrip", "preview", "fliptrip"}, s.calls)
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(2, st.FlipAttempts)
	s.Equal("n1-2", st.Flip.ID)
}
