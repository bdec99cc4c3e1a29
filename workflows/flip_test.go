package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall"
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
		Return(&firewall.Preview{Approved: approved, FoundFingerprint: "f1"}, nil)
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

// Approved: flip, confirm, commit, converged; the workflow completes. A
// second flip signal, and one sent while the cutover runs, flip once, after
// the cutover. The spec carries the management port and the migrated
// module's port.
func (s *NodeSuite) TestFlipOnceAfterCutover() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	s.expectPreview(true)
	var spec firewall.MeshSpec
	s.env.OnActivity(a.Flip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		in := args[1].(activities.FlipInput)
		spec = in.Spec
		s.calls = append(s.calls, "flip "+in.ExpectFound)
	}).Return(&activities.FlipResult{State: "flipped"}, nil).Once()
	s.env.OnActivity(a.ConfirmFlip, mock.Anything, mock.Anything).Run(s.record("confirm")).Return(&activities.FlipResult{}, nil).Once()
	s.env.OnActivity(a.CommitFlip, mock.Anything, mock.Anything).Run(s.record("commit")).Return(&activities.FlipResult{Listing: "/x"}, nil).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "web"})
		s.env.SignalWorkflow(SignalFlip, RequestInput{})
		s.env.SignalWorkflow(SignalFlip, RequestInput{}) // refused: already queued
	}, time.Minute)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	st := s.result()
	s.Equal(PhaseConverged, st.Phase)
	s.Equal([]string{"probe", "adopt", "preflight web", "open web", "preview", "flip f1", "confirm", "commit"}, s.calls)
	s.Equal([]firewall.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}, {Port: config.Port{Num: 8080, Proto: "tcp"}, Owner: "web"}}, spec.Input)
	s.Equal("committed", st.Flip.State)
}

// Not confirmed in time: the workflow reverts (the watchdog may have
// already) and the node stays adopted, saying why.
func (s *NodeSuite) TestFlipNotConfirmedReverts() {
	p := flipPlan()
	p.Modules = nil
	s.expectAdoption(time.Second)
	s.expectPreview(true)
	s.env.OnActivity(a.Flip, mock.Anything, mock.Anything).Return(&activities.FlipResult{State: "flipped"}, nil).Once()
	s.env.OnActivity(a.ConfirmFlip, mock.Anything, mock.Anything).Return(nil,
		temporal.NewNonRetryableApplicationError("module web does not answer", "X", nil)).Once()
	s.env.OnActivity(a.RevertFlip, mock.Anything, mock.Anything).Run(s.record("revert")).Return(&activities.FlipResult{}, nil).Once()
	s.expectRelease()
	var after State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 5*time.Minute)
	s.signal(6*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	s.result()
	s.Equal(PhaseAdopted, after.Phase)
	s.Equal("reverted", after.Flip.State)
	s.Contains(after.LastError, "not confirmed within 1m0s")
	s.Contains(s.calls, "revert")
}
