package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/firewall/marks"
)

func controlPlan() config.Plan {
	p := testPlan()
	p.Role = "control"
	p.Foundation = []config.NamedPort{
		{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}},
		{Name: "store", Port: config.Port{Num: 5432, Proto: "tcp"}},
	}
	return p
}

func marked(owner string, port uint16) marks.MarkedRule {
	return marks.MarkedRule{Mark: marks.Mark{Node: "n1", Owner: owner, Port: port, Proto: "tcp"}, Family: "ip", Table: "filter", Chain: "ufw-user-input", Handle: uint64(port)}
}

// Genesis on the control node: ports checked, then opened as marked rules
// owned by the foundation.
func (s *NodeSuite) TestGenesisOpensFoundationPorts() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Run(s.record("check")).
		Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, activities.RulesInput{Plan: controlPlan().Ref(), Owner: "foundation",
		Ports: []config.Port{{Num: 5001, Proto: "tcp"}, {Num: 5432, Proto: "tcp"}}}).Run(s.record("open")).
		Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5001), marked("foundation", 5432)}}, nil).Once()
	s.expectRelease()
	var adopted State
	s.env.RegisterDelayedCallback(func() { adopted = s.query() }, time.Minute)
	s.signal(2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: controlPlan()})
	st := s.result()
	s.Equal([]string{"probe", "adopt", "check", "open", "release"}, s.calls)
	s.Equal("done", adopted.Genesis.State)
	s.Len(adopted.Marks, 2)
	s.Len(adopted.Opened["foundation"], 2)
	s.Empty(st.Marks)
}

// A collision leaves genesis failed with nothing opened; a retry carrying
// a fixed plan checks the new port and opens it.
func (s *NodeSuite) TestGenesisCollisionFixedByPlan() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, activities.ProbeInput{Plan: controlPlan().Ref()}).Return(nil,
		temporal.NewNonRetryableApplicationError("foundation port registry 5001/tcp is held by pid 7 (registry); set foundation.ports.registry to a free port",
			activities.ErrPortCollision, nil)).Once()
	fixed := controlPlan()
	fixed.Foundation[0].Port.Num = 5002
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, activities.ProbeInput{Plan: fixed.Ref()}).Return(&activities.CheckPortsResult{Checked: 2}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.MatchedBy(func(in activities.RulesInput) bool {
		return in.Owner == "foundation" && in.Ports[0].Num == 5002
	})).Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5002)}}, nil).Once()
	s.expectRelease()
	var failed State
	var updErr error
	s.env.RegisterDelayedCallback(func() { failed = s.query() }, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalRetry, RequestInput{Plan: &fixed})
	}, 2*time.Minute)
	s.env.RegisterDelayedCallback(func() {
		other := fixed
		other.Node = "n2"
		s.env.SignalWorkflow(SignalRetry, RequestInput{Plan: &other}) // another node's plan: refused
	}, 90*time.Second)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: controlPlan()})
	st := s.result()
	_ = updErr
	s.Equal("failed", failed.Genesis.State)
	s.Contains(failed.Genesis.Error, "set foundation.ports.registry")
	s.Empty(failed.Marks)
	s.Equal(PhaseAdopted, failed.Phase)
	s.Equal(uint16(5002), st.Plan.Foundation[0].Port.Num)
	s.Equal("done", st.Genesis.State)
	found := false
	for _, e := range st.Events {
		if e.Text == `refused retry: the plan sent is node "n2"'s, not n1's; pass node n1's configuration` {
			found = true
		}
	}
	s.True(found, "a plan of another node must be refused")
}

// While adopted, marked rules are reasserted on a timer; what was put back
// shows in status.
func (s *NodeSuite) TestReconcileReassertsOnTimer() {
	// Runs from before the node watched itself (watch_test.go has theirs).
	s.env.OnGetVersion(changeNodeWatch, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	p := controlPlan()
	p.ReconcileInterval = time.Minute
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Return(&activities.CheckPortsResult{}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.Anything).
		Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5001), marked("foundation", 5432)}}, nil).Once()
	reconciles := 0
	s.env.OnActivity(a.Reconcile, mock.Anything, mock.MatchedBy(func(in activities.ReconcileInput) bool {
		return len(in.Owners["foundation"]) == 2
	})).Run(func(mock.Arguments) { reconciles++ }).Return(func(_ context.Context, _ activities.ReconcileInput) (*activities.RulesResult, error) {
		if reconciles == 2 { // someone deleted one by hand before the second pass
			return &activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5432)}, Present: []marks.MarkedRule{marked("foundation", 5001)}}, nil
		}
		return &activities.RulesResult{Present: []marks.MarkedRule{marked("foundation", 5001), marked("foundation", 5432)}}, nil
	})
	s.expectRelease()
	var after State
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 150*time.Second)
	s.signal(210*time.Second, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	s.result()
	s.GreaterOrEqual(reconciles, 3)
	s.Require().NotNil(after.LastReconcile)
	s.Len(after.Marks, 2)
	restored := false
	for _, e := range after.Events {
		if e.Text == "reconcile: 1 marked rule(s) had vanished and were put back: adoption:n1:foundation:5432/tcp ip/ufw-user-input" {
			restored = true
		}
	}
	s.True(restored, "status must say what reconcile put back: %+v", after.Events)
}

// A module whose container publishes host ports has its forward-path marks
// reasserted by reconcile too, and a module rolled back is no longer
// reasserted on either path.
func (s *NodeSuite) TestReconcileReassertsForwardMarks() {
	s.env.OnGetVersion(changeNodeWatch, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	p := testPlan()
	p.ReconcileInterval = time.Minute
	p.Modules[0].Container.Ports = map[string]string{"18025/tcp": "25/tcp"}
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	var seen []activities.ReconcileInput
	s.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		seen = append(seen, args[1].(activities.ReconcileInput))
	}).Return(&activities.RulesResult{}, nil)
	s.expectRelease()
	s.signal(30*time.Second, SignalMigrate, "mail")
	s.signal(150*time.Second, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
	s.result()
	s.Require().NotEmpty(seen, "reconcile never ran")
	last := seen[len(seen)-1]
	s.Equal([]config.Port{{Num: 18025, Proto: "tcp"}}, last.Forward["mail"], "reconcile must reassert mail's published port on the forward path")
	s.Equal([]config.Port{{Num: 25, Proto: "tcp"}}, last.Owners["mail"])
}
