// `adopt status` with no node: every running node at once, from
// visibility alone. The list, each node (AdoptionNode) and its phase
// (AdoptionPhase) come from one list call per page, never one call per
// node: a node's workflow is not asked (a query may replay its history on
// the orchestrator), nor its agent's queue. The workflow task queue is
// asked once, to say when no worker serves any of them. `--details` asks
// each node too (its modules and its agent), at most detailsParallel at a
// time, each bounded by --ask-timeout and all of them by
// --details-timeout; "?" stands where an answer did not come in time.
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
	workflowpb "go.temporal.io/api/workflow/v1"

	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/visibility"
)

type overviewOpts struct {
	phase, fleet string
	all          bool
	attention    bool          // only what needs a person (--attention)
	details      bool          // ask each node (--details)
	ask          time.Duration // each node's bound, with --details
	budget       time.Duration // every node's, with --details
}

// detailsParallel bounds how many nodes --details asks at once.
const detailsParallel = 16

// NodeSummary is one line of the overview. Phase is the node's
// AdoptionPhase as visibility has it. Migrated, Modules and Agent are
// asked of each node only with --details: Migrated and Modules are null
// without it, or when the node's workflow did not answer in time.
type NodeSummary struct {
	Node     string `json:"node"`
	Phase    string `json:"phase"`
	Migrated *int   `json:"migrated"`
	Modules  *int   `json:"modules"`
	Running  bool   `json:"running"`
	Status   string `json:"status"`
	// Started is when the current run began (AGE; a continue-as-new
	// starts a new run).
	Started time.Time `json:"started,omitzero"`
	// Agent, with --details: "yes" when the node's agent polls its queue,
	// "no", "?" (not known in time), "-" (the run has ended).
	Agent string `json:"agent,omitempty"`
	Note  string `json:"note,omitempty"`
	// Attention is the run's AdoptionAttention: what it needs a person
	// for, "" when nothing.
	Attention string `json:"attention,omitempty"`
}

func phaseList() string { return strings.Join(phaseNames(), ", ") }

var knownPhases = []workflows.Phase{workflows.PhaseProbing, workflows.PhaseAdopted, workflows.PhaseMigrating,
	workflows.PhaseFlipping, workflows.PhaseConverged, workflows.PhaseReleased, workflows.PhaseFailed}

func validPhase(p string) bool { return slices.Contains(knownPhases, workflows.Phase(p)) }

