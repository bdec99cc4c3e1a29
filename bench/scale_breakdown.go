package main

// Where a flip's time goes. From the flip Update's sending to the workflow
// task that set phase converged, every instant is charged to what the flip
// waited for then, read from the node's history (the server stamps each
// event; it runs on this host, so the client's clock and its are one): a
// node activity outstanding (waiting for the agent's poller, or running),
// else a workflow task outstanding (waiting for the orchestrator's poller,
// or running), else nothing recorded (the Update on its way to the
// workflow, the server between two steps). An activity outranks a workflow
// task that runs beside it (the task that takes a progress signal's
// answer): the flip waits for the activity.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"adoption/workflows"
)

// The parts of a flip's time, in the order the note names them.
const (
	partTransit   = "in transit (no task outstanding: the Update on its way, the server between steps)"
	partWFTQueued = "workflow task waits for the orchestrator"
	partWFTRun    = "workflow task runs in the orchestrator"
	partActQueued = "activity waits for the node's agent"
	partActRun    = "activity runs on the node"
)

var flipParts = []string{partWFTQueued, partWFTRun, partActQueued, partActRun, partTransit}

// flipSpan is one flip as its node's history tells it.
type flipSpan struct {
	total time.Duration // from t0 to the converged task's completion
	parts map[string]time.Duration
}

// flipSpanOf reads node id's history and splits the time from t0 (the
// Update sent) to the completion of the workflow task that set phase
// converged.
func flipSpanOf(ctx context.Context, c client.Client, id string, t0 time.Time) (flipSpan, error) {
	var evs []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return flipSpan{}, fmt.Errorf("history of %s: %w", id, err)
		}
		evs = append(evs, e)
	}
	return splitFlip(id, evs, t0)
}

// splitFlip is flipSpanOf on a history already read.
func splitFlip(id string, evs []*historypb.HistoryEvent, t0 time.Time) (flipSpan, error) {
	end := -1
	for i, e := range evs {
		up := e.GetUpsertWorkflowSearchAttributesEventAttributes()
		if up == nil {
			continue
		}
		var phase string
		if p := up.GetSearchAttributes().GetIndexedFields()[workflows.AttrPhase.GetName()]; p != nil && json.Unmarshal(p.GetData(), &phase) == nil &&
			phase == string(workflows.PhaseConverged) {
			end = i
			break
		}
	}
	if end < 0 {
		return flipSpan{}, fmt.Errorf("%s: no upsert of phase converged in its history", id)
	}
	stop := evs[end].GetEventTime().AsTime()
	// Each event opens or closes a task; sweep them in time order.
	type mark struct {
		at   time.Time
		kind enumspb.EventType
		ref  int64 // the activity's scheduled event, for its start and end
		id   int64
	}
	var ms []mark
	for _, e := range evs[:end+1] {
		at := e.GetEventTime().AsTime()
		if at.Before(t0) {
			continue
		}
		m := mark{at: at, kind: e.GetEventType(), id: e.GetEventId()}
		switch {
		case e.GetActivityTaskStartedEventAttributes() != nil:
			m.ref = e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
		case e.GetActivityTaskCompletedEventAttributes() != nil:
			m.ref = e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
		case e.GetActivityTaskFailedEventAttributes() != nil:
			m.ref = e.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
		case e.GetActivityTaskTimedOutEventAttributes() != nil:
			m.ref = e.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
		case e.GetActivityTaskCanceledEventAttributes() != nil:
			m.ref = e.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()
		case m.kind == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			m.ref = m.id
		}
		ms = append(ms, m)
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].at.Before(ms[j].at) })
	acts := map[int64]bool{} // scheduled event -> started
	wftScheduled, wftStarted := false, false
	sp := flipSpan{total: stop.Sub(t0), parts: map[string]time.Duration{}}
	now := t0
	charge := func(until time.Time) {
		if !until.After(now) {
			return
		}
		part := partTransit
		switch {
		case anyStarted(acts):
			part = partActRun
		case len(acts) > 0:
			part = partActQueued
		case wftStarted:
			part = partWFTRun
		case wftScheduled:
			part = partWFTQueued
		}
		sp.parts[part] += until.Sub(now)
		now = until
	}
	for _, m := range ms {
		charge(m.at)
		switch m.kind {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			acts[m.ref] = false
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			acts[m.ref] = true
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			delete(acts, m.ref)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			wftScheduled = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wftStarted = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			wftScheduled, wftStarted = false, false
		}
	}
	charge(stop)
	return sp, nil
}

func anyStarted(acts map[int64]bool) bool {
	for _, started := range acts {
		if started {
			return true
		}
	}
	return false
}

// breakdownNote names each part's median over the flips, in ms, and its
// share of the sum of those medians.
func breakdownNote(spans []flipSpan) (string, map[string]Stats) {
	st := map[string]Stats{}
	var sum float64
	for _, p := range flipParts {
		var xs []float64
		for _, s := range spans {
			xs = append(xs, ms(s.parts[p]))
		}
		st[p] = stats(xs)
		sum += st[p].Median
	}
	var b []string
	for _, p := range flipParts {
		share := 0.0
		if sum > 0 {
			share = 100 * st[p].Median / sum
		}
		b = append(b, fmt.Sprintf("%s %.0f ms (%.0f%%)", p, st[p].Median, share))
	}
	return "where a flip's time goes, median of each part: " + strings.Join(b, "; "), st
}
