package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/watch"
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

// A module whose container publishes host ports has its forward-path marks
// reasserted by the node's watch too, beside its input-path ones; a module
// rolled back is no longer reasserted on either path (the watch goes on for
// the module migrated before it).
func (s *NodeSuite) TestWatchReassertsForwardMarks() {
	for _, tc := range []struct {
		name     string
		failOnce string
		migrated bool
	}{
		{"migrated", "", true},
		{"rolled back", "healthy mail", false},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			p := testPlan()
			p.ReconcileInterval = time.Minute
			p.Modules[0].Container.Ports = map[string]string{"18025/tcp": "25/tcp"}
			s.expectAdoption(time.Second)
			mockCutover(s.env, &s.calls, tc.failOnce)
			s.env.RegisterActivity(&watch.Watcher{})
			var seen []watch.Input
			// The node answers every 20s: a watch cancelled by a request
			// never reaches the mock.
			s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).After(20 * time.Second).Run(func(args mock.Arguments) {
				seen = append(seen, args[1].(watch.Input))
			}).Return(func(_ context.Context, in watch.Input) (*watch.Result, error) {
				return &watch.Result{Digest: in.Known, Checked: true, Bound: true}, nil
			})
			s.expectRelease()
			s.signal(30*time.Second, SignalMigrate, "web")
			s.signal(90*time.Second, SignalMigrate, "mail")
			s.signal(150*time.Second, SignalRelease, "")
			s.env.ExecuteWorkflow(NodeMigration, Input{Plan: p})
			st := s.result()
			s.Equal(tc.migrated, st.module("mail").State == ModuleMigrated)
			s.Require().GreaterOrEqual(len(seen), 3, "watches answered between the migrates and after them")
			s.Equal([]config.Port{{Num: 8080, Proto: "tcp"}}, seen[0].Owners["web"])
			s.Empty(seen[0].Owners["mail"])
			last := seen[len(seen)-1]
			s.True(last.Reconcile)
			s.Equal([]config.Port{{Num: 8080, Proto: "tcp"}}, last.Owners["web"])
			if !tc.migrated {
				s.Empty(last.Owners["mail"], "a rolled-back module's marks are not reasserted")
				s.Empty(last.Forward["mail"], "nor its forward-path ones")
				return
			}
			s.Equal([]config.Port{{Num: 18025, Proto: "tcp"}}, last.Forward["mail"], "the watch must reassert mail's published port on the forward path")
			s.Equal([]config.Port{{Num: 25, Proto: "tcp"}}, last.Owners["mail"])
		})
	}
}
