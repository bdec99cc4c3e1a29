// `adopt status` with no node: every running node at once. The list and
// the phases come from visibility (AdoptionPhase, AdoptionNode), one query
// per page, not per node; the modules and each node's agent are asked in
// parallel, each with a short timeout, and "?" stands where an answer did
// not come in time. It answers in seconds for hundreds of nodes, most of
// them with no agent.
package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"adoption/config"
	"adoption/workflows"
)

type overviewOpts struct {
	phase, fleet string
	all          bool
	ask          time.Duration
}

// NodeSummary is one line of the overview. Migrated and Modules are null
// when the node's workflow did not answer in time.
type NodeSummary struct {
	Node     string `json:"node"`
	Phase    string `json:"phase"`
	Migrated *int   `json:"migrated"`
	Modules  *int   `json:"modules"`
	Running  bool   `json:"running"`
	Status   string `json:"status"`
	// Agent: "yes" when the node's agent polls its queue, "no", or "?".
	Agent string `json:"agent"`
	Note  string `json:"note,omitempty"`
}

func phaseList() string {
	out := make([]string, 0, len(knownPhases))
	for _, p := range knownPhases {
		out = append(out, string(p))
	}
	return strings.Join(out, ", ")
}

var knownPhases = []workflows.Phase{workflows.PhaseProbing, workflows.PhaseAdopted, workflows.PhaseMigrating,
	workflows.PhaseFlipping, workflows.PhaseConverged, workflows.PhaseReleased, workflows.PhaseFailed}

func validPhase(p string) bool { return slices.Contains(knownPhases, workflows.Phase(p)) }

func (x *cli) overview(ctx context.Context, o overviewOpts) error {
	if o.phase != "" && !validPhase(o.phase) {
		return usagef("--phase %q is not a phase: use one of %s", o.phase, phaseList())
	}
	var only []string
	if o.fleet != "" {
		f, err := config.LoadFleet(o.fleet)
		if err != nil {
			return err
		}
		for _, c := range f.Configs {
			only = append(only, c.Node.Name)
		}
		if !x.configGiven() {
			if err := x.dialWith(&f.Temporal, "temporal.* of "+o.fleet); err != nil {
				return err
			}
		}
	}
	if err := x.dial(); err != nil {
		return err
	}
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.NodeWorkflow)
	if !o.all {
		q += " AND ExecutionStatus = 'Running'"
	}
	if o.phase != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.AttrPhase.GetName(), o.phase) // validated above
	}
	if len(only) > 0 {
		q += fmt.Sprintf(" AND %s IN ('%s')", workflows.AttrNode.GetName(), strings.Join(only, "', '")) // names validated by the config loader
	}
	latest := map[string]NodeSummary{}
	starts := map[string]time.Time{}
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var token []byte
	for {
		resp, err := x.c.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return fmt.Errorf("list node workflows (%s): %w", q, err)
		}
		for _, e := range resp.Executions {
			node, ok := strings.CutPrefix(e.GetExecution().GetWorkflowId(), "node-migration/")
			if !ok {
				continue
			}
			r := runFrom(e)
			if prev, seen := latest[node]; seen && (prev.Running || (!r.running && starts[node].After(r.started))) {
				continue // the open run wins, then the latest closed one
			}
			latest[node] = NodeSummary{Node: node, Phase: orUnknown(string(r.phase)), Running: r.running, Status: r.status, Agent: "?"}
			starts[node] = r.started
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	nodes := make([]string, 0, len(latest))
	for n := range latest {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make([]NodeSummary, len(nodes))
	for i, n := range nodes {
		out[i] = latest[n]
	}
	x.details(ctx, out, o.ask)
	if x.asJSON {
		return writeJSON(x.stdout, out)
	}
	tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPHASE\tMODULES MIGRATED\tAGENT\tNOTE")
	for _, s := range out {
		mods := "?"
		if s.Migrated != nil && s.Modules != nil {
			mods = fmt.Sprintf("%d/%d", *s.Migrated, *s.Modules)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Node, s.Phase, mods, s.Agent, s.Note)
	}
	if len(out) == 0 {
		what := "running node workflows"
		if o.phase != "" {
			what += " in phase " + o.phase
		}
		fmt.Fprintf(tw, "(no %s; start one with `adopt start NODE --config FILE`)\n", what)
	}
	return tw.Flush()
}

// details fills in each node's modules and agent, in parallel, each node
// bounded by ask. A worker that does not serve the workflow queue at all
// is asked about once, not once per node.
func (x *cli) details(ctx context.Context, out []NodeSummary, ask time.Duration) {
	wq := x.queueHealth(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	canQuery := wq.alive() || wq.unknown()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(16, len(out)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				x.detail(ctx, &out[i], ask, canQuery, wq)
			}
		}()
	}
	for i := range out {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

func (x *cli) detail(ctx context.Context, s *NodeSummary, ask time.Duration, canQuery bool, wq queueHealth) {
	actx, cancel := context.WithTimeout(ctx, ask)
	defer cancel()
	var st *workflows.State
	var err error
	switch {
	case s.Running && canQuery:
		st, err = x.query(actx, s.Node, ask)
	case s.Running:
		s.Note = wq.describe("worker")
	case s.Status == "completed":
		var res workflows.State
		if err = x.c.GetWorkflow(actx, workflows.WorkflowID(s.Node), "").Get(actx, &res); err == nil {
			st = &res
		}
	}
	if st != nil {
		mig, mods := st.MigratedCount(), len(st.Modules)
		s.Migrated, s.Modules, s.Phase = &mig, &mods, string(st.Phase)
	} else if err != nil {
		s.Note = fmt.Sprintf("no answer within %s", ask)
	}
	if !s.Running {
		s.Agent = "-"
		return
	}
	ag := x.queueHealth(actx, workflows.NodeQueue(s.Node), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	switch {
	case ag.alive():
		s.Agent = "yes"
	case ag.unknown():
		s.Agent = "?"
	default:
		s.Agent = "no"
		if s.Note == "" {
			s.Note = ag.describe("agent")
		}
	}
}
