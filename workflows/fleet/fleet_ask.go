// How the fleet learns that a node's workflow ended when it cannot see it
// (a child's future does not cross continue-as-new): after waiting a while
// on quiet nodes from an earlier run, it holds a round: one visibility
// query, from a local activity, for its children closed since the round
// before, each confirmed by a describe (fleet-visibility). Runs recorded
// before asked the orchestrator's relay to describe up to askBatch nodes
// (fleet-describe), and before that signalled each a no-op
// (SignalFleetAsk), which fails once the workflow has closed. Why, and what
// it costs: docs/fleet.md, docs/workflows.md.
package fleet

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet/relay"
)

const (
	askFirst = config.DefaultAskAfter // the first round, after the main loop waited this long
	askMax   = config.MaxAskAfter     // rounds are never further apart
	askBatch = 10                     // nodes asked in one round by describes or signals, those unheard longest first
	// visibilityLag is how far before the round before a round's query
	// reaches back: a close that visibility showed that late is still
	// found.
	visibilityLag = 15 * time.Minute
)

// toAsk are the nodes the fleet waits on that it cannot see end, not heard
// from within quiet of now, unheard longest first, at most limit (0: all).
func (f *fleet) toAsk(now time.Time, quiet time.Duration, limit int) []int {
	var waits []int
	switch {
	case len(f.retries) > 0 || f.st.Next == 0:
	case f.st.Next < len(f.st.Nodes):
		if f.st.Grants == 0 && !f.st.startsByItself(f.st.Next) {
			waits = f.st.waitsOn(f.st.Next)
		}
	default:
		for i := range f.st.Nodes {
			waits = append(waits, i)
		}
	}
	var out []int
	for _, i := range waits {
		n := f.st.Nodes[i]
		if n.Started && n.Ended == "" && f.gen[n.Node] == 0 && now.Sub(f.heard[n.Node]) >= quiet {
			out = append(out, i)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return f.heard[f.st.Nodes[out[a]].Node].Before(f.heard[f.st.Nodes[out[b]].Node]) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// askFirst is askFirst, or the fleet's AskFirst (the fleet file's ask_after).
func (f *fleet) askFirst() time.Duration {
	if f.in.AskFirst > 0 {
		return f.in.AskFirst
	}
	return askFirst
}

// awaitOrAsk waits for ready like workflow.Await, but when there are nodes
// to ask it waits at most f.askWait (one timer, cancelled if ready comes
// first) and then asks them; it says whether it held a round instead of
// seeing ready. A round that asked someone puts the next one twice as far;
// ready puts it back to askFirst.
func (f *fleet) awaitOrAsk(ctx workflow.Context, ready func() bool) (bool, error) {
	if !f.ask || ready() || len(f.toAsk(workflow.Now(ctx), 0, 0)) == 0 {
		f.askWait = f.askFirst()
		return false, workflow.Await(ctx, ready)
	}
	tctx, cancel := workflow.WithCancel(ctx)
	timer := workflow.NewTimer(tctx, f.askWait)
	if err := workflow.Await(ctx, func() bool { return timer.IsReady() || ready() }); err != nil {
		cancel()
		return false, err
	}
	if !timer.IsReady() {
		cancel()
		f.askWait = f.askFirst()
		return false, nil
	}
	if f.askRound(ctx, f.askWait) > 0 {
		f.askWait = min(2*f.askWait, askMax)
	}
	return true, nil
}

// askRound holds a round if a node the fleet waits on was not heard from
// within quiet, marks the nodes whose workflow has closed, and says how many
// it asked (none: each was heard from within quiet).
func (f *fleet) askRound(ctx workflow.Context, quiet time.Duration) int {
	now := workflow.Now(ctx)
	asked := f.toAsk(now, quiet, 0)
	if len(asked) == 0 {
		f.show(ctx)
		return 0
	}
	if workflow.GetVersion(ctx, changeFleetVisibility, workflow.DefaultVersion, 1) >= 1 {
		f.listRound(ctx, now)
		return len(asked)
	}
	if len(asked) > askBatch {
		asked = asked[:askBatch]
	}
	if workflow.GetVersion(ctx, changeFleetDescribe, workflow.DefaultVersion, 1) >= 1 {
		f.describeRound(ctx, now, asked)
		return len(asked)
	}
	futs := make([]workflow.Future, len(asked))
	for k, i := range asked {
		futs[k] = workflow.SignalExternalWorkflow(ctx, workflows.WorkflowID(f.st.Nodes[i].Node), "", workflows.SignalFleetAsk, nil)
	}
	for k, i := range asked {
		node := f.st.Nodes[i].Node
		err := futs[k].Get(ctx, nil)
		var gone *temporal.UnknownExternalWorkflowExecutionError
		switch {
		case err == nil:
			f.heard[node] = now // running when asked
		case errors.As(err, &gone):
			n := &f.st.Nodes[f.index(node)]
			if n.Ended != "" || f.gen[node] != 0 {
				continue // its end arrived, or a retry started it, meanwhile
			}
			n.Ended = fmt.Sprintf("ended unseen: its workflow %s had closed when the fleet asked at %s (started before the fleet continued as new, so the fleet cannot tell how; adopt status %s)",
				workflows.WorkflowID(node), now.UTC().Format("15:04:05"), node)
			f.note(ctx, "node "+node+" "+n.Ended)
		default:
			workflow.GetLogger(ctx).Warn("asking a node's workflow failed", "node", node, "error", err)
		}
	}
	f.show(ctx)
	return len(asked)
}

// listRound queries the closes of the fleet's children since the round
// before (less visibilityLag) in one local activity, for every node started
// in an earlier run whose end the fleet has not seen, whether it waits on
// it or not (so a later round's Since misses none of them). A node
// confirmed ended ends here with how; the others count as heard. A round
// whose query failed moves Since on not at all: the next one looks as far
// back.
func (f *fleet) listRound(ctx workflow.Context, now time.Time) {
	in := relay.EndedInput{Fleet: FleetID(f.st.Name)}
	if !f.st.AskedAt.IsZero() {
		in.Since = f.st.AskedAt.Add(-visibilityLag)
	}
	for _, n := range f.st.Nodes {
		if n.Started && n.Ended == "" && f.gen[n.Node] == 0 {
			in.Nodes = append(in.Nodes, relay.Child{Node: n.Node, RunID: n.RunID})
		}
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             "list the fleet's children ended since its last round",
	})
	var out relay.EndedOutput
	if err := workflow.ExecuteLocalActivity(lctx, relayActs.Ended, in).Get(ctx, &out); err != nil {
		workflow.GetLogger(ctx).Warn("listing the fleet's ended nodes failed", "error", err)
		f.show(ctx)
		return
	}
	f.st.AskedAt = now
	for _, c := range in.Nodes {
		f.heard[c.Node] = now // running, or its end is below
	}
	for _, c := range out.Ended {
		i := f.index(c.Node)
		if i < 0 {
			continue
		}
		if n := &f.st.Nodes[i]; n.Ended == "" && f.gen[c.Node] == 0 {
			n.Ended = c.Ended
			f.event(ctx, "node "+c.Node+" "+n.Ended)
		}
	}
	f.show(ctx)
}

// describeRound asks the relay how the asked nodes' workflows stand: a
// chain the fleet started that ended, or a workflow started again outside
// the fleet under the node's ID, ends the node here with how.
func (f *fleet) describeRound(ctx workflow.Context, now time.Time, asked []int) {
	in := relay.ChildrenInput{Fleet: FleetID(f.st.Name)}
	for _, i := range asked {
		in.Nodes = append(in.Nodes, relay.Child{Node: f.st.Nodes[i].Node, RunID: f.st.Nodes[i].RunID})
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflows.TaskQueue, // the orchestrator's
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var out []relay.ChildStanding
	if err := workflow.ExecuteActivity(actx, relayActs.Children, in).Get(ctx, &out); err != nil {
		workflow.GetLogger(ctx).Warn("describing the fleet's nodes failed", "error", err)
		return
	}
	for _, c := range out {
		i := f.index(c.Node)
		if i < 0 {
			continue
		}
		n := &f.st.Nodes[i]
		switch {
		case n.Ended != "" || f.gen[c.Node] != 0:
			// its end arrived, or a retry started it, meanwhile
		case c.Ended == "":
			f.heard[c.Node] = now // running when asked
		default:
			n.Ended = c.Ended
			f.note(ctx, "node "+c.Node+" "+n.Ended)
		}
	}
	f.show(ctx)
}
