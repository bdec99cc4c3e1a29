package workflows

import (
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
)

// foundationPlan is controlPlan with a foundation container to raise.
func foundationPlan() config.Plan {
	p := controlPlan()
	p.Modules = nil
	p.FoundationContainers = []config.Container{{Name: "registry", Image: "mesh/registry:1", Ports: map[string]string{"5001/tcp": "5000/tcp"}}}
	return p
}

// Genesis with foundation containers raises them after the ports are
// checked, and opens only the ports something then listens on.
func (s *NodeSuite) TestGenesisRaisesFoundationThenOpensWhatListens() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	registry := config.NamedPort{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}}
	store := config.NamedPort{Name: "store", Port: config.Port{Num: 5432, Proto: "tcp"}}
	s.env.OnActivity(a.RaiseFoundation, mock.Anything, mock.Anything).Run(s.record("raise")).
		Return(&activities.FoundationResult{Raised: []string{"registry"}, Listening: []config.NamedPort{registry}, Silent: []config.NamedPort{store}}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.MatchedBy(func(in activities.RulesInput) bool {
		return in.Owner == "foundation" && len(in.Ports) == 1 && in.Ports[0] == registry.Port
	})).Run(s.record("open")).Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5001)}}, nil).Once()
	s.expectRelease()
	var adopted State
	s.env.RegisterDelayedCallback(func() { adopted = s.query() }, time.Minute)
	s.signal(2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: foundationPlan()})
	s.result()
	s.Equal([]string{"probe", "adopt", "check", "raise", "open", "release"}, s.calls)
	s.Equal("done", adopted.Genesis.State)
	s.Equal([]config.Port{registry.Port}, adopted.Opened["foundation"])
	said := false
	for _, e := range adopted.Events {
		if e.Text == "genesis: 1 container(s) raised (registry); foundation port store 5432/tcp not opened: nothing listens on it; 1 foundation port(s) free and opened through the found firewall" {
			said = true
		}
	}
	s.True(said, "the event must say what was raised and what was not opened: %v", adopted.Events)
}

// A genesis that failed leaves the flip refused, by name, on both paths:
// the update (adopt flip waits for it) and a flip signal served anyway.
func (s *NodeSuite) TestFlipRefusedWhileGenesisFailed() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	s.env.OnActivity(a.RaiseFoundation, mock.Anything, mock.Anything).Run(s.record("raise")).Return(nil,
		temporal.NewNonRetryableApplicationError("genesis: foundation.containers[0] (registry): wait healthy failed", activities.ErrGenesis, nil)).Once()
	s.expectPreview(true)
	s.expectRelease()
	p := foundationPlan()
	var after State
	var updErr error
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateFlip, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updErr = err }, OnAccept: func() { s.Fail("a flip accepted before genesis succeeded") }, OnComplete: func(any, error) {},
		}, RequestInput{})
	}, time.Minute)
	s.signal(90*time.Second, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	s.result()
	s.Require().Error(updErr)
	s.Contains(updErr.Error(), "genesis has not succeeded (failed)")
	s.Equal("failed", after.Genesis.State)
	s.Require().NotNil(after.LastPreview)
	s.False(after.LastPreview.Approved)
	s.Contains(after.LastError, "genesis has not succeeded (failed): the foundation's ports registry 5001/tcp, store 5432/tcp would not be in the mesh's ruleset")
	s.Nil(after.Flip)
}

// A run with no recorded genesis outcome on its control node (a state
// carried from before genesis was recorded) runs genesis before it flips:
// the flip request is accepted (genesis is decided when the flip is
// served), genesis raises and opens, and the derived ruleset carries the
// foundation's ports, its published one on the forward path too.
func (s *NodeSuite) TestFlipRunsGenesisWithNoRecordedOutcome() {
	p := foundationPlan()
	p.ConfirmTimeout = time.Minute
	p.ManagementPorts = []config.Port{{Num: 22, Proto: "tcp"}}
	registry := config.NamedPort{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}}
	store := config.NamedPort{Name: "store", Port: config.Port{Num: 5432, Proto: "tcp"}}
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	s.env.OnActivity(a.RaiseFoundation, mock.Anything, mock.Anything).Run(s.record("raise")).
		Return(&activities.FoundationResult{Raised: []string{"registry"}, Listening: []config.NamedPort{registry}, Silent: []config.NamedPort{store}}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.MatchedBy(func(in activities.RulesInput) bool {
		return in.Owner == "foundation" && len(in.Ports) == 1 && in.Ports[0] == registry.Port && len(in.Forward) == 1 && in.Forward[0] == registry.Port
	})).Run(s.record("open")).Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5001)}}, nil).Once()
	var spec flip.MeshSpec
	s.env.OnActivity(a.FlipTrip, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		spec = args[1].(activities.FlipTripInput).Spec
		s.calls = append(s.calls, "fliptrip")
	}).Return(&activities.FlipResult{ID: "n1-1", State: FlipStateCommitted, Preview: &flip.Preview{Approved: true, FoundFingerprint: "f1"}}, nil).Once()
	var updErr error
	accepted := false
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateFlip, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updErr = err }, OnAccept: func() { accepted = true }, OnComplete: func(any, error) {},
		}, RequestInput{})
	}, time.Minute)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p, Resume: &State{Node: "n1", Plan: p, Phase: PhaseAdopted}})
	st := s.result()
	s.Require().NoError(updErr)
	s.True(accepted, "a flip with genesis not yet decided is decided when served")
	s.Equal([]string{"check", "raise", "open", "fliptrip"}, s.calls)
	s.Equal(PhaseConverged, st.Phase)
	s.Equal("done", st.Genesis.State)
	s.Contains(spec.Input, flip.Allow{Port: registry.Port, Owner: "foundation"})
	s.Equal([]flip.Allow{{Port: registry.Port, Owner: "foundation"}}, spec.Forward)
}

