package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/firewall/marks"
)

// watchPlan is an adopted control node with the default intervals: its
// foundation's marks to keep, its drift to look for.
func (s *NodeSuite) adoptWatched() {
	s.expectAdoption(time.Second)
	s.env.OnActivity(a.CheckFoundationPorts, mock.Anything, mock.Anything).Return(&activities.CheckPortsResult{}, nil).Once()
	s.env.OnActivity(a.OpenRules, mock.Anything, mock.Anything).
		Return(&activities.RulesResult{Added: []marks.MarkedRule{marked("foundation", 5001), marked("foundation", 5432)}}, nil).Once()
	s.env.RegisterActivity(&watch.Watcher{})
}

func watchedPlan() Input {
	p := controlPlan()
	p.ReconcileInterval, p.DriftInterval = time.Minute, 5*time.Minute
	return Input{Plan: p}
}

// An idle adopted node: the workflow runs no check of its own and no
// timer; it waits on the node's watch, which answers at its bound only.
// A day costs one watch per bound, and the state gains no event.
func (s *NodeSuite) TestIdleNodeWaitsOnItsWatch() {
	s.adoptWatched()
	var ins []watch.Input
	s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).After(watchBound).Return(func(_ context.Context, in watch.Input) (*watch.Result, error) {
		ins = append(ins, in)
		return &watch.Result{Digest: in.Known, Checked: true, Bound: true, Present: 2, Reconciled: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)}, nil
	})
	var adopted, dayLater State
	s.env.RegisterDelayedCallback(func() { adopted = s.query() }, time.Minute)
	s.env.RegisterDelayedCallback(func() { dayLater = s.query() }, 24*time.Hour+time.Minute)
	s.expectRelease()
	s.signal(24*time.Hour+2*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, watchedPlan())
	s.result()
	s.Equal(adopted.Events, dayLater.Events, "an idle day must add nothing to the node's events")
	s.Len(ins, 4, "one watch answered per bound over a day (the fifth is cancelled by the release)")
	for _, in := range ins {
		s.True(in.Reconcile && in.Drift, "the watch must ask for both checks: %+v", in)
		s.Len(in.Owners["foundation"], 2)
		s.Equal(watch.Findings{}.Digest(), in.Known)
	}
	s.Require().NotNil(dayLater.LastReconcile)
	s.Equal(2, dayLater.LastReconcile.Present)
}

// Drift the node's loop finds comes back on the watch; the next watch
// knows it, so it does not answer again for the same drift. A repair is
// reported too.
func (s *NodeSuite) TestWatchReportsWhatTheNodeFound() {
	s.adoptWatched()
	item := activities.DriftItem{Kind: "file", Path: "/etc/hosts", Recorded: "k1", Now: "k2", What: "/etc/hosts changed since adoption"}
	found := watch.Findings{Drift: []activities.DriftItem{item}}
	var ins []watch.Input
	s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).After(2 * time.Hour).Return(func(_ context.Context, in watch.Input) (*watch.Result, error) {
		ins = append(ins, in)
		switch len(ins) {
		case 1:
			return &watch.Result{Findings: found, Digest: found.Digest(), Checked: true}, nil
		case 2:
			return &watch.Result{Findings: found, Digest: found.Digest(), Checked: true, Restored: []marks.MarkedRule{marked("foundation", 5432)}, Present: 1, Reconciled: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)}, nil
		}
		return &watch.Result{Findings: found, Digest: in.Known, Checked: true, Bound: true}, nil
	})
	var after State
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 5*time.Hour)
	s.expectRelease()
	s.signal(7*time.Hour, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, watchedPlan())
	s.result()
	s.Require().GreaterOrEqual(len(ins), 3)
	s.Equal(watch.Findings{}.Digest(), ins[0].Known)
	s.Equal(found.Digest(), ins[1].Known, "the next watch must know the drift reported")
	s.Equal(found.Digest(), ins[2].Known)
	s.Equal([]activities.DriftItem{item}, after.Drift)
	s.Require().NotNil(after.LastReconcile, "what reconcile put back shows in status")
	s.Equal([]marks.MarkedRule{marked("foundation", 5432)}, after.LastReconcile.Restored)
	s.Equal(1, after.LastReconcile.Present)
	s.Len(after.Marks, 2, "the mark put back is still one of the node's two")
	var said []string
	for _, e := range after.Events {
		said = append(said, e.Text)
	}
	all := strings.Join(said, "\n")
	s.Contains(all, "drift: /etc/hosts changed since adoption")
	s.Contains(all, "reconcile: 1 marked rule(s) had vanished and were put back: adoption:n1:foundation:5432/tcp ip/ufw-user-input")
	s.Equal(1, strings.Count(all, "drift: /etc/hosts"), "the same drift is said once")
}

// A watch the node refuses (its file no longer derives the plan) is said
// once and asked again only after watchBackoff, not in a loop.
func (s *NodeSuite) TestRefusedWatchBacksOff() {
	s.adoptWatched()
	calls := 0
	s.env.OnActivity(watcher.Watch, mock.Anything, mock.Anything).Run(func(mock.Arguments) { calls++ }).
		Return(nil, temporal.NewNonRetryableApplicationError("refused: the plan differs from node n1's own file", "PlanMismatch", nil))
	var after State
	s.env.RegisterDelayedCallback(func() { after = s.query() }, 50*time.Minute)
	s.expectRelease()
	s.signal(55*time.Minute, SignalRelease, "")
	s.env.ExecuteWorkflow(NodeMigration, watchedPlan())
	s.result()
	s.Equal(2, calls, "asked at adoption and once after the backoff")
	n := 0
	for _, e := range after.Events {
		if strings.HasPrefix(e.Text, "watch refused: refused: the plan differs") {
			n++
		}
	}
	s.Equal(2, n)
}

// An idle adopted node costs the server at most idleWritesPerHour writes
// a node-hour: the watch's heartbeats as the agent beats them, and its
// answer at the bound (before: a heartbeat every 100 s, 36 an hour).
func TestIdleWritesPerNodeHour(t *testing.T) {
	got := watchIdleWrites()
	t.Logf("an idle node: %.1f writes a node-hour (heartbeat every %s, a watch answering every %s), limit %d", got, watch.BeatEvery(watchHeartbeat), watchBound, idleWritesPerHour)
	if got > idleWritesPerHour {
		t.Errorf("an idle node costs %.1f writes a node-hour, over %d", got, idleWritesPerHour)
	}
}
