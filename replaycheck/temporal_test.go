// Unit tests of Histories.Replay's answers before any replay: a closed or
// vanished run is ErrClosed, a run with no completed task passes, a read
// error is a failure.
package replaycheck

import (
	"context"
	"errors"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"adoption/workflows"
)

type fakeIterator struct {
	events []enumspb.EventType
	err    error
}

func (f *fakeIterator) HasNext() bool { return len(f.events) > 0 || f.err != nil }

func (f *fakeIterator) Next() (*historypb.HistoryEvent, error) {
	if len(f.events) == 0 {
		err := f.err
		f.err = nil
		return nil, err
	}
	e := &historypb.HistoryEvent{EventId: 1, EventType: f.events[0]}
	f.events = f.events[1:]
	return e, nil
}

type fakeHistories struct{ it *fakeIterator }

func (f fakeHistories) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	return f.it
}

func TestReplayAnswersBeforeReplaying(t *testing.T) {
	started := enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
	sched := enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
	readErr := errors.New("connection reset")
	for _, c := range []struct {
		name   string
		it     *fakeIterator
		closed bool
		want   error
	}{
		{name: "completed meanwhile", it: &fakeIterator{events: []enumspb.EventType{started, sched, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED}}, closed: true},
		{name: "continued as new", it: &fakeIterator{events: []enumspb.EventType{started, sched, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW}}, closed: true},
		{name: "not found", it: &fakeIterator{err: serviceerror.NewNotFound("workflow not found")}, closed: true},
		{name: "no task ran", it: &fakeIterator{events: []enumspb.EventType{started, sched}}},
		{name: "read error", it: &fakeIterator{events: []enumspb.EventType{started}, err: readErr}, want: readErr},
	} {
		t.Run(c.name, func(t *testing.T) {
			registered := false
			h := Histories{C: fakeHistories{c.it}, Register: func(workflows.Registry) { registered = true }}
			err := h.Replay(context.Background(), Run{WorkflowID: "w", RunID: "r"})
			switch {
			case c.closed && !errors.Is(err, ErrClosed):
				t.Fatalf("%v, want ErrClosed", err)
			case !c.closed && c.want == nil && err != nil:
				t.Fatalf("%v, want a pass", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("%v, want %v", err, c.want)
			}
			if registered {
				t.Fatal("a replayer was built for a history with nothing to replay")
			}
		})
	}
}