// The same run whose genesis then fails is not flipped: the preview is
// refused naming the genesis, and nothing reaches the node's firewall.
func (s *NodeSuite) TestFlipRefusedWhenGenesisRunFirstFails() {
	p := foundationPlan()
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	s.env.OnActivity(a.RaiseFoundation, mock.Anything, mock.Anything).Run(s.record("raise")).Return(nil,
		temporal.NewNonRetryableApplicationError("genesis: foundation.containers[0] (registry): create failed", activities.ErrGenesis, nil)).Once()
	s.expectPreview(true)
	s.expectRelease()
	var after State
	s.signal(time.Minute, SignalFlip, "")
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p, Resume: &State{Node: "n1", Plan: p, Phase: PhaseAdopted}})
	s.result()
	s.Equal([]string{"check", "raise", "preview", "release"}, s.calls)
	s.Equal("failed", after.Genesis.State)
	s.Contains(after.LastError, "genesis has not succeeded (failed)")
	s.Nil(after.Flip)
}

// A member declaring the overlay's port is placed once adopted: the port
// checked free again, nothing opened; a holder found then fails the
// placement by name, and a retry places it.
func (s *NodeSuite) TestMemberPlacementChecksOverlayAgain() {
	p := testPlan()
	p.Modules = nil
	p.Foundation = []config.NamedPort{{Name: "overlay", Port: config.Port{Num: 51820, Proto: "udp"}}}
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).Return(nil,
		temporal.NewNonRetryableApplicationError("1 foundation port(s) collide; nothing was opened or started: foundation port overlay 51820/udp is held by pid 88 (tunneld); set foundation.ports.overlay", activities.ErrPortCollision, nil)).Once()
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 1}, nil).Once()
	s.expectRelease()
	var failed, placed State
	s.env.RegisterDelayedCallback(func() { failed = s.query() }, time.Minute)
	s.signal(90*time.Second, SignalRetry, "")
	s.env.RegisterDelayedCallback(func() { placed = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	s.result()
	s.Equal([]string{"probe", "adopt", "check", "check", "release"}, s.calls)
	s.Equal("failed", failed.Genesis.State)
	s.Contains(failed.Genesis.Error, "held by pid 88 (tunneld)")
	s.Equal("done", placed.Genesis.State)
	s.Empty(placed.Opened["foundation"])
	s.Empty(MeshSpec(&placed).Input, "a member's mesh ruleset carries no foundation port")
}

// A member refused at adoption (its overlay's port held) is adopted by a
// retry that carries the fixed plan: the retry's plan is the one adopted.
func (s *NodeSuite) TestAdoptionRetryTakesTheFixedPlan() {
	held, free := testPlan(), testPlan()
	held.Modules, free.Modules = nil, nil
	held.Foundation = []config.NamedPort{{Name: "overlay", Port: config.Port{Num: 53, Proto: "udp"}}}
	free.Foundation = []config.NamedPort{{Name: "overlay", Port: config.Port{Num: 51820, Proto: "udp"}}}
	s.env.OnActivity(a.Probe, mock.Anything, mock.Anything).Run(s.record("probe")).
		Return(&activities.ProbeReport{Node: "n1", Firewall: eval.Report{Kind: "iptables-nft"}}, nil).Twice()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.MatchedBy(func(in activities.AdoptInput) bool { return in.Plan.Hash == held.Hash() })).
		Run(s.record("adopt 53")).Return(nil, temporal.NewNonRetryableApplicationError("foundation port overlay 53/udp is held by pid 9 (dnsmasq)", activities.ErrPortCollision, nil)).Once()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.MatchedBy(func(in activities.AdoptInput) bool { return in.Plan.Hash == free.Hash() })).
		Run(s.record("adopt 51820")).Return(&activities.AdoptResult{Firewall: "iptables-nft"}, nil).Once()
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 1}, nil).Once()
	s.expectRelease()
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(SignalRetry, RequestInput{Plan: &free}) }, time.Minute)
	s.signal(2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: held})
	st := s.result()
	s.Equal([]string{"probe", "adopt 53", "probe", "adopt 51820", "check", "release"}, s.calls)
	s.Equal(uint16(51820), st.Plan.Foundation[0].Port.Num)
}
