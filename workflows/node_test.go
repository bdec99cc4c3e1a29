package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/witness"
)

type NodeSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env   *testsuite.TestWorkflowEnvironment
	calls []string
	// lockedOut, when set, is the flip witness's answer.
	lockedOut error
	// witnessed are the witness's inputs, in order.
	witnessed []witness.Input
	// witnessAfter is how long the witness takes to answer.
	witnessAfter time.Duration
}

func TestNodeSuite(t *testing.T) { suite.Run(t, new(NodeSuite)) }

func (s *NodeSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterActivity(&activities.Activities{})
	s.calls = nil
	// The flip's witness answers unless a test locks the operator out.
	s.lockedOut, s.witnessed, s.witnessAfter = nil, nil, 0
	var w *witness.Witness
	s.env.RegisterActivity(w)
	s.env.OnActivity(w.Witness, mock.Anything, mock.Anything).Maybe().AfterFn(func() time.Duration { return s.witnessAfter }).Return(func(_ context.Context, in witness.Input) (*witness.Result, error) {
		s.witnessed = append(s.witnessed, in)
		if s.lockedOut != nil {
			return nil, s.lockedOut
		}
		return &witness.Result{Answered: []string{"22/tcp on 192.0.2.1"}}, nil
	})
}

func (s *NodeSuite) TearDownTest() { s.env.AssertExpectations(s.T()) }

func testPlan() config.Plan {
	return config.Plan{
		Node: "n1", Role: "member",
		Modules: []config.ModulePlan{
			{Name: "mail", Ports: []config.Port{{Num: 25, Proto: "tcp"}},
				Container: &config.Container{Name: "mail", Image: "mesh/mail:1"},
				Files:     []config.FilePlan{{Path: "/srv/mail/mail.env", SHA256: strings.Repeat("b", 64)}}},
			{Name: "web", Ports: []config.Port{{Num: 8080, Proto: "tcp"}}},
		},
		NodeFiles: []config.FilePlan{{Path: "/etc/hosts", SHA256: strings.Repeat("a", 64)}},
	}
}

func (s *NodeSuite) record(name string) func(mock.Arguments) {
	return func(mock.Arguments) { s.calls = append(s.calls, name) }
}

// expectAdoption mocks a successful probe (taking probeTime) and adopt.
func (s *NodeSuite) expectAdoption(probeTime time.Duration) {
	s.env.OnActivity(a.Probe, mock.Anything, mock.Anything).After(probeTime).Run(s.record("probe")).
		Return(&activities.ProbeReport{Node: "n1", Firewall: eval.Report{Kind: "iptables-nft"}}, nil).Once()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.Anything).Run(s.record("adopt")).
		Return(&activities.AdoptResult{Firewall: "iptables-nft", Custody: []custody.Record{{FileState: custody.FileState{Path: "/etc/hosts", Exists: true, SHA256: "ab"}, Found: true}}}, nil).Once()
}

func (s *NodeSuite) expectRelease() {
	s.env.OnActivity(a.Release, mock.Anything, mock.Anything).Run(s.record("release")).Return(&activities.ReleaseResult{}, nil).Once()
}

func (s *NodeSuite) signal(at time.Duration, name, module string) {
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(name, RequestInput{Module: module}) }, at)
}

func (s *NodeSuite) result() State {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var st State
	s.Require().NoError(s.env.GetWorkflowResult(&st))
	return st
}

func phases(st State) []string {
	var out []string
	for _, e := range st.Events {
		if p, ok := strings.CutPrefix(e.Text, "phase "); ok {
			out = append(out, p)
		}
	}
	return out
}

func (s *NodeSuite) query() State {
	v, err := s.env.QueryWorkflow(QueryStatus)
	s.Require().NoError(err)
	var st State
	s.Require().NoError(v.Get(&st))
	return st
}

func (s *NodeSuite) TestPhaseOrder() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var adopted State
	s.env.RegisterDelayedCallback(func() { adopted = s.query() }, time.Minute)
	s.signal(2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})

	st := s.result()
	s.Equal([]string{"probing", "adopted", "released"}, phases(st))
	s.Equal(PhaseAdopted, adopted.Phase)
	s.Equal("iptables-nft", adopted.FirewallKind)
	s.Len(adopted.Custody, 1)
	s.Equal([]string{"probe", "adopt", "release"}, s.calls)
}

