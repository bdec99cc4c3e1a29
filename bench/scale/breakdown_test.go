package scale

import (
	"encoding/json"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"adoption/workflows"
)

// A flip's history with known gaps: each part must get exactly its gap,
// and a workflow task beside a running activity is charged to the activity.
func TestSplitFlip(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(msec int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(msec) * time.Millisecond))
	}
	phase, _ := json.Marshal(string(workflows.PhaseConverged))
	var id int64
	ev := func(msec int, typ enumspb.EventType, set func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
		id++
		e := &historypb.HistoryEvent{EventId: id, EventTime: at(msec), EventType: typ}
		if set != nil {
			set(e)
		}
		return e
	}
	started := func(sched int64) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: sched}}
		}
	}
	completed := func(sched int64) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: sched}}
		}
	}
	evs := []*historypb.HistoryEvent{
		ev(-500, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil),      // before t0: not charged
		ev(100, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),          // transit 100
		ev(300, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),            // wft queued 200
		ev(320, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),          // wft run 20
		ev(320, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil),          // id 5
		ev(370, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, started(5)),     // act queued 50
		ev(400, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),          // beside the activity
		ev(420, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),            //
		ev(440, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),          //
		ev(470, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, completed(5)), // act run 100
		ev(480, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),          // transit 10
		ev(600, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),            // wft queued 120
		ev(630, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),          // wft run 30
		ev(630, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.AttrPhase.GetName(): {Data: phase}}}}}
		}),
		ev(900, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil), // after converged: not charged
	}
	sp, err := splitFlip("n1", evs, t0)
	if err != nil {
		t.Fatal(err)
	}
	if sp.total != 630*time.Millisecond {
		t.Errorf("total %v, want 630ms", sp.total)
	}
	want := map[string]time.Duration{partTransit: 110, partWFTQueued: 320, partWFTRun: 50, partActQueued: 50, partActRun: 100}
	var sum time.Duration
	for p, w := range want {
		if got := sp.parts[p]; got != w*time.Millisecond {
			t.Errorf("%s: %v, want %v", p, got, w*time.Millisecond)
		}
		sum += sp.parts[p]
	}
	if sum != sp.total {
		t.Errorf("parts add up to %v, not the total %v", sum, sp.total)
	}
	if _, err := splitFlip("n1", evs[:len(evs)-2], t0); err == nil {
		t.Error("a history without the converged upsert must be an error")
	}
}
