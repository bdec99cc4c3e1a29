// The Fleet as it ran before fleet.go's members and continue-as-new: kept
// verbatim so that fleets started by it replay (changeFleetMembers).

package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// fleetLegacy is the Fleet as it ran before members and continue-as-new
// (every plan in its input, blocked by a failed child): fleets recorded
// with it replay here, unchanged.
func fleetLegacy(ctx workflow.Context, in FleetInput) (*FleetState, error) {
	if err := ValidateFleet(in); err != nil {
		return nil, err
	}
	st := &FleetState{Name: in.Name}
	for _, p := range in.Nodes {
		st.Nodes = append(st.Nodes, FleetNode{NodeProgress: NodeProgress{Node: p.Node, Modules: len(p.Modules)}, Role: p.Role})
	}
	if err := workflow.SetQueryHandler(ctx, QueryFleet, func() (FleetState, error) { return *st, nil }); err != nil {
		return nil, err
	}
	next := 0
	progress := workflow.GetSignalChannel(ctx, SignalNodeProgress)
	nextCh := workflow.GetSignalChannel(ctx, SignalFleetNext)
	note := func(s string) {
		st.Events = append(st.Events, workflow.Now(ctx).UTC().Format("15:04:05")+" "+s)
		workflow.SetCurrentDetails(ctx, fleetDetails(st))
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			sel.AddReceive(progress, func(c workflow.ReceiveChannel, _ bool) {
				var p NodeProgress
				c.Receive(ctx, &p)
				for i := range st.Nodes {
					if st.Nodes[i].Node != p.Node {
						continue
					}
					st.Nodes[i].NodeProgress = p
					st.Nodes[i].Done = nodeDone(p)
					if st.Nodes[i].Role == "control" && st.Nodes[i].Done && st.Frozen != "" {
						st.Frozen = ""
						note("control node " + p.Node + " migrated: the predecessor's pipeline is no longer needed")
					}
				}
				workflow.SetCurrentDetails(ctx, fleetDetails(st))
			})
			sel.AddReceive(nextCh, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, nil)
				next++
				note("operator: start the next node now")
			})
			sel.Select(ctx)
		}
	})

	var children []workflow.ChildWorkflowFuture
	for i, p := range in.Nodes {
		if i > 0 {
			prev := i - 1
			if err := workflow.Await(ctx, func() bool { return st.Nodes[prev].Done || next > 0 }); err != nil {
				return st, err
			}
			if !st.Nodes[prev].Done {
				next-- // one operator grant spent
			}
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            WorkflowID(p.Node),
			TaskQueue:             TaskQueue,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON, // a node's adoption outlives its fleet
			StaticSummary:         fmt.Sprintf("adoption of node %s (%s) in fleet %s", p.Node, p.Role, in.Name),
			TypedSearchAttributes: temporal.NewSearchAttributes(AttrNode.ValueSet(p.Node), AttrPhase.ValueSet(string(PhaseProbing))),
		})
		f := workflow.ExecuteChildWorkflow(cctx, NodeWorkflow, Input{Plan: p})
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			note(fmt.Sprintf("node %s could not start: %v", p.Node, err))
			return st, err
		}
		st.Nodes[i].Started = true
		if p.Role == "control" {
			st.Frozen = fmt.Sprintf("the predecessor's pipeline is frozen for every node it manages while control node %s migrates", p.Node)
		}
		note("started node " + p.Node)
		children = append(children, f)
	}
	note("every node started; flips are per node: adopt flip NODE")
	// The fleet ends when every node has ended (converged or released).
	for i, f := range children {
		var res State
		if err := f.Get(ctx, &res); err != nil {
			note(fmt.Sprintf("node %s ended with an error: %v", in.Nodes[i].Node, err))
			continue
		}
		st.Nodes[i].NodeProgress = NodeProgress{Node: res.Node, Phase: res.Phase, Migrated: res.MigratedCount(), Modules: len(res.Modules)}
		st.Nodes[i].Done = true
	}
	st.Frozen = ""
	note("every node has ended")
	return st, nil
}