// A migrate sent while the node is still being probed waits for adoption.
func (s *NodeSuite) TestSignalBeforeAdoptionIsQueued() {
	s.expectAdoption(time.Minute)
	mockCutover(s.env, &s.calls, "")
	s.expectRelease()
	var during State
	s.signal(10*time.Second, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() { during = s.query() }, 20*time.Second)
	s.signal(5*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})

	st := s.result()
	s.Equal(PhaseProbing, during.Phase)
	s.Require().Len(during.Queue, 1)
	s.Equal("mail", during.Queue[0].Module)
	s.Equal([]string{"probe", "adopt", "preflight mail", "open mail", "create mail", "swap mail", "healthy mail", "release"}, s.calls)
	s.Equal(ModuleMigrated, st.module("mail").State)
	s.Equal(ModulePending, st.module("web").State)
}

// Two migrates back to back run one after the other, in order.
func (s *NodeSuite) TestMigratesRunInOrder() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "")
	s.expectRelease()
	// Back to back: mail arrives while web's cutover is under way.
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "web"})
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "mail"})
	}, time.Minute)
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()
	s.Equal([]string{"probe", "adopt", "preflight web", "open web", "preflight mail", "open mail", "create mail", "swap mail", "healthy mail", "release"}, s.calls)
}

// An unknown module is refused with a reason and changes nothing.
func (s *NodeSuite) TestMigrateUnknownModuleRejected() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var before, after State
	var updErr error
	s.env.RegisterDelayedCallback(func() { before = s.query() }, time.Minute)
	s.signal(time.Minute+time.Second, SignalMigrate, "nosuch")
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateMigrate, "u1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { updErr = err },
			OnAccept:   func() { s.Fail("update accepted") },
			OnComplete: func(any, error) {},
		}, RequestInput{Module: "nosuch"})
	}, time.Minute+2*time.Second)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()

	s.Require().Error(updErr)
	s.Contains(updErr.Error(), `module "nosuch" is not in node n1's plan`)
	s.Equal(before.Modules, after.Modules)
	s.Equal(before.Queue, after.Queue)
	s.Equal(before.Phase, after.Phase)
	s.Contains(after.Events[len(after.Events)-1].Text, `refused migrate nosuch: module "nosuch" is not in node n1's plan`)
	s.NotContains(s.calls, "preflight nosuch")
}

// A retry of a module that has not failed is refused too.
func (s *NodeSuite) TestRetryOfHealthyModuleRejected() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var updErr error
	s.env.RegisterDelayedCallback(func() {
		s.env.UpdateWorkflow(UpdateRetry, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updErr = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, RequestInput{Module: "mail"})
	}, time.Minute)
	s.signal(2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()
	s.Require().Error(updErr)
	s.Contains(updErr.Error(), "module mail has not failed")
}

// A refused adoption (control daemon running) leaves the node failed until a
// retry; the retry adopts it.
func (s *NodeSuite) TestAdoptionRefusedThenRetried() {
	s.env.OnActivity(a.Probe, mock.Anything, mock.Anything).Return(&activities.ProbeReport{Firewall: eval.Report{Kind: "iptables-nft"}}, nil).Twice()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.Anything).Return(nil,
		temporal.NewNonRetryableApplicationError("predecessor control daemon predecessor-sync (pid 42) is running", activities.ErrControlRunning, nil)).Once()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.Anything).Return(&activities.AdoptResult{Firewall: "iptables-nft"}, nil).Once()
	s.expectRelease()
	var failed State
	s.env.RegisterDelayedCallback(func() { failed = s.query() }, time.Minute)
	s.signal(2*time.Minute, SignalRetry, "")
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()
	s.Equal(PhaseFailed, failed.Phase)
	s.Contains(failed.LastError, "predecessor-sync (pid 42)")
	s.Equal([]string{"probing", "failed", "probing", "adopted", "released"}, phases(st))
}

// A cutover that fails marks the module failed; retry runs it again.
func (s *NodeSuite) TestFailedCutoverRetried() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "healthy mail")
	s.expectRelease()
	var failed State
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() { failed = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRetry, "mail")
	s.signal(4*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()
	s.Equal(ModuleFailed, failed.module("mail").State)
	s.Contains(failed.module("mail").LastError, "wait healthy")
	s.Contains(NextStep(&failed), "adopt retry n1 mail")
	// The page (current details) names the failed step and the fix.
	d := Details(&failed)
	s.Contains(d, `module mail FAILED (attempt 1): step "wait healthy" failed`)
	s.Contains(d, "then `adopt retry n1 mail` (from the Web UI: the retry signal, its input from `adopt sign retry n1 mail`)")
	s.Contains(d, "**Now:** waiting for a person (cutover-failed)")
	s.Contains(failed.module("mail").LastError, "rolled back")
	s.Empty(failed.Opened["mail"], "a rolled-back module keeps no marked rules")
	s.Equal(ModuleMigrated, st.module("mail").State)
	s.Equal(2, st.module("mail").Attempts)
	s.Equal([]string{"probe", "adopt",
		"preflight mail", "open mail", "create mail", "swap mail", "healthy mail", "rollback mail", "close mail",
		"preflight mail", "open mail", "create mail", "swap mail", "healthy mail", "release"}, s.calls)
}

