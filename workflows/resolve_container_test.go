package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
)

// A preflight refused on a container's variable records it under the
// module's name (env:MODE, no value); resolve refuses a key that is not
// env:NAME or label:NAME, a module without a container, and records a good
// decision, which the retry carries to the preflight and the create.
func (s *NodeSuite) TestContainerConflictResolvedByDecision() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	var seen [][]activities.FileDecision
	s.env.OnActivity(a.CutoverPreflight, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
			seen = append(seen, in.Decisions)
			if len(in.Decisions) == 0 {
				return nil, temporal.NewNonRetryableApplicationError("module mail's container: env:MODE", activities.ErrFileConflict, nil,
					[]activities.FileConflict{{Path: "mail", Key: "env:MODE", Why: "the predecessor's container sets it (predecessor hmac-sha256:aa, module hmac-sha256:bb)"}})
			}
			return &activities.CutoverResult{Step: "preflight"}, nil
		}).Times(2)
	var created []activities.FileDecision
	s.env.OnActivity(a.CutoverCreate, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CutoverInput) (*activities.CutoverResult, error) {
			created = in.Decisions
			return &activities.CutoverResult{Step: "create"}, nil
		}).Once()
	calls := []string{}
	mockCutover(s.env, &calls, "")

	var refused State
	var badKey, noContainer, none error
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() { refused = s.query() }, 2*time.Minute)
	update := func(id string, in ResolveInput, rejected *error, done func(any)) {
		s.env.UpdateWorkflow(UpdateResolve, id, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { *rejected = err },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { s.NoError(err); done(v) },
		}, in)
	}
	var res ResolveResult
	s.env.RegisterDelayedCallback(func() {
		update("u1", ResolveInput{Path: "mail", Key: "MODE", Take: "node"}, &badKey, func(any) { s.Fail("a bad key accepted") })
		update("u2", ResolveInput{Path: "web", Key: "env:MODE", Take: "node"}, &noContainer, func(any) { s.Fail("a module without a container accepted") })
		update("u3", ResolveInput{Path: "mail", Key: "env:MODE", Take: "node"}, &none, func(v any) { res = v.(ResolveResult) })
	}, 3*time.Minute)
	s.signal(4*time.Minute, SignalRetry, "mail")
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	s.Require().Len(refused.module("mail").Conflicts, 1)
	s.Equal("env:MODE", refused.module("mail").Conflicts[0].Key)
	s.Contains(NextStep(&refused), "adopt resolve n1 mail env:MODE --take node|mesh")
	s.Require().Error(badKey)
	s.Contains(badKey.Error(), `key "MODE" of module mail`)
	s.Require().Error(noContainer)
	s.Contains(noContainer.Error(), "module web of node n1 runs no container")
	s.NoError(none)
	s.Equal("mail", res.Module)
	want := []activities.FileDecision{{Path: "mail", Key: "env:MODE", Take: "node"}}
	s.Require().Len(seen, 2)
	s.Equal(want, seen[1])
	s.Equal(want, created)
	s.Equal(ModuleMigrated, st.module("mail").State)
}
