package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities"
	"adoption/intent"
)

// A preflight refused on a conflicting key records the conflict (path and
// key, no value) and NEXT says how to decide; `resolve` refuses a key with
// no conflict and a bad side, records a good decision, and the retry carries
// it to the node, where preflight then passes.
func (s *NodeSuite) TestConflictResolvedByDecision() {
	s.expectAdoption(time.Second)
	s.expectRelease()
	const path = "/srv/mail/mail.env"
	var seen [][]activities.FileDecision
	decided := &intent.Signed{Payload: []byte("resolve LEVEL"), Signature: []byte("sig")} // travels to the node with the decision
	s.env.OnActivity(a.CutoverPreflight, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
			seen = append(seen, in.Decisions)
			if len(in.Decisions) == 0 {
				return nil, temporal.NewNonRetryableApplicationError("module mail: 1 key(s) changed", activities.ErrFileConflict, nil,
					[]activities.FileConflict{{Path: path, Key: "LEVEL", Why: "changed on the node since custody; the mesh sets another value"}})
			}
			return &activities.CutoverResult{Step: "preflight"}, nil
		}).Times(2)
	calls := []string{}
	mockCutover(s.env, &calls, "")

	var refused State
	var noConflict, badSide error
	var res ResolveResult
	s.signal(time.Minute, SignalMigrate, "mail")
	s.env.RegisterDelayedCallback(func() { refused = s.query() }, 2*time.Minute)
	update := func(id string, in ResolveInput, rejected *error, done func(any)) {
		s.env.UpdateWorkflow(UpdateResolve, id, &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { *rejected = err },
			OnAccept:   func() {},
			OnComplete: func(v any, err error) { s.NoError(err); done(v) },
		}, in)
	}
	var none error
	s.env.RegisterDelayedCallback(func() {
		update("u1", ResolveInput{Path: path, Key: "MODE", Take: "mesh"}, &noConflict, func(any) { s.Fail("MODE has no conflict") })
		update("u2", ResolveInput{Path: path, Key: "LEVEL", Take: "both"}, &badSide, func(any) { s.Fail("bad side accepted") })
		update("u3", ResolveInput{Path: path, Key: "LEVEL", Take: "mesh", Intent: decided}, &none, func(v any) { res = v.(ResolveResult) })
	}, 3*time.Minute)
	s.signal(4*time.Minute, SignalRetry, "mail")
	s.signal(10*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan()})
	st := s.result()

	m := refused.module("mail")
	s.Require().Len(m.Conflicts, 1)
	s.Equal(FileConflict{Path: path, Key: "LEVEL", Why: "changed on the node since custody; the mesh sets another value"}, m.Conflicts[0])
	s.Contains(NextStep(&refused), "adopt resolve n1 /srv/mail/mail.env LEVEL --take node|mesh")
	s.Require().Error(noConflict)
	s.Contains(noConflict.Error(), "has no conflict")
	s.Require().Error(badSide)
	s.Contains(badSide.Error(), `--take "both"`)
	s.NoError(none)
	s.Equal("mail", res.Module)
	s.Equal(0, res.Remaining)

	s.Require().Len(seen, 2)
	s.Empty(seen[0])
	s.Equal([]activities.FileDecision{{Path: path, Key: "LEVEL", Take: "mesh", Intent: decided}}, seen[1])
	s.Equal(ModuleMigrated, st.module("mail").State)
	s.Empty(st.module("mail").Conflicts)
	s.Require().Len(st.Decisions, 1)
	s.Equal("mesh", st.Decisions[0].Take)
}
