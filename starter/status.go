// `adopt status NODE`: one node's state, and at once why it is stuck: no
// worker or agent polling its queues (since when), the step it waits on
// with its attempt count and last failure. What the server knows needs no
// worker, so it is shown even when the workflow cannot answer.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/converter"

	"adoption/codec"
	"adoption/config"
	"adoption/workflows"
)

// statusOpts are `adopt status`'s flags: the overview's, and --watch.
type statusOpts struct {
	overview overviewOpts
	watch    bool
	every    time.Duration // --watch-every
}

func (x *cli) statusCommand(ctx context.Context) *cobra.Command {
	o := &statusOpts{}
	c := &cobra.Command{
		Use:   "status [NODE]",
		Short: "Show a node's state, or every running node's phase",
		Long: `With NODE: the node's whole state, whether a worker and the node's agent poll
their task queues, the step the workflow waits on (attempts, last failure),
and NEXT, the step to take.

Without NODE: every running node workflow from visibility alone (the node
from AdoptionNode, the phase from AdoptionPhase); no node is asked, so it
answers at once for a thousand nodes. ` + "`adopt status NODE`" + ` shows one node
in full; --details asks every node for its modules and its agent, at most
16 at a time, each within --ask-timeout and all within --details-timeout,
"?" where a node could not be asked in time. --attention lists what needs
a person instead: every running workflow whose AdoptionAttention is set
(the Web UI's AdoptionAttention != ""), with why.

` + exitCodesHelp,
		Example: `  adopt status n1
  adopt status n1 --json
  adopt status --phase adopted
  adopt status --attention
  adopt status --watch
  adopt status --fleet fleet.yaml --details`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error { return x.runStatus(ctx, o, a) },
	}
	c.Flags().BoolVarP(&o.watch, "watch", "w", false, "show it again every --watch-every until interrupted (each time stamped in UTC on stderr)")
	c.Flags().DurationVar(&o.every, "watch-every", 5*time.Second, "with --watch: how often")
	ov := &o.overview
	c.Flags().StringVar(&ov.phase, "phase", "", "overview: only nodes in this phase ("+phaseList()+")")
	c.Flags().StringVar(&ov.fleet, "fleet", "", "overview: only the nodes of this fleet file")
	c.Flags().BoolVar(&ov.attention, "attention", false, "overview: only what needs a person (AdoptionAttention set: a failed cutover, refused preview, drift, a held wave, ...), with why")
	c.Flags().BoolVar(&ov.all, "all", false, "overview: closed runs too (converged, released, terminated)")
	c.Flags().BoolVar(&ov.details, "details", false, "overview: ask each node for its modules and its agent (one query and one task-queue call per node)")
	c.Flags().DurationVar(&ov.ask, "ask-timeout", 3*time.Second, "overview --details: how long each node's workflow may take to answer")
	c.Flags().DurationVar(&ov.budget, "details-timeout", 30*time.Second, "overview --details: how long asking every node may take; nodes not asked by then show ?")
	return c
}

// runStatus is `adopt status [NODE]`: one node, or the overview without
// NODE; with --watch, again and again.
func (x *cli) runStatus(ctx context.Context, o *statusOpts, a []string) error {
	ov := o.overview
	if len(a) > 0 && (ov.phase != "" || ov.fleet != "" || ov.details || ov.attention) {
		return usagef("--phase, --fleet, --details and --attention are the overview's: give no NODE with them")
	}
	once := func() error {
		if len(a) == 0 {
			return x.overview(ctx, ov)
		}
		return x.status(ctx, a[0])
	}
	if !o.watch {
		return once()
	}
	if o.every < time.Second {
		return usagef("--watch-every %s: at least 1s", o.every)
	}
	return x.watch(ctx, o.every, once)
}

// nodeStatus is `adopt status NODE --json`: the workflow's state (its
// fields at the top level, as before) plus what the server says.
type nodeStatus struct {
	workflows.State
	Run struct {
		Status  string    `json:"status"`
		Started time.Time `json:"started,omitzero"`
		Closed  time.Time `json:"closed,omitzero"`
	} `json:"run"`
	// StateFrom says where the state comes from: "query" (the running
	// workflow), "result" (a completed run), or "visibility" (the phase
	// only: no worker answered).
	StateFrom string            `json:"state_from"`
	Agents    *agents           `json:"agents,omitempty"`
	Pending   []pendingActivity `json:"pending_activities,omitempty"`
	Stuck     string            `json:"stuck,omitempty"` // why nothing moves, when something is missing
	Next      string            `json:"next"`
	Link      string            `json:"link"`
	// Payloads says whether this CLI encrypts and decodes payloads.
	Payloads string `json:"payloads"`
}

