package watch

// This file holds what the loop keeps across the agent's restarts: the
// watch request the node authorised (the plan's hash, that plan's
// intervals, the workflow that asked, the marks to keep and the drift
// baseline: ports and digests, no file content and no value), written
// under state_dir when a request installs it, and resumed when the agent
// starts, before it dials Temporal, so the node goes on checking itself
// while Temporal is out of reach.

import (
	"encoding/json"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
)

// Store keeps the loop's record (nodestate.Dir).
type Store interface {
	Watch() ([]byte, bool, error)
	SetWatch([]byte) error
	ClearWatch() error
}

// kept is the record: what the loop needs to run the watch again.
type kept struct {
	Workflow string    `json:"workflow"`
	Every    Intervals `json:"every"`
	Input    Input     `json:"input"`
	Saved    time.Time `json:"saved"`
}

// keep writes j as the watch to resume after a restart.
func (l *Loop) keep(j *job) {
	if l.Store == nil {
		return
	}
	in := j.in
	in.Known, in.Bound = "", 0 // the workflow's, not the node's
	b, err := json.MarshalIndent(kept{Workflow: j.workflow, Every: j.every, Input: in, Saved: time.Now().UTC()}, "", "  ")
	if err == nil {
		err = l.Store.SetWatch(b)
	}
	if err != nil {
		l.logf("watch: node %s: keep the watch for a restart: %v", j.in.Plan.Node, err)
	}
}

// forget removes the kept watch, saying why, when there is one.
func (l *Loop) forget(why string) {
	if l.Store == nil {
		return
	}
	if _, ok, err := l.Store.Watch(); err != nil || !ok {
		return
	}
	if err := l.Store.ClearWatch(); err != nil {
		l.logf("watch: remove the kept watch (%s): %v", why, err)
		return
	}
	l.logf("watch: %s: the watch is no longer kept for a restart", why)
}

// Resume installs the kept watch, its checks due at once, when the node's
// own file still derives the plan it names and the node's records do not
// end it (released, converged, served by another workflow); a watch they
// end, or under another plan, is removed. It reports whether one resumed.
func (l *Loop) Resume(now time.Time) bool {
	if l.Store == nil {
		return false
	}
	b, ok, err := l.Store.Watch()
	if err != nil {
		l.logf("watch: read the kept watch: %v", err)
		return false
	}
	if !ok {
		return false
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil {
		l.logf("watch: the kept watch is corrupt, not resumed: %v", err)
		l.forget("corrupt")
		return false
	}
	if _, err := l.own(k.Input.Plan); err != nil {
		l.logf("watch: the kept watch of node %s is not resumed: %s", k.Input.Plan.Node, errText(err))
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == authority.ErrPlanMismatch {
			l.forget("the node's file derives another plan")
		}
		return false
	}
	j := &job{in: k.Input, workflow: k.Workflow, every: k.Every}
	if why, err := l.vetoed(j); err != nil {
		l.logf("watch: read the node's records: %v; the kept watch is not resumed", err)
		return false
	} else if final(why) {
		l.forget(why)
		return false
	}
	l.install(j, now, now)
	l.logf("watch: node %s: resumed the watch of workflow %s kept under state_dir (plan sha256 %.12s)", k.Input.Plan.Node, k.Workflow, k.Input.Plan.Hash)
	return true
}
