package workflows

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall/flip"
)

// flipPlan is testPlan with only module web (no container), so a flip can
// follow one quick migration.
func flipPlan() config.Plan {
	p := testPlan()
	p.Modules = p.Modules[1:]
	p.ConfirmTimeout = time.Minute
	p.ManagementPorts = []config.Port{{Num: 22, Proto: "tcp"}}
	return p
}

func (s *NodeSuite) expectPreview(approved bool) {
	s.env.OnActivity(a.Preview, mock.Anything, mock.Anything).Run(s.record("preview")).
		Return(&flip.Preview{Approved: approved, FoundFingerprint: "f1"}, nil)
}

// The preview refuses while a module is not migrated; nothing flips.
func (s *NodeSuite) TestFlipRefusedWhileModulePending() {
	s.expectAdoption(time.Second)
	s.expectPreview(true)
	s.expectRelease()
	var after State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	s.result()
	s.Equal(PhaseAdopted, after.Phase)
	s.Require().NotNil(after.LastPreview)
	s.False(after.LastPreview.Approved)
	s.Contains(after.LastError, "module web is pending, not migrated")
	s.Equal([]string{"probe", "adopt", "preview", "release"}, s.calls)
}

// recordTrip records a FlipTrip call as "fliptrip <id>" in s.calls.
func (s *NodeSuite) recordTrip(args mock.Arguments) {
	s.calls = append(s.calls, "fliptrip "+args[1].(activities.FlipTripInput).ID)
}

// Approved: the node previews, flips, confirms and commits in one round
// trip; converged, the workflow completes. A second flip signal, and one
// sent while the cutover runs, flip once, after the cutover. The spec
// carries the management port and the migrated module's port, and the
// node's own preview is the one shown.
func (s *NodeSuite) TestFlipOnceAfterCutover() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	var spec flip.MeshSpec
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		in := args[1].(activities.FlipTripInput)
		spec = in.Spec
		s.calls = append(s.calls, fmt.Sprintf("fliptrip preview=%v expect=%q", in.Preview, in.ExpectFound+in.ExpectDerived))
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Listing: "/x", Preview: &flip.Preview{Approved: true, FoundFingerprint: "f1"}}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "web"})
		s.env.SignalWorkflow(SignalFlip, RequestInput{})
		s.env.SignalWorkflow(SignalFlip, RequestInput{}) // refused: already queued
	}, time.Minute)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	st := s.result()
	s.Equal(PhaseConverged, st.Phase)
	s.Equal([]string{"probe", "adopt", "preflight web", "open web", `fliptrip preview=true expect=""`}, s.calls)
	refused := false
	for _, e := range st.Events {
		refused = refused || strings.HasSuffix(e.Text, "a flip of node n1 is already queued")
	}
	s.True(refused, "the second flip signal is refused as queued")
	s.Equal([]flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}, {Port: config.Port{Num: 8080, Proto: "tcp"}, Owner: "web"}}, spec.Input)
	s.Equal(FlipStateCommitted, st.Flip.State)
	s.Equal("/x", st.Flip.Listing)
	s.Equal(1, st.FlipAttempts)
	s.Require().NotNil(st.LastPreview, "the node's own preview is the one shown")
	s.Equal("f1", st.LastPreview.FoundFingerprint)
}

// Not confirmed: the node's confirmation fails (a declared module does not
// answer), or the node answers without having committed; either way the
// workflow asks the node to revert (its watchdog may have already) and the
// node stays adopted, saying why.
func (s *NodeSuite) TestFlipNotConfirmedReverts() {
	for _, tc := range []struct {
		name string
		res  *activities.FlipResult
		err  error
		why  string
	}{
		{"confirmation failed", nil, temporal.NewNonRetryableApplicationError("module web does not answer its health check after the flip", "X", nil), "module web does not answer"},
		{"answered uncommitted", &activities.FlipResult{ID: "n1-1", State: "flipped"}, nil, `the node answered "flipped", not committed`},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.expectAdoption(time.Second)
			s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(tc.res, tc.err).Once()
			s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).Return(&activities.FlipResult{}, nil).Once()
			s.expectRelease()
			after := s.flipOnlyThenRelease()
			s.Equal([]string{"probe", "adopt", "fliptrip n1-1", "revert", "release"}, s.calls)
			s.Equal(PhaseAdopted, after.Phase)
			s.Require().NotNil(after.Flip)
			s.Equal(FlipStateReverted, after.Flip.State)
			s.Contains(after.LastError, "flip n1-1 reverted: "+tc.why)
		})
	}
}

// flipOnly is flipPlan without modules: the preview approves at once.
func flipOnly() config.Plan {
	p := flipPlan()
	p.Modules = nil
	return p
}

