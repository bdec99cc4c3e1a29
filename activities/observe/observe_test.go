package observe

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/nodewire"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/nodestate"
)

type fakeRecorder struct{ calls []string }

func (f *fakeRecorder) add(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}
func (f *fakeRecorder) MarkedRules(owner string, n int) { f.add("marked %s %d", owner, n) }
func (f *fakeRecorder) ReconcileRepairs(n int)          { f.add("repairs %d", n) }
func (f *fakeRecorder) Drift(n int)                     { f.add("drift %d", n) }
func (f *fakeRecorder) PreviewRefused()                 { f.add("refused") }
func (f *fakeRecorder) FlipState(s string)              { f.add("flip %s", s) }
func (f *fakeRecorder) WatchdogRevert(id string)        { f.add("watchdog %s", id) }
func (f *fakeRecorder) CutoverStep(m, step, outcome string, _ time.Duration) {
	f.add("step %s %s %s", m, step, outcome)
}

type fakeFlips struct{ rec *nodestate.FlipRecord }

func (f fakeFlips) Flip() (*nodestate.FlipRecord, error) { return f.rec, nil }

func rule(owner string) marks.MarkedRule {
	return marks.MarkedRule{Mark: marks.Mark{Node: "n1", Owner: owner, Port: 80, Proto: "tcp"}}
}

// Each activity's input and result become the series docs/operations.md lists.
func TestObserverMapsActivitiesToSeries(t *testing.T) {
	rec := &fakeRecorder{}
	flips := fakeFlips{rec: &nodestate.FlipRecord{ID: "n1-1", State: nodestate.FlipReverted,
		Reason: "not confirmed by 2026-12-01T00:00:00Z: the watchdog put the firewall and the node files back as they were before the flip"}}
	o := New(rec, flips, slog.New(slog.NewTextHandler(io.Discard, nil)))
	refused := temporal.NewNonRetryableApplicationError("bad", "X", nil)
	for _, c := range []struct {
		name string
		arg  any
		res  any
		err  error
	}{
		{"OpenRules", activities.RulesInput{Owner: "web"}, &activities.RulesResult{Added: []marks.MarkedRule{rule("web")}, Present: []marks.MarkedRule{rule("web")}}, nil},
		{"CloseRules", activities.RulesInput{Owner: "web"}, &activities.RulesResult{}, nil},
		{"Watch", nodewire.Input{}, &nodewire.Result{Checked: true, Restored: []marks.MarkedRule{rule("web")}, Findings: nodewire.Findings{Drift: make([]nodewire.DriftItem, 3)}}, nil},
		{"Watch", nodewire.Input{}, &nodewire.Result{Checked: true, Findings: nodewire.Findings{DriftError: "unreadable", Drift: make([]nodewire.DriftItem, 1)}}, nil},
		{"Watch", nodewire.Input{}, &nodewire.Result{Restored: []marks.MarkedRule{rule("web")}}, nil},
		{"CutoverSwap", activities.ModuleInput{Module: "mail"}, &activities.CutoverResult{}, nil},
		{"CutoverWaitHealthy", activities.ModuleInput{Module: "mail"}, nil, errors.New("docker down")},
		{"CutoverPreflight", activities.ModuleInput{Module: "mail"}, nil, refused},
		{"Prune", activities.PruneInput{Modules: []string{"a", "b"}}, &activities.CutoverResult{}, nil},
		{"Preview", activities.PreviewInput{}, &flip.Preview{Approved: false, Reasons: []string{"8081/tcp would close"}}, nil},
		{"Preview", activities.PreviewInput{}, &flip.Preview{Approved: true}, nil},
		{"FlipTrip", activities.FlipTripInput{}, nil, errors.New("reverted")},
		{"RevertFlip", activities.ConfirmInput{}, &activities.FlipResult{}, nil},
	} {
		o.record(c.name, c.arg, c.res, c.err, time.Millisecond)
	}
	// A watch's answer: the rules it put back and the drift, when it
	// checked (a failed drift check says nothing of the drift).
	got := rec.calls
	want := []string{
		"marked web 2",
		"marked web 0",
		"repairs 1", "drift 3",
		"repairs 0",
		"step mail swap ok", "step mail healthy error", "step mail preflight refused",
		"step a prune ok", "step b prune ok",
		"refused",
		"flip reverted", "watchdog n1-1", "flip reverted", "watchdog n1-1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("recorded:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
