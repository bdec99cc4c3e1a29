package scale

// This file holds the attention check (-scale-attention N): N nodes spread
// over the fleet are made to need a person through the product's own path
// (a person edits a declared node file by hand after adoption, so each
// node's agent finds drift and its workflow sets AdoptionAttention
// "drift"), then the one visibility query `adopt status --attention` makes
// (workflows/visibility) must return exactly those N. Then the files are
// restored, and the same query must come back empty before the flips.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"adoption/bench/report"
	"adoption/workflows"
	"adoption/workflows/visibility"
)

// AttentionDetails is what the attention check found.
type AttentionDetails struct {
	Nodes  int               `json:"nodes"`
	Chosen []string          `json:"chosen"` // the nodes made to need a person
	How    string            `json:"how"`
	Query  string            `json:"query"`
	Found  map[string]string `json:"found"` // what the timed query returned: node (or workflow) and its AdoptionAttention
	Count  int               `json:"count"`
	// QueryMS is the one timed query, from the list call's sending to its
	// last page; WaitS how long after the edits the set first matched.
	QueryMS float64 `json:"query_ms"`
	WaitS   float64 `json:"wait_s"`
	Match   bool    `json:"match"`
	// ClearedS: after the files were restored, until the query came back
	// empty.
	ClearedS float64 `json:"cleared_s"`
}

// driftFile is the declared node file the person edits, and the line they add.
const (
	driftFile = "/etc/hosts"
	driftLine = "10.0.0.99 edited-by-hand\n"
)

// attentionNodes are the n nodes made to need a person: spread over the
// fleet, never the control node.
func (r *scaleRun) attentionNodes(n int) []string {
	var out []string
	for _, i := range spread(len(r.plans)) {
		if i != 0 && len(out) < n {
			out = append(out, r.plans[i].Node)
		}
	}
	slices.Sort(out)
	return out
}

// editNodeFiles edits (or, with restore, restores) the declared node file
// of each node under its tmpfs root, as a person on the node would.
func (r *scaleRun) editNodeFiles(nodes []string, restore bool) error {
	for _, node := range nodes {
		p := filepath.Join(r.nodesDir, node, "root", driftFile)
		content := memFiles[driftFile]
		if !restore {
			content += driftLine
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("edit %s of simulated node %s: %w", driftFile, node, err)
		}
	}
	return nil
}

// startAttention edits the chosen nodes' file once every node is
// migrated, before the idle window (the agents' drift checks find it
// within the plan's drift interval).
func (r *scaleRun) startAttention() (time.Time, error) {
	if r.o.Attention == 0 {
		return time.Time{}, nil
	}
	r.d.Attention = &AttentionDetails{Nodes: r.o.Nodes, Chosen: r.attentionNodes(r.o.Attention), Query: visibility.Query(false, true),
		How: fmt.Sprintf("after every node migrated, %s of each chosen node edited by hand (a line added): its agent's drift check (every %s) finds it, its workflow sets AdoptionAttention %q",
			driftFile, r.plans[0].DriftInterval, workflows.AttentionDrift)}
	r.logf("attention: editing %s on %d nodes (%v) ...", driftFile, len(r.d.Attention.Chosen), r.d.Attention.Chosen)
	return time.Now(), r.editNodeFiles(r.d.Attention.Chosen, false)
}

// attentionQuery runs `adopt status --attention`'s visibility query once:
// what it found and how long it took.
func (r *scaleRun) attentionQuery(ctx context.Context) (map[string]string, time.Duration, error) {
	found := map[string]string{}
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second) // the overview's bound
	defer cancel()
	t0 := time.Now()
	err := visibility.List(qctx, r.c, visibility.Query(false, true), func(e *workflowpb.WorkflowExecutionInfo) {
		node := visibility.NodeOf(e)
		if node == "" {
			node = e.GetExecution().GetWorkflowId() // a fleet holding a wave
		}
		found[node] = visibility.Keyword(e, workflows.AttrAttention)
	})
	return found, time.Since(t0), err
}

// checkAttention waits (bounded by the drift interval and 2 minutes
// after the edits) until the query returns the chosen nodes, then times
// one query and fails unless it returns exactly them. It then restores
// the files and waits (bounded alike) until the query is empty, so the
// flips that follow find no drift.
func (r *scaleRun) checkAttention(ctx context.Context, edited time.Time) error {
	a := r.d.Attention
	if a == nil {
		return nil
	}
	bound := r.plans[0].DriftInterval + 2*time.Minute
	exact := func(found map[string]string) bool {
		if len(found) != len(a.Chosen) {
			return false
		}
		for _, n := range a.Chosen {
			if found[n] != workflows.AttentionDrift {
				return false
			}
		}
		return true
	}
	if err := r.waitQuery(ctx, edited, bound, exact); err != nil {
		r.logf("attention: %v; timing the query anyway", err) // the timed query below says what it returns
	}
	a.WaitS = time.Since(edited).Seconds()
	found, took, err := r.attentionQuery(ctx)
	if err != nil {
		return err
	}
	a.Found, a.Count, a.QueryMS, a.Match = found, len(found), report.MS(took), exact(found)
	r.logf("attention: %d nodes, attention set %d %v; the query (%s) returned %d in %.1f ms (%.0f s after the edits): %s",
		r.o.Nodes, len(a.Chosen), a.Chosen, a.Query, a.Count, a.QueryMS, a.WaitS, map[bool]string{true: "exactly those", false: "MISMATCH"}[a.Match])
	if !a.Match {
		return fmt.Errorf("attention: the query %s returned %d workflows %v; want exactly the %d nodes %v, each %q",
			a.Query, a.Count, found, len(a.Chosen), a.Chosen, workflows.AttentionDrift)
	}
	if err := r.editNodeFiles(a.Chosen, true); err != nil {
		return err
	}
	restored := time.Now()
	if err := r.waitQuery(ctx, restored, bound, func(found map[string]string) bool { return len(found) == 0 }); err != nil {
		return fmt.Errorf("attention: after the files were restored: %w", err)
	}
	a.ClearedS = time.Since(restored).Seconds()
	r.logf("attention: files restored; the query returned none %.0f s later", a.ClearedS)
	return nil
}

// waitQuery asks the query every 5 s until ok holds of its answer, or
// fails once bound has passed since t0.
func (r *scaleRun) waitQuery(ctx context.Context, t0 time.Time, bound time.Duration, ok func(map[string]string) bool) error {
	for {
		found, _, err := r.attentionQuery(ctx)
		if err != nil && !isTransient(err) {
			return err
		}
		if err == nil && ok(found) {
			return nil
		}
		if time.Since(t0) > bound || ctx.Err() != nil {
			return fmt.Errorf("the query %s returned %d workflows %v %s after the files changed (err %v)",
				visibility.Query(false, true), len(found), found, time.Since(t0).Round(time.Second), err)
		}
		time.Sleep(5 * time.Second)
	}
}