// An edited plan sent with a preview while the flip's own preview runs on
// the node is refused with a reason, and the node is asked to preview and
// flip the spec of the plan in force, with no expectations of its own: in
// the experiment that found this, the preview approved 22/tcp and the
// flip applied 2222/tcp.
func (s *NodeSuite) TestFlipAppliesWhatItsPreviewApproved() {
	s.expectAdoption(time.Second)
	var flipped []activities.FlipTripInput
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).After(time.Minute).Run(func(args mock.Arguments) {
		flipped = append(flipped, args[1].(activities.FlipTripInput))
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Preview: &flip.Preview{Approved: true, FoundFingerprint: "f1", DerivedFingerprint: "d1"}}, nil).Once()
	edited := flipOnly()
	edited.ManagementPorts = []config.Port{{Num: 2222, Proto: "tcp"}}
	var during error
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdatePreview, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { during = err }, OnAccept: func() { s.Fail("a preview with a plan was accepted during the flip") },
			OnComplete: func(any, error) {},
		}, RequestInput{Plan: &edited})
	}, time.Minute+30*time.Second)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal(PhaseConverged, st.Phase)
	s.Require().Error(during)
	s.Contains(during.Error(), "node n1 is flipping")
	s.Require().Len(flipped, 1)
	s.True(flipped[0].Preview)
	s.Empty(flipped[0].ExpectFound + flipped[0].ExpectDerived)
	s.Equal([]flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}}, flipped[0].Spec.Input)
	s.Equal([]config.Port{{Num: 22, Proto: "tcp"}}, st.Plan.ManagementPorts)
}

// A preview sent while a flip is queued is refused too: the flip runs its
// own preview with the plan it carries. That preview, on the node, refuses:
// nothing was applied, so the node is adopted as before, with no flip
// attempt counted and the node's reasons in status.
func (s *NodeSuite) TestPreviewRefusedWhileFlipQueued() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(&activities.FlipResult{ID: "n1-1", State: activities.FlipPreviewRefused,
		Preview: &flip.Preview{Reasons: []string{"9000/tcp would close: declare it or drop it"}}}, nil).Once()
	s.expectRelease()
	var after State
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 4*time.Minute)
	var queued error
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "web"})
		s.env.SignalWorkflow(SignalFlip, RequestInput{})
		s.env.UpdateWorkflow(UpdatePreview, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { queued = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, RequestInput{})
	}, time.Minute)
	s.signal(5*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	s.result()
	s.Require().Error(queued)
	s.Contains(queued.Error(), "a flip of node n1 is queued")
	s.Equal(PhaseAdopted, after.Phase)
	s.Nil(after.Flip)
	s.Zero(after.FlipAttempts)
	s.Contains(after.LastError, "flip refused by the preview: 9000/tcp would close")
	s.Require().NotNil(after.LastPreview)
	s.False(after.LastPreview.Approved)
	s.Equal([]string{"probe", "adopt", "preflight web", "open web", "fliptrip n1-1", "release"}, s.calls)
}

// The node confirmed the flip but the round trip's answer was lost: the
// workflow asks for a revert, the node answers "already confirmed" by its
// own type, and the workflow goes on to commit. It never says reverted.
func (s *NodeSuite) TestFlipConfirmAnswerLostCommits() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(nil,
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE, nil)).Once()
	s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).Return(nil,
		temporal.NewNonRetryableApplicationError("flip n1-1 is already confirmed on this node: not reverting it", activities.ErrFlipConfirmed, nil)).Once()
	s.env.OnActivity(a.CommitFlip, mock.Anything, mock.Anything).Run(s.record("commit")).Return(&activities.FlipResult{Listing: "/x"}, nil).Once()
	s.signal(time.Minute, SignalFlip, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(FlipStateCommitted, st.Flip.State)
	s.Equal("/x", st.Flip.Listing)
	s.Equal([]string{"probe", "adopt", "fliptrip n1-1", "revert", "commit"}, s.calls)
	for _, e := range st.Events {
		s.NotContains(e.Text, "reverted", "the workflow said reverted while the node kept the flip")
	}
}

