// Tests of a plan sent with a preview while the node is busy: it must not
// replace the plan under a cutover (the cutover would lose its module), and
// a cutover whose module vanished anyway must not panic.
package workflows

import (
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/activities/authority"
	"adoption/config"
	"adoption/firewall/flip"
)

// withoutMail is testPlan with module mail dropped.
func withoutMail() config.Plan {
	p := testPlan()
	p.Modules = p.Modules[1:]
	return p
}

// slowCreate makes mail's container creation take d, so a request can
// arrive in the middle of its cutover.
func (s *NodeSuite) slowCreate(d time.Duration) {
	s.env.OnActivity(a.CutoverCreate, mock.Anything, mock.Anything).After(d).Run(s.record("create mail")).
		Return(&activities.CutoverResult{}, nil).Once()
}

// A preview whose plan drops the module being cut over is refused, naming
// the node, the phase and what to do; the cutover goes on and migrates it.
// Without the refusal the plan replaced the modules under the cutover and
// its next step dereferenced a module that was gone: a panic on every
// replay.
func (s *NodeSuite) TestPreviewWithPlanRefusedDuringCutover() {
	s.expectAdoption(time.Second)
	s.slowCreate(2 * time.Minute)
	mockCutover(s.env, &s.calls, "")
	s.expectRelease()
	var refused error
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() {
		p := withoutMail()
		s.env.UpdateWorkflow(UpdatePreview, "p1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { refused = err },
			OnAccept:   func() { s.Fail("a preview carrying another plan was accepted during a cutover") },
			OnComplete: func(any, error) {},
		}, RequestInput{Plan: &p})
	}, time.Minute+30*time.Second)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Require().Error(refused)
	for _, want := range []string{"node n1 is migrating", "cutover of mail", "adopt status n1", "without --config"} {
		s.Contains(refused.Error(), want)
	}
	s.Equal(ModuleMigrated, st.module("mail").State)
}

// The node's own plan, sent again with a preview (adopt preview --config
// with the file the node runs), changes nothing: it is served during a
// cutover like a preview without a plan.
func (s *NodeSuite) TestPreviewWithSamePlanServedDuringCutover() {
	s.expectAdoption(time.Second)
	s.slowCreate(2 * time.Minute)
	mockCutover(s.env, &s.calls, "")
	s.expectPreview(true)
	s.expectRelease()
	var got *flip.Preview
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() {
		p := testPlan()
		s.env.UpdateWorkflow(UpdatePreview, "p1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { s.Fail("refused: " + err.Error()) },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { s.NoError(err); got, _ = v.(*flip.Preview) },
		}, RequestInput{Plan: &p})
	}, time.Minute+30*time.Second)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Require().NotNil(got)
	s.Equal(ModuleMigrated, st.module("mail").State)
	for _, e := range st.Events {
		s.NotEqual("plan updated", e.Text, "the same plan is not applied again")
	}
}

// A preview whose plan redefines a module with a migrate queued (behind a
// prune, while the node is adopted) is refused too: the queued cutover
// would run with a definition its sender did not send. Idle, the same plan
// is taken.
func (s *NodeSuite) TestPreviewWithPlanRefusedWhileModuleQueued() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	s.env.OnActivity(a.Prune, mock.Anything, mock.Anything).After(2*time.Minute).Run(s.record("prune")).
		Return(&activities.CutoverResult{}, nil).Once()
	s.expectPreview(true)
	s.expectRelease()
	changed := testPlan()
	changed.Modules[1].Ports = []config.Port{{Num: 8081, Proto: "tcp"}}
	var queued, idle error
	taken := false
	preview := func(id string, into *error) {
		s.env.UpdateWorkflow(UpdatePreview, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { *into = err }, OnAccept: func() {},
			OnComplete: func(any, error) { taken = true },
		}, RequestInput{Plan: &changed})
	}
	s.signal(time.Minute, SignalPrune, "")
	s.signal(time.Minute+10*time.Second, SignalMigrate, "web")
	s.env.RegisterDelayedCallback(func() { preview("p1", &queued) }, time.Minute+30*time.Second)
	s.env.RegisterDelayedCallback(func() { preview("p2", &idle) }, 5*time.Minute)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Require().Error(queued)
	s.Contains(queued.Error(), "module web is queued (migrate web)")
	s.NoError(idle)
	s.True(taken)
	s.Equal(ModuleMigrated, st.module("web").State)
	s.Equal([]config.Port{{Num: 8081, Proto: "tcp"}}, st.Plan.Modules[1].Ports)
}

