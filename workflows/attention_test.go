package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/firewall/flip"
)

// Each state that needs a person names why; the most pressing wins; a
// node that is fine, or done, needs nobody.
func TestAttentionNamesWhatNeedsAPerson(t *testing.T) {
	adopted := func(f func(*State)) *State {
		s := &State{Node: "n1", Phase: PhaseAdopted, Modules: []ModuleState{{Name: "web", State: ModuleMigrated}}}
		f(s)
		return s
	}
	for _, c := range []struct {
		what string
		s    *State
		want string
	}{
		{"fine", adopted(func(*State) {}), ""},
		{"converged with old drift", adopted(func(s *State) { s.Phase, s.Drift = PhaseConverged, []activities.DriftItem{{What: "x"}} }), ""},
		{"adoption failed", adopted(func(s *State) { s.Phase = PhaseFailed }), AttentionAdoptionFailed},
		{"agent silent", adopted(func(s *State) { s.Waiting = "probe waits"; s.Modules[0].State = ModuleFailed }), AttentionAgentSilent},
		{"genesis failed", adopted(func(s *State) { s.Genesis.State = "failed" }), AttentionGenesisFailed},
		{"commit failed", adopted(func(s *State) { s.Phase, s.Flip = PhaseFlipping, &FlipStatus{State: FlipStateCommitting} }), AttentionFlipPendingConfirm},
		{"cutover failed", adopted(func(s *State) { s.Modules[0].State = ModuleFailed; s.Drift = []activities.DriftItem{{What: "x"}} }), AttentionCutoverFailed},
		{"conflict", adopted(func(s *State) { s.Modules[0].Conflicts = []FileConflict{{Path: "/a", Key: "K"}} }), AttentionCutoverFailed},
		{"refused", adopted(func(s *State) { s.Refused = &Refusal{Kind: "flip"} }), AttentionRequestRefused},
		{"drift", adopted(func(s *State) { s.Drift = []activities.DriftItem{{What: "x"}} }), AttentionDrift},
		{"preview refused", adopted(func(s *State) { s.LastPreview = &flip.Preview{} }), AttentionPreviewRefused},
		{"preview approved", adopted(func(s *State) { s.LastPreview = &flip.Preview{Approved: true} }), ""},
	} {
		if got := Attention(c.s); got != c.want {
			t.Errorf("%s: attention %q, want %q", c.what, got, c.want)
		}
	}
}

// attentionUpserts records every AdoptionAttention the workflow upserts.
func (s *NodeSuite) attentionUpserts() *[]string {
	var got []string
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Maybe().Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(AttrAttention); ok {
			got = append(got, v)
		}
	}).Return(nil)
	return &got
}

// A failed cutover sets AdoptionAttention, its retry clears it; the node
// and phase are upserted beside it.
func (s *NodeSuite) TestAttentionFollowsAFailedCutover() {
	s.expectAdoption(time.Second)
	mockCutover(s.env, &s.calls, "preflight web")
	s.expectRelease()
	got := s.attentionUpserts()
	s.signal(time.Minute, SignalMigrate, "web")
	s.signal(2*time.Minute, SignalRetry, "web")
	s.signal(3*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, Input{Plan: flipPlan()})
	st := s.result()
	s.Equal(ModuleMigrated, st.Modules[0].State)
	s.Contains(*got, AttentionCutoverFailed)
	s.Equal("", (*got)[len(*got)-1], "cleared once resolved")
	i := 0
	for ; (*got)[i] != AttentionCutoverFailed; i++ {
	}
	s.Equal("", (*got)[i+1], "cleared by the retry")
}

// An agent that stops beating while its node idles: the watch's heartbeat
// timeout comes back to the workflow, AdoptionAttention says agent-silent
// and the details say what waits; the watch asked again answers at once
// when the agent is back, which clears both.
func (s *NodeSuite) TestAttentionAgentSilent() {
	s.adoptWatched()
	var ins []watch.Input
	calls := 0
	s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).After(10 * time.Minute).Return(func(_ context.Context, in watch.Input) (*watch.Result, error) {
		ins = append(ins, in)
		if calls++; calls == 1 {
			return nil, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
		}
		return &watch.Result{Digest: in.Known, Checked: true, Bound: true}, nil
	})
	got := s.attentionUpserts()
	var silent State
	s.env.RegisterDelayedCallback(func() { silent = s.query() }, 15*time.Minute)
	s.expectRelease()
	s.signal(40*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, watchedPlan())
	st := s.result()
	s.Contains(*got, AttentionAgentSilent)
	s.Equal("", (*got)[len(*got)-1])
	s.Contains(silent.Waiting, "stopped answering its watch")
	s.Contains(Details(&silent), "waiting for the node's agent")
	s.Require().GreaterOrEqual(len(ins), 2)
	s.Equal(time.Second, ins[1].Bound, "while silent, the watch asks to be answered at once")
	s.Equal(watchBound, ins[2].Bound, "answered, the watch waits its bound again")
	s.Empty(st.Waiting)
}