// What the node says decides what the workflow says: a flip the node never
// applied is "not-applied", not "reverted", and nothing is reverted for it.
// Stale twice (the found firewall moved again after the preview apart
// approved the second try) it is not tried a third time; a failed round
// trip whose revert the node answers "never applied" is not-applied too.
func (s *NodeSuite) TestFlipStaleIsNotApplied() {
	stale := func() error {
		return temporal.NewNonRetryableApplicationError("the mesh's ruleset to apply is not the one the preview approved", activities.ErrStalePreview, nil)
	}
	for _, tc := range []struct {
		name  string
		setup func()
		calls []string
		why   string
	}{
		{"stale twice", func() {
			s.expectPreview(true)
			// A third try would be answered committed: it must not come.
			tries := 0
			s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(func(context.Context, activities.FlipTripInput) (*activities.FlipResult, error) {
				if tries++; tries <= 2 {
					return nil, stale()
				}
				return &activities.FlipResult{State: FlipStateCommitted}, nil
			})
		}, []string{"probe", "adopt", "fliptrip n1-1", "preview", "fliptrip n1-2", "release"}, "not the one the preview approved"},
		{"revert says never applied", func() {
			s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(nil,
				temporal.NewNonRetryableApplicationError("the node lost its answer", "X", nil)).Once()
			s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).Return(&activities.FlipResult{State: FlipStateNotApplied}, nil).Once()
		}, []string{"probe", "adopt", "fliptrip n1-1", "revert", "release"}, "the node lost its answer"},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.expectAdoption(time.Second)
			tc.setup()
			s.expectRelease()
			after := s.flipOnlyThenRelease()
			s.Equal(tc.calls, s.calls)
			s.Equal(PhaseAdopted, after.Phase)
			s.Require().NotNil(after.Flip)
			s.Equal(FlipStateNotApplied, after.Flip.State)
			s.Contains(after.LastError, tc.why)
			s.Contains(after.LastError, "nothing was changed")
		})
	}
}

// A commit that fails leaves the node flipping with the flip committing and
// the reason in status; a release is refused meanwhile; `retry` runs the
// commit again (sent as an Update, as the CLI does), and only its success
// converges the node. In one round trip the node reports the flip
// confirmed and its commit failed; the workflow learns it is confirmed
// from the revert the node refuses, and commits.
func (s *NodeSuite) TestFlipCommitFailsThenRetried() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(s.recordTrip).Return(nil,
		temporal.NewNonRetryableApplicationError("flip n1-1 is confirmed; its commit failed: remove the predecessor's firewall: device busy", "X", nil)).Once()
	s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).Return(nil,
		temporal.NewNonRetryableApplicationError("flip n1-1 is already confirmed on this node: not reverting it", activities.ErrFlipConfirmed, nil)).Once()
	s.env.OnActivity(a.CommitFlip, mock.Anything, mock.Anything).Run(s.record("commit")).Return(nil,
		temporal.NewNonRetryableApplicationError("remove the predecessor's firewall: device busy", "X", nil)).Once()
	s.env.OnActivity(a.CommitFlip, mock.Anything, mock.Anything).Run(s.record("commit")).Return(&activities.FlipResult{Listing: "/x"}, nil).Once()
	var failed State
	var release, again error
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() {
		failed = s.query()
		s.env.UpdateWorkflow(UpdateRelease, "r1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { release = err }, OnAccept: func() { s.Fail("release accepted while flipping") }, OnComplete: func(any, error) {},
		}, RequestInput{})
		s.env.UpdateWorkflow(UpdateFlip, "f2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { again = err }, OnAccept: func() { s.Fail("a flip accepted while one waits for its commit") }, OnComplete: func(any, error) {},
		}, RequestInput{})
	}, 5*time.Minute)
	// The retry as the CLI sends it, an Update: its validator lets it in.
	var retry error
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateRetry, "r2", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { retry = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, RequestInput{})
	}, 6*time.Minute)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	st := s.result()
	s.Require().NoError(retry)
	s.Equal(PhaseFlipping, failed.Phase)
	s.Equal(FlipStateCommitting, failed.Flip.State)
	s.Contains(failed.LastError, "device busy")
	s.Contains(failed.LastError, "adopt retry n1")
	s.Contains(NextStep(&failed), "adopt retry n1")
	s.Require().Error(release)
	s.Contains(release.Error(), "node n1 is flipping")
	s.Require().Error(again)
	s.Contains(again.Error(), "waits for its commit: adopt retry n1")
	s.Equal(PhaseConverged, st.Phase)
	s.Equal(FlipStateCommitted, st.Flip.State)
	s.Equal("/x", st.Flip.Listing)
	s.Equal(1, st.FlipAttempts)
	s.Equal([]string{"probe", "adopt", "fliptrip n1-1", "revert", "commit", "commit"}, s.calls)
}

// Bad input: a retry when no commit (nor adoption, nor genesis) failed is
// refused by the event log, and changes nothing.
func (s *NodeSuite) TestRetryWithNothingToCommit() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var before, after State
	s.env.RegisterDelayedCallback(func() { before = s.query() }, time.Minute)
	s.signal(time.Minute+time.Second, SignalRetry, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipOnly()})
	s.result()
	s.Equal(before.Phase, after.Phase)
	s.Equal(before.Flip, after.Flip)
	s.Contains(after.Events[len(after.Events)-1].Text, "no flip waits for its commit either; nothing changed")
}
