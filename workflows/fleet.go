package workflows

import (
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/config"
)

// Names of the fleet on the wire.
const (
	FleetWorkflow = "Fleet"
	// SignalFleetNext lets the operator start the next node before the
	// current one has migrated every module.
	SignalFleetNext = "fleet-next"
	// SignalNodeProgress is sent by each node's workflow to its fleet when
	// its phase or its modules change.
	SignalNodeProgress = "node-progress"
	QueryFleet         = "fleet"
)

// FleetID is the one fleet execution of a given name.
func FleetID(name string) string { return "fleet/" + name }

// FleetInput lists the nodes' plans, the control node first.
type FleetInput struct {
	Name  string        `json:"name"`
	Nodes []config.Plan `json:"nodes"`
}

// NodeProgress is what a node's workflow tells its fleet.
type NodeProgress struct {
	Node     string `json:"node"`
	Phase    Phase  `json:"phase"`
	Migrated int    `json:"migrated"`
	Modules  int    `json:"modules"`
}

// FleetNode is one node as the fleet sees it.
type FleetNode struct {
	NodeProgress
	Role    string `json:"role"`
	Started bool   `json:"started"`
	Done    bool   `json:"done"` // adopted with every module migrated (or further)
}

// FleetState is what the fleet query returns.
type FleetState struct {
	Name  string      `json:"name"`
	Nodes []FleetNode `json:"nodes"`
	// Frozen is set while the control node migrates: the predecessor's
	// build pipeline and coordinator run there, so every node it manages
	// receives no update until the control node is migrated.
	Frozen string   `json:"frozen,omitempty"`
	Events []string `json:"events"`
}

// ValidateFleet checks the order the seed asks for: one control node,
// first; names unique.
func ValidateFleet(in FleetInput) error {
	var problems []string
	if !config.ValidName(in.Name) {
		problems = append(problems, fmt.Sprintf("fleet name %q is invalid: it must be %s", in.Name, config.NameRule))
	}
	if len(in.Nodes) == 0 {
		problems = append(problems, "the fleet has no nodes")
	}
	seen := map[string]bool{}
	controls := 0
	for i, p := range in.Nodes {
		if seen[p.Node] {
			problems = append(problems, fmt.Sprintf("node %s appears twice", p.Node))
		}
		seen[p.Node] = true
		if p.Role == "control" {
			controls++
			if i != 0 {
				problems = append(problems, fmt.Sprintf("control node %s must come first (it is number %d)", p.Node, i+1))
			}
		}
	}
	if controls != 1 {
		problems = append(problems, fmt.Sprintf("a fleet has exactly one control node (node.role: control); this one has %d", controls))
	}
	if len(problems) > 0 {
		return fmt.Errorf("fleet %s: %s", in.Name, strings.Join(problems, "; "))
	}
	return nil
}

// Fleet runs every node's NodeMigration as a child, one after another, the
// control node first: the next node starts once the previous one is adopted
// with every module migrated, or when the operator says so. Flips stay per
// node and are never started here.
func Fleet(ctx workflow.Context, in FleetInput) (*FleetState, error) {
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

func nodeDone(p NodeProgress) bool {
	switch p.Phase {
	case PhaseAdopted, PhaseFlipping, PhaseConverged:
		return p.Migrated == p.Modules
	}
	return false
}

func fleetDetails(st *FleetState) string {
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Fleet %s**\n\n", st.Name))
	if st.Frozen != "" {
		b.WriteString("> " + st.Frozen + "\n\n")
	}
	for _, n := range st.Nodes {
		phase := string(n.Phase)
		if !n.Started {
			phase = "waiting"
		}
		b.WriteString(fmt.Sprintf("- %s (%s): %s, modules %d/%d\n", n.Node, n.Role, phase, n.Migrated, n.Modules))
	}
	return b.String()
}
