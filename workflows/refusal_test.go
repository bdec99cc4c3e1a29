package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/intent"
)

// An unsigned signal reaches the node, which refuses it: the workflow's
// details (the Web UI's) say the node's reason and how to send it signed,
// the module stays failed for a retry; the signed retry then migrates it
// and the refusal is gone.
func (s *NodeSuite) TestUnsignedSignalRefusalSaysHowToSign() {
	s.expectAdoption(time.Second)
	signed := &intent.Signed{Payload: []byte("retry web"), Signature: []byte("sig")}
	s.env.OnActivity(a.CutoverPreflight, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
			if in.Intent == nil {
				return nil, temporal.NewNonRetryableApplicationError("refused by node n1: intent refused (missing): the request carries no signed intent; nothing was changed", activities.ErrIntentRefused, nil, "missing")
			}
			s.calls = append(s.calls, "preflight signed")
			return &activities.CutoverResult{}, nil
		})
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.Anything).Return(&activities.RulesResult{}, nil).Once()
	s.expectRelease()
	var refused, after State
	s.signal(time.Minute, SignalMigrate, "web")
	s.env.RegisterDelayedCallback(func() { refused = s.query() }, 2*time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalRetry, RequestInput{Module: "web", Intent: signed})
	}, 3*time.Minute)
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 4*time.Minute)
	s.signal(5*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	s.result()

	s.Require().NotNil(refused.Refused, "the refusal is in the state")
	s.Equal(SignalMigrate, refused.Refused.Kind)
	d := Details(&refused)
	for _, want := range []string{"**Refused migrate web:**", "intent refused (missing)", "`adopt sign migrate n1 web`", `"migrate" signal's input`, "`adopt migrate n1 web` sends it signed"} {
		s.Contains(d, want)
	}
	s.Equal(ModuleFailed, refused.Modules[0].State)
	s.Contains(refused.Modules[0].LastError, "adopt sign migrate n1 web")
	s.Equal(ModuleMigrated, after.Modules[0].State)
	s.Nil(after.Refused, "served again, the refusal is gone")
	s.NotContains(Details(&after), "Refused")
	s.Equal([]string{"probe", "adopt", "preflight signed", "release"}, s.calls)
}