func (x *cli) overview(ctx context.Context, o overviewOpts) error {
	if o.phase != "" && !validPhase(o.phase) {
		return usagef("--phase %q is not a phase: use one of %s", o.phase, phaseList())
	}
	if o.details && (o.ask <= 0 || o.budget <= 0) {
		return usagef("--ask-timeout %s and --details-timeout %s must both be more than 0", o.ask, o.budget)
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
	q := visibility.Query(o.all, o.attention)
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
	err := visibility.List(lctx, x.c, q, func(e *workflowpb.WorkflowExecutionInfo) {
		node := visibility.NodeOf(e)
		if node == "" && o.attention {
			node = e.GetExecution().GetWorkflowId() // a fleet holding a wave
		}
		if node == "" {
			return
		}
		r := runFrom(e)
		if prev, seen := latest[node]; seen && (prev.Running || (!r.running && starts[node].After(r.started))) {
			return // the open run wins, then the latest closed one
		}
		latest[node] = NodeSummary{Node: node, Phase: orUnknown(string(r.phase)), Running: r.running, Status: r.status, Started: r.started,
			Attention: visibility.Keyword(e, workflows.AttrAttention)}
		starts[node] = r.started
	})
	if err != nil {
		return err
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
	// One question for every node: a worker that does not serve the
	// workflow queue at all moves none of them.
	var wq queueHealth
	if len(out) > 0 {
		wq = x.queueHealth(ctx, workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	}
	if o.details {
		x.details(ctx, out, o, wq)
	} else if !wq.alive() && !wq.unknown() {
		for i := range out {
			if out[i].Running {
				out[i].Note = wq.describe("worker", x.zone())
			}
		}
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, out)
	}
	tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
	if o.details {
		fmt.Fprintln(tw, "NODE\tPHASE\tAGE\tMODULES MIGRATED\tAGENT\tNOTE")
	} else if o.attention {
		fmt.Fprintln(tw, "NODE\tPHASE\tATTENTION\tAGE\tNOTE")
	} else {
		fmt.Fprintln(tw, "NODE\tPHASE\tRUN\tAGE\tNOTE")
	}
	now := time.Now()
	for _, s := range out {
		if !o.details {
			third := s.Status
			if o.attention {
				third = s.Attention
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Node, s.Phase, third, age(now, s.Started), s.Note)
			continue
		}
		mods := "?"
		if s.Migrated != nil && s.Modules != nil {
			mods = fmt.Sprintf("%d/%d", *s.Migrated, *s.Modules)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Node, s.Phase, age(now, s.Started), mods, s.Agent, s.Note)
	}
	if len(out) == 0 {
		what := "running node workflows"
		if o.phase != "" {
			what += " in phase " + o.phase
		}
		if o.attention {
			what = "running workflow needs a person (AdoptionAttention is empty everywhere)"
		}
		fmt.Fprintf(x.stderr, "(no %s; start one with `adopt start NODE --config FILE`)\n", what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(out) > 0 && !o.details {
		fmt.Fprintf(x.stderr, "\n%d node(s), phases from visibility. A node's modules, agent and next step: `adopt status NODE`; every node's (asks each one): `adopt status --details`\n", len(out))
	}
	return nil
}

// details asks each node for its modules and its agent (--details), at
// most detailsParallel at a time, each node bounded by o.ask and all of
// them by o.budget: a node not reached by then is marked so, not waited
// for. A worker that does not serve the workflow queue at all (wq) is
// asked about once, not once per node.
func (x *cli) details(ctx context.Context, out []NodeSummary, o overviewOpts, wq queueHealth) {
	dctx, cancel := context.WithTimeout(ctx, o.budget)
	defer cancel()
	canQuery := wq.alive() || wq.unknown()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(detailsParallel, len(out)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if dctx.Err() != nil {
					out[i].Agent = "?"
					out[i].Note = fmt.Sprintf("not asked: --details-timeout %s spent", o.budget)
					continue
				}
				x.detail(dctx, &out[i], o, canQuery, wq)
			}
		}()
	}
	for i := range out {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// detail asks one node. The phase stays visibility's (the column means one
// thing, and --phase filters on it); a workflow that says otherwise is
// noted.
func (x *cli) detail(ctx context.Context, s *NodeSummary, o overviewOpts, canQuery bool, wq queueHealth) {
	ask := o.ask
	actx, cancel := context.WithTimeout(ctx, ask)
	defer cancel()
	var st *workflows.State
	var err error
	switch {
	case s.Running && canQuery:
		st, err = x.query(actx, s.Node, ask)
	case s.Running:
		s.Note = wq.describe("worker", x.zone())
	case s.Status == "completed":
		var res workflows.State
		if err = x.c.GetWorkflow(actx, workflows.WorkflowID(s.Node), "").Get(actx, &res); err == nil {
			st = &res
		}
	}
	if st != nil {
		mig, mods := st.MigratedCount(), len(st.Modules)
		s.Migrated, s.Modules = &mig, &mods
		if st.Phase != "" && string(st.Phase) != s.Phase {
			s.Note = fmt.Sprintf("its workflow says phase %s (visibility lags a little)", st.Phase)
		}
	} else if err != nil && ctx.Err() != nil {
		s.Note = fmt.Sprintf("no answer before --details-timeout %s ran out", o.budget)
	} else if err != nil {
		s.Note = fmt.Sprintf("no answer within %s", ask)
	}
	if !s.Running {
		s.Agent = "-"
		return
	}
	// The agent is asked with its own bound: a slow query must not turn a
	// plain "no agent" into "?".
	gctx, gcancel := context.WithTimeout(ctx, ask)
	defer gcancel()
	ag := x.queueHealth(gctx, workflows.NodeQueue(s.Node), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	switch {
	case ag.alive():
		s.Agent = "yes"
	case ag.unknown():
		s.Agent = "?"
	default:
		s.Agent = "no"
		if s.Note == "" {
			s.Note = ag.describe("agent", x.zone())
		}
	}
}