// migrate() whose module left the plan in the middle of its cutover (a
// history from before the preview's refusal) stops at the next step and
// rolls back, with an event, instead of dereferencing the missing module.
func (s *NodeSuite) TestCutoverOfVanishedModuleDoesNotPanic() {
	s.slowCreate(time.Minute)
	mockCutover(s.env, &s.calls, "")
	wf := func(ctx workflow.Context) (*State, error) {
		n := &node{s: State{Node: "n1", Phase: PhaseAdopted, Plan: testPlan(),
			Modules: []ModuleState{{Name: "mail", State: ModuleQueued}, {Name: "web", State: ModulePending}}}}
		workflow.Go(ctx, func(ctx workflow.Context) {
			_ = workflow.Sleep(ctx, 30*time.Second)
			n.applyPlan(ctx, withoutMail()) // what the preview's handler did
		})
		n.migrate(ctx, "mail")
		return &n.s, nil
	}
	s.env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "vanishing"})
	s.env.ExecuteWorkflow("vanishing")
	st := s.result()

	s.Nil(st.module("mail"))
	s.Equal(PhaseAdopted, st.Phase)
	s.Equal([]string{"preflight mail", "open mail", "create mail", "rollback mail", "close mail"}, s.calls)
	var said bool
	for _, e := range st.Events {
		said = said || strings.Contains(e.Text, "cutover mail stopped: module mail left node n1's plan during its cutover")
	}
	s.True(said, "events: %+v", st.Events)
}

// A plan sent with a preview that the node refuses (its own file derives
// another plan) does not replace the workflow's plan: the update fails
// with the node's reason, and the plan, the modules and the last preview
// stay as they were, so the node's later requests still carry its own
// plan. Before, the plan was applied first and stayed for good, after
// which every request to the node failed on the mismatch.
func (s *NodeSuite) TestPreviewPlanAppliedOnlyOnceTheNodeAcceptsIt() {
	s.expectAdoption(time.Second)
	changed := testPlan()
	changed.Modules[1].Ports = []config.Port{{Num: 8081, Proto: "tcp"}}
	s.env.OnActivity(a.Preview, mock.Anything, mock.MatchedBy(func(in activities.PreviewInput) bool { return in.Plan.Hash == changed.Hash() })).
		Return(nil, temporal.NewNonRetryableApplicationError("refused: the request's plan differs from node n1's own configuration", authority.ErrPlanMismatch, nil)).Once()
	s.expectRelease()
	var complete error
	var before, after State
	s.env.RegisterDelayedCallback(func() {
		before = s.query()
		s.env.UpdateWorkflow(UpdatePreview, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { s.Fail("rejected: " + err.Error()) }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { complete = err },
		}, RequestInput{Plan: &changed})
	}, time.Minute)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()

	s.Require().Error(complete)
	s.Contains(complete.Error(), "differs from node n1's own configuration")
	s.Equal(testPlan().Hash(), after.Plan.Hash(), "the refused plan replaced the workflow's")
	s.Equal(before.Modules, after.Modules)
	s.Equal(before.LastPreview, after.LastPreview)
	var said bool
	for _, e := range after.Events {
		s.NotEqual("plan updated", e.Text)
		said = said || strings.Contains(e.Text, "the plan sent with a preview was not applied: node n1 refused it")
	}
	s.True(said, "events: %+v", after.Events)
}