// A preflight refusal changes nothing, so nothing is rolled back.
func (s *NodeSuite) TestPreflightRefusalRollsNothingBack() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "preflight mail")
	s.expectRelease()
	var failed State
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() { failed = s.query() }, 2*time.Minute)
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.result()
	s.Equal(ModuleFailed, failed.module("mail").State)
	s.Contains(failed.module("mail").LastError, `step "preflight" failed`)
	s.Equal([]string{"probe", "adopt", "preflight mail", "release"}, s.calls)
}

// Continue-as-new carries the state and the queued requests; the next run
// does not probe again and serves the queue.
func (s *NodeSuite) TestContinueAsNewKeepsStateAndPendingSignals() {
	s.expectAdoption(time.Minute)
	s.env.SetContinueAsNewSuggested(true)
	s.signal(10*time.Second, SignalMigrate, "web")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	s.Require().True(s.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	s.Require().True(errors.As(s.env.GetWorkflowError(), &can), "want continue-as-new, got %v", s.env.GetWorkflowError())
	var next Input
	s.Require().NoError(converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	s.Require().NotNil(next.Resume)
	s.Equal(PhaseAdopted, next.Resume.Phase)
	s.Len(next.Resume.Custody, 1)
	s.Require().Len(next.Resume.Queue, 1)
	s.Equal("web", next.Resume.Queue[0].Module)
	s.Equal(1, next.Resume.Runs)

	// The next run: no probe, no adopt; the carried migrate runs first.
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	var calls []string
	mockCutover(env, &calls, "")
	env.OnActivity(a.Release, mock.Anything, mock.Anything).Run(func(mock.Arguments) { calls = append(calls, "release") }).Return(&activities.ReleaseResult{}, nil).Once()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRelease, RequestInput{}) }, time.Minute)
	env.ExecuteWorkflow(NodeMigration, next)
	s.Require().NoError(env.GetWorkflowError())
	s.Equal([]string{"preflight web", "open web", "release"}, calls)
	env.AssertExpectations(s.T())
}

// mockCutover mocks every cutover step, recording "<step> <module>" in
// calls. The first call of failOnce ("healthy mail") fails non-retryably.
func mockCutover(env *testsuite.TestWorkflowEnvironment, calls *[]string, failOnce string) {
	failed := false
	rec := func(step string, module func(mock.Arguments) string) func(mock.Arguments) {
		return func(args mock.Arguments) { *calls = append(*calls, step+" "+module(args)) }
	}
	mod := func(args mock.Arguments) string { return args[1].(activities.ModuleInput).Module }
	result := func(step string) func(context.Context, activities.ModuleInput) (*activities.CutoverResult, error) {
		return func(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
			if step+" "+in.Module == failOnce && !failed {
				failed = true
				return nil, temporal.NewNonRetryableApplicationError(step+": timed out", activities.ErrUnhealthy, nil)
			}
			return &activities.CutoverResult{Step: step}, nil
		}
	}
	env.OnActivity(a.CutoverPreflight, mock.Anything, mock.Anything).Run(rec("preflight", mod)).Return(result("preflight")).Maybe()
	env.OnActivity(a.OpenRules, mock.Anything, mock.Anything).Run(rec("open", func(args mock.Arguments) string {
		return args[1].(activities.RulesInput).Owner
	})).Return(&activities.RulesResult{}, nil).Maybe()
	env.OnActivity(a.CutoverCreate, mock.Anything, mock.Anything).Run(rec("create", func(args mock.Arguments) string {
		return args[1].(activities.CutoverInput).Module
	})).Return(&activities.CutoverResult{}, nil).Maybe()
	env.OnActivity(a.ConvergeFiles, mock.Anything, mock.Anything).Run(rec("converge", mod)).Return(result("converge")).Maybe()
	env.OnActivity(a.CutoverSwap, mock.Anything, mock.Anything).Run(rec("swap", mod)).Return(result("swap")).Maybe()
	env.OnActivity(a.CutoverWaitHealthy, mock.Anything, mock.Anything).Run(rec("healthy", mod)).Return(result("healthy")).Maybe()
	env.OnActivity(a.CutoverRollback, mock.Anything, mock.Anything).Run(rec("rollback", mod)).Return(&activities.CutoverResult{}, nil).Maybe()
	env.OnActivity(a.CloseRules, mock.Anything, mock.Anything).Run(rec("close", func(args mock.Arguments) string {
		return args[1].(activities.RulesInput).Owner
	})).Return(&activities.RulesResult{}, nil).Maybe()
}