// watch runs show every interval until ctx ends (Ctrl-C ends it with
// success); an error of one round is shown and the watch goes on.
func (x *cli) watch(ctx context.Context, every time.Duration, show func() error) error {
	for {
		fmt.Fprintf(x.stderr, "--- %s\n", x.zone().stamp(time.Now()))
		if err := show(); err != nil {
			fmt.Fprintln(x.stderr, "adopt:", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func (x *cli) status(ctx context.Context, node string) error {
	ns, err := x.nodeStatus(ctx, node)
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, ns)
	}
	printStatus(x.stdout, ns, termWidth(), x.zone())
	return nil
}

func (x *cli) nodeStatus(ctx context.Context, node string) (*nodeStatus, error) {
	if err := x.dial(); err != nil {
		return nil, err
	}
	last, err := x.lastRun(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	if last == nil {
		return nil, fmt.Errorf("node %s has no migration workflow; start it with `adopt start %s` and the node's configuration (--config)", node, node)
	}
	ns := &nodeStatus{Link: x.link(node), Pending: last.pending, Payloads: x.target.payloads()}
	if last.sealed {
		ns.Payloads = sealedPayloads
	}
	ns.Run.Status, ns.Run.Started, ns.Run.Closed = last.status, last.started, last.closed
	if !last.running {
		if last.result != nil {
			ns.State, ns.StateFrom = *last.result, "result"
		} else {
			ns.State, ns.StateFrom = workflows.State{Node: node, Phase: last.phase}, "visibility"
		}
		ns.Next = workflows.NextStep(&ns.State)
		if last.result == nil {
			ns.Next = fmt.Sprintf("the workflow is %s; `adopt start %s --config <node %s's configuration>` starts it again", last.status, node, node)
		}
		return ns, nil
	}
	ag := x.agents(ctx, node)
	ns.Agents = &ag
	ns.State, ns.StateFrom = workflows.State{Node: node, Phase: last.phase}, "visibility"
	if ag.Workflow.alive() || ag.Workflow.unknown() {
		st, err := x.query(ctx, node, 5*time.Second)
		switch {
		case err == nil:
			ns.State, ns.StateFrom = *st, "query"
		case encryptedWithoutKey(err):
			ns.Payloads = sealedPayloads
		}
	}
	ns.Stuck, ns.Next = diagnose(node, ns.State, ag, last.pending, ns.StateFrom == "query", x.zone())
	return ns, nil
}

// sealedPayloads is what status says when the workflow's payloads are
// encrypted with a codec key this CLI does not hold.
var sealedPayloads = fmt.Sprintf("the workflow's payloads are encrypted and this CLI holds no codec key: set %s to the key the workers use", config.CodecKeyFileKey)

// encryptedWithoutKey reports whether err is the SDK's refusal to decode an
// encrypted payload (no codec in this client).
func encryptedWithoutKey(err error) bool {
	return errors.Is(err, converter.ErrEncodingIsNotSupported) && strings.Contains(err.Error(), codec.Encoding)
}

// query asks the running workflow for its state, bounded.
func (x *cli) query(ctx context.Context, node string, timeout time.Duration) (*workflows.State, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := x.c.QueryWorkflow(qctx, workflows.WorkflowID(node), "", workflows.QueryStatus)
	if err != nil {
		return nil, err
	}
	var st workflows.State
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// diagnose says why a running node does not move, if something is
// missing, and the next step that follows from it; times written in z.
func diagnose(node string, st workflows.State, ag agents, pending []pendingActivity, answered bool, z zone) (stuck, next string) {
	switch {
	case !ag.Workflow.alive() && !ag.Workflow.unknown():
		stuck = ag.Workflow.describe("worker", z) + ": the workflow cannot move or answer"
		return stuck, "start the orchestrator (adopt-worker) that serves task queue " + workflows.TaskQueue
	case !ag.Node.alive() && !ag.Node.unknown() && (len(pending) > 0 || st.Phase == workflows.PhaseProbing):
		stuck = ag.Node.describe("agent", z)
		if len(pending) > 0 {
			stuck += fmt.Sprintf("; step %s waits for it", pending[0].Type)
		}
		return stuck, fmt.Sprintf("start node %s's agent: `adopt-worker run --config <node %s's configuration>` on the node", node, node)
	case !answered:
		return "the workflow did not answer within 5s", workflows.NextStep(&st)
	}
	if len(pending) > 0 && pending[0].LastFailure != "" && pending[0].Attempt > 1 {
		return "", fmt.Sprintf("wait: step %s is being retried (attempt %d): %s", pending[0].Type, pending[0].Attempt, pending[0].LastFailure)
	}
	return "", workflows.NextStep(&st)
}
