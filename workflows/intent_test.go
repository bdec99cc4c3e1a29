package workflows

import (
	"context"
	"time"

	"github.com/stretchr/testify/mock"

	"adoption/activities"
	"adoption/firewall/eval"
	"adoption/intent"
)

// The operator's signed intents travel with their requests: the start's
// into adoption, a migrate's into every step of its cutover, a release's
// into the release; work the node does by itself carries none.
func (s *NodeSuite) TestIntentsTravelWithTheirRequests() {
	start := &intent.Signed{Payload: []byte("start"), Signature: []byte("s1")}
	mig := &intent.Signed{Payload: []byte("migrate web"), Signature: []byte("s2")}
	rel := &intent.Signed{Payload: []byte("release"), Signature: []byte("s3")}
	got := map[string]*intent.Signed{}
	s.env.OnActivity(a.Probe, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ProbeInput) (*activities.ProbeReport, error) {
			got["probe"] = in.Intent
			return &activities.ProbeReport{Node: "n1", Firewall: eval.Report{Kind: "iptables-nft"}}, nil
		}).Once()
	s.env.OnActivity(a.Adopt, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AdoptInput) (*activities.AdoptResult, error) {
			got["adopt"] = in.Intent
			return &activities.AdoptResult{Firewall: "iptables-nft"}, nil
		}).Once()
	s.env.OnActivity(a.CutoverPreflight, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ModuleInput) (*activities.CutoverResult, error) {
			got["preflight"] = in.Intent
			return &activities.CutoverResult{}, nil
		}).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RulesInput) (*activities.RulesResult, error) {
			got["open "+in.Owner] = in.Intent
			return &activities.RulesResult{}, nil
		}).Once()
	s.env.OnActivity(a.Release, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ProbeInput) (*activities.ReleaseResult, error) {
			got["release"] = in.Intent
			return &activities.ReleaseResult{}, nil
		}).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalMigrate, RequestInput{Module: "web", Intent: mig})
	}, time.Minute)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(SignalRelease, RequestInput{Intent: rel})
	}, 2*time.Minute)
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: testPlan(), Intent: start})
	s.result()
	s.Nil(got["probe"], "the probe is the node's own work")
	s.Equal(start, got["adopt"])
	s.Equal(mig, got["preflight"])
	s.Equal(mig, got["open web"])
	s.Equal(rel, got["release"])
}
