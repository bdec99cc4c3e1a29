package scale

// This file holds where a flip's time goes: from the flip Update's sending
// to the workflow task that set phase converged, every instant is charged
// to what was outstanding then in the node's history (an activity, else a
// workflow task, else nothing: in transit). An activity outranks a
// workflow task running beside it: the flip waits for the activity.

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

	"adoption/bench/report"
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
	end := convergedAt(evs)
	if end < 0 {
		return flipSpan{}, fmt.Errorf("%s: no upsert of phase converged in its history", id)
	}
	stop := evs[end].GetEventTime().AsTime()
	sw := &sweep{now: t0, acts: map[int64]bool{}, sp: flipSpan{total: stop.Sub(t0), parts: map[string]time.Duration{}}}
	for _, m := range flipMarks(evs[:end+1], t0) {
		sw.charge(m.at)
		sw.apply(m)
	}
	sw.charge(stop)
	return sw.sp, nil
}

// convergedAt is the index of the event that upserted phase converged, or
// -1.
func convergedAt(evs []*historypb.HistoryEvent) int {
	for i, e := range evs {
		up := e.GetUpsertWorkflowSearchAttributesEventAttributes()
		if up == nil {
			continue
		}
		var phase string
		if p := up.GetSearchAttributes().GetIndexedFields()[workflows.AttrPhase.GetName()]; p != nil && json.Unmarshal(p.GetData(), &phase) == nil &&
			phase == string(workflows.PhaseConverged) {
			return i
		}
	}
	return -1
}

// flipMark is an event that opens or closes a task.
type flipMark struct {
	at   time.Time
	kind enumspb.EventType
	ref  int64 // the activity's scheduled event, for its start and end
	id   int64
}

// flipMarks are the events from t0 on, in time order.
func flipMarks(evs []*historypb.HistoryEvent, t0 time.Time) []flipMark {
	var ms []flipMark
	for _, e := range evs {
		at := e.GetEventTime().AsTime()
		if at.Before(t0) {
			continue
		}
		m := flipMark{at: at, kind: e.GetEventType(), id: e.GetEventId()}
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
	return ms
}

// sweep charges each instant to what was outstanding then.
type sweep struct {
	now                      time.Time
	acts                     map[int64]bool // scheduled event -> started
	wftScheduled, wftStarted bool
	sp                       flipSpan
}

func (w *sweep) charge(until time.Time) {
	if !until.After(w.now) {
		return
	}
	part := partTransit
	switch {
	case anyStarted(w.acts):
		part = partActRun
	case len(w.acts) > 0:
		part = partActQueued
	case w.wftStarted:
		part = partWFTRun
	case w.wftScheduled:
		part = partWFTQueued
	}
	w.sp.parts[part] += until.Sub(w.now)
	w.now = until
}

func (w *sweep) apply(m flipMark) {
	switch m.kind {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		w.acts[m.ref] = false
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		w.acts[m.ref] = true
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		delete(w.acts, m.ref)
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
		w.wftScheduled = true
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
		w.wftStarted = true
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		w.wftScheduled, w.wftStarted = false, false
	}
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
			xs = append(xs, report.MS(s.parts[p]))
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
