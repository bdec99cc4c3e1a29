// `adopt fleet start|next|retry|pause|resume|status`: every node of a
// fleet adopted in order (or in waves) by the Fleet workflow (fleet migrate
// and flip: fleet_ops.go). next, retry, pause and resume are Updates: the
// fleet's validator refuses (exit 2) what it would turn away or what would
// change nothing, and its answer says what it did.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// fleetCommand is `adopt fleet start|next|retry|pause|resume|status`.
func (x *cli) fleetCommand(ctx context.Context) *cobra.Command {
	var fleetPath string
	var timeout time.Duration
	fc := &cobra.Command{Use: "fleet", Short: "Adopt every node of a fleet in order, the control node first",
		Example: `  adopt fleet start --fleet fleet.yaml
  adopt fleet status --fleet fleet.yaml --json`}
	fc.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "how long the fleet's workflow may take to answer")
	fc.PersistentFlags().StringVar(&fleetPath, "fleet", "fleet.yaml", "fleet file: temporal settings, a name, and the node configuration files in order")
	load := func() (*config.Fleet, error) {
		f, err := config.LoadFleet(fleetPath)
		if err != nil {
			return nil, err
		}
		if err := x.dialWith(&f.Temporal, "temporal.* of "+fleetPath); err != nil {
			return nil, err
		}
		return f, nil
	}
	start := &cobra.Command{
		Use:     "start",
		Short:   "Start the fleet: each node's migration as a child, one after another",
		Example: `  adopt fleet start --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			// Names and roles only: each node's plan is read from its agent
			// when the fleet starts it.
			in := fleet.FleetInput{Name: f.Name, Waves: f.Waves, AskFirst: f.AskAfter}
			for _, c := range f.Configs {
				in.Members = append(in.Members, fleet.FleetMember{Node: c.Node.Name, Role: c.Node.Role})
			}
			if err := fleet.ValidateFleet(in); err != nil {
				return usagef("%v", err)
			}
			if in.Intents, err = x.fleetIntents(authority.ActFleet, f.Configs); err != nil {
				return err
			}
			if err := requestFits("fleet start", len(in.Intents), in); err != nil {
				return err
			}
			for _, m := range in.Members {
				d, err := x.c.DescribeWorkflow(ctx, workflows.WorkflowID(m.Node), "")
				if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					return refused(fmt.Errorf("fleet %s: node %s already has a running workflow (%s): release or terminate it first, or leave the node out of the fleet file", f.Name, m.Node, workflows.WorkflowID(m.Node)), nil)
				}
			}
			run, err := x.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: fleet.FleetID(f.Name), TaskQueue: workflows.TaskQueue,
				WorkflowExecutionErrorWhenAlreadyStarted: true,
				StaticSummary:                            fmt.Sprintf("fleet %s: %s", f.Name, f.NodeNames()),
			}, fleet.FleetWorkflow, in)
			var already *serviceerror.WorkflowExecutionAlreadyStarted
			if errors.As(err, &already) {
				return refused(fmt.Errorf("fleet %s is already running; see `adopt fleet status`", f.Name), nil)
			}
			if err != nil {
				return err
			}
			if x.asJSON {
				return x.writeJSON(x.stdout, map[string]string{"fleet": f.Name, "workflow_id": fleet.FleetID(f.Name), "run_id": run.GetRunID()})
			}
			fmt.Fprintf(x.stdout, "started %s (run %s): nodes %s, the control node first\n", fleet.FleetID(f.Name), run.GetRunID(), f.NodeNames())
			return nil
		},
	}
	next := &cobra.Command{
		Use:   "next",
		Short: "Start the next node now, before the current one has migrated every module",
		Long: `Let the fleet start its next node without waiting for the node before it:
to go on past a node that failed, or before a node has migrated every module.
The fleet refuses (exit 2) when there is no next node, or the next one starts
by itself anyway (a grant then would only start a later node early).

` + exitCodesHelp,
		Example: `  adopt fleet next --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			signed, err := x.fleetIntents(authority.ActFleetNext, f.Configs)
			if err != nil {
				return err
			}
			ans, err := x.askFleet(ctx, f.Name, fleetPath, timeout, fleet.UpdateFleetNext, fleet.FleetRequest{Intents: signed}, "next")
			if err != nil {
				return err
			}
			if x.asJSON {
				return x.writeJSON(x.stdout, map[string]any{"fleet": f.Name, "signalled": fleet.UpdateFleetNext, "node": ans.Node, "passed_over": ans.PassedOver})
			}
			if len(ans.PassedOver) > 0 {
				fmt.Fprintf(x.stdout, "fleet %s: goes on without %s (a retry can still start them)\n", f.Name, strings.Join(ans.PassedOver, ", "))
			}
			if ans.Node != "" {
				fmt.Fprintf(x.stdout, "fleet %s: node %s may start now, without waiting for the node before it (see adopt fleet status)\n", f.Name, ans.Node)
			}
			return nil
		},
	}
	retry := &cobra.Command{
		Use:   "retry NODE",
		Short: "Start a node again whose workflow failed, was terminated or could not start (its plan read afresh)",
		Long: `Start a node of the fleet again whose workflow failed, was terminated or
could not start, with its plan read afresh from its agent. The fleet refuses
(exit 2) a node that is not the fleet's, has not failed (waiting, converged,
released) or whose workflow it knows still runs.

` + exitCodesHelp,
		Example: `  adopt fleet retry n2 --fleet fleet.yaml`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			node := a[0]
			if !config.ValidName(node) {
				return usagef("fleet retry: node name %q is invalid: it must be %s", node, config.NameRule)
			}
			f, err := load()
			if err != nil {
				return err
			}
			var cfgs []*config.Config
			for _, c := range f.Configs {
				if c.Node.Name == node {
					cfgs = append(cfgs, c)
				}
			}
			var signed *intent.Signed
			if len(cfgs) > 0 { // a node not the fleet's is the fleet's to refuse, by name
				if signed, err = x.fleetIntent(authority.ActFleetRetry, cfgs); err != nil {
					return err
				}
			}
			if _, err := x.askFleet(ctx, f.Name, fleetPath, timeout, fleet.UpdateFleetRetry, fleet.FleetRequest{Node: node, Intent: signed}, "retry of node "+node); err != nil {
				return err
			}
			if x.asJSON {
				return x.writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetRetry, "node": node})
			}
			fmt.Fprintf(x.stdout, "fleet %s: retry of node %s asked (see adopt fleet status)\n", f.Name, node)
			return nil
		},
	}
	pause := &cobra.Command{
		Use:   "pause",
		Short: "Start no more nodes until resume (the nodes started go on)",
		Long: `Stop the fleet starting nodes, the rest of a wave included; the nodes
already started go on, and retry still starts a node the operator names.
It changes no node, so it carries no signed intent. The fleet refuses
(exit 2) when it is already paused or every node has started.

` + exitCodesHelp,
		Example: `  adopt fleet pause --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			if _, err := x.askFleet(ctx, f.Name, fleetPath, timeout, fleet.UpdateFleetPause, fleet.FleetRequest{}, "pause"); err != nil {
				return err
			}
			if x.asJSON {
				return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetPause})
			}
			fmt.Fprintf(x.stdout, "fleet %s: paused, no node starts until `adopt fleet resume`; the nodes started go on\n", f.Name)
			return nil
		},
	}
	resume := &cobra.Command{
		Use:   "resume",
		Short: "Let a paused fleet start nodes again",
		Long: `Let a paused fleet go on. Like next, it is signed: the nodes the fleet
starts from now on adopt under this intent. The fleet refuses (exit 2) when
it is not paused.

` + exitCodesHelp,
		Example: `  adopt fleet resume --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			signed, err := x.fleetIntents(authority.ActFleetResume, f.Configs)
			if err != nil {
				return err
			}
			ans, err := x.askFleet(ctx, f.Name, fleetPath, timeout, fleet.UpdateFleetResume, fleet.FleetRequest{Intents: signed}, "resume")
			if err != nil {
				return err
			}
			if x.asJSON {
				return writeJSON(x.stdout, map[string]string{"fleet": f.Name, "signalled": fleet.UpdateFleetResume, "node": ans.Node})
			}
			fmt.Fprintf(x.stdout, "fleet %s: resumed", f.Name)
			if ans.Node != "" {
				fmt.Fprintf(x.stdout, "; node %s starts now", ans.Node)
			}
			fmt.Fprintln(x.stdout)
			return nil
		},
	}
	status := &cobra.Command{
		Use:     "status",
		Short:   "Every node of the fleet with its phase and modules",
		Example: `  adopt fleet status --fleet fleet.yaml`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := load()
			if err != nil {
				return err
			}
			st, err := x.fleetState(ctx, f.Name, fleetPath, timeout)
			if err != nil {
				return err
			}
			if x.asJSON {
				return x.writeJSON(x.stdout, st)
			}
			if st.Frozen != "" {
				fmt.Fprintf(x.stdout, "NOTE: %s\n\n", st.Frozen)
			}
			if st.Held != "" {
				fmt.Fprintf(x.stdout, "HELD: %s\n\n", st.Held)
			}
			if st.Paused != "" {
				fmt.Fprintf(x.stdout, "PAUSED: %s; `adopt fleet resume` lets it go on\n\n", st.Paused)
			}
			for _, op := range st.Following {
				fmt.Fprintf(x.stdout, "%s: %s\n\n", strings.ToUpper(op.What()), op.Standing())
			}
			if st.Op != nil {
				fmt.Fprintf(x.stdout, "%s: %s\n\n", strings.ToUpper(st.Op.What()), st.Op.Standing())
			}
			tw := tabwriter.NewWriter(x.stdout, 0, 4, 2, ' ', 0)
			if st.Waves == nil {
				fmt.Fprintln(tw, "NODE\tROLE\tPHASE\tMODULES MIGRATED")
				for _, n := range st.Nodes {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", n.Node, n.Role, n.Shown(), n.Migrated, n.Modules)
				}
				return tw.Flush()
			}
			fmt.Fprintln(tw, "WAVE\tNODE\tROLE\tPHASE\tMODULES MIGRATED")
			for i, n := range st.Nodes {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\n", st.WaveOf(i), n.Node, n.Role, n.Shown(), n.Migrated, n.Modules)
			}
			return tw.Flush()
		},
	}
	fc.AddCommand(start, next, retry, pause, resume, status)
	fc.AddCommand(x.fleetOpCommands(ctx, load, &fleetPath, &timeout)...)
	return fc
}

// fleetIntent is one intent for the fleet's nodes cfgs (a retry's: one
// node): each with the hash of the plan its configuration derives (the
// one its agent reads), valid for operator.fleet_intent_ttl of the first
// node's file.
func (x *cli) fleetIntent(action string, cfgs []*config.Config) (*intent.Signed, error) {
	ttl := cfgs[0].Operator.FleetIntentTTL
	return x.signIntent(action, cfgs, nil, ttl)
}

// fleetIntents is one intent for each of the fleet's nodes cfgs (signEach),
// as fleetIntent's: what a request the fleet sends on to many nodes
// carries, so that each node is sent its own and nothing more.
func (x *cli) fleetIntents(action string, cfgs []*config.Config) (map[string]*intent.Signed, error) {
	return x.signEach(action, cfgs, nil, cfgs[0].Operator.FleetIntentTTL)
}

// maxRequestBytes bounds a fleet request as the CLI sends it: Temporal
// refuses a payload over 2 MB, and the fleet carries the intents it has
// yet to send across continue-as-new. A request signed for each node
// takes about 0.8 KB a node with an ed25519 key, 2 KB with RSA-3072,
// 2.5 KB with RSA-4096 (docs/access.md).
const maxRequestBytes = 1536 << 10

// requestFits refuses (usage) a fleet request past maxRequestBytes, with
// signed intents for that many nodes, before anything is sent.
func requestFits(what string, signed int, in any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if len(b) <= maxRequestBytes {
		return nil
	}
	return usagef("%s: the request is %d KiB, more than the %d KiB a fleet request may take (Temporal refuses a payload over 2 MB), with an intent signed for each of %d node(s); nothing was sent. An ed25519 key signs in about 0.8 KiB a node (ssh-keygen -t ed25519), RSA in 2 to 2.5 KiB",
		what, len(b)>>10, maxRequestBytes>>10, signed)
}

// fleetState asks the fleet's workflow, bounded by timeout: a query while
// it runs, its result once it has completed.
func (x *cli) fleetState(ctx context.Context, name, path string, timeout time.Duration) (*fleet.FleetState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := x.fleetRun(ctx, name, path)
	if err != nil {
		return nil, err
	}
	if !r.running {
		var st fleet.FleetState
		if err := x.c.GetWorkflow(ctx, fleet.FleetID(name), "").Get(ctx, &st); err != nil {
			return nil, fmt.Errorf("fleet %s ended (%s at %s): %w", name, r.status, stamp(r.closed), err)
		}
		return &st, nil
	}
	return x.queryFleet(ctx, name, timeout)
}

// askFleet sends one of the operator's requests to the running fleet as
// an Update and waits, bounded by timeout, for its answer. A fleet that has
// finished refuses (exit 2, as a converged node does); one that is not
// running is an error. The fleet's validator refuses what it would turn
// away (exit 2); its handler never fails once it has taken the request. A
// request not answered in time is refused if it reaches the fleet later
// (NotAfter), so it never runs.
func (x *cli) askFleet(ctx context.Context, name, path string, timeout time.Duration, update string, in fleet.FleetRequest, what string) (*fleet.FleetAnswer, error) {
	r, err := x.fleetRun(ctx, name, path)
	if err != nil {
		return nil, err
	}
	switch {
	case r.status == "completed":
		return nil, refused(fmt.Errorf("fleet %s has finished (%s): every node has ended and it takes no more requests; `adopt fleet status --fleet %s` shows how each ended, `adopt status NODE` one node", name, stamp(r.closed), path), nil)
	case !r.running:
		return nil, fmt.Errorf("fleet %s is not running (%s at %s); `adopt fleet start --fleet %s` starts it again", name, r.status, stamp(r.closed), path)
	}
	if err := requestFits(what, len(in.Intents), in); err != nil {
		return nil, err
	}
	start := time.Now()
	in.NotAfter = start.Add(timeout - skew).UTC()
	uctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := x.c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		UpdateID:     fmt.Sprintf("%s-%s", update, start.UTC().Format("20060102T150405.000000000")),
		WorkflowID:   fleet.FleetID(name),
		UpdateName:   update,
		Args:         []any{in},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var ans fleet.FleetAnswer
	if err == nil {
		err = h.Get(uctx, &ans)
	}
	var se serviceerror.ServiceError
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return &ans, nil
	case isLate(err) || timedOut(err):
		wq := x.queueHealth(context.WithoutCancel(ctx), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		return nil, fmt.Errorf("fleet %s did not answer %s within %s (%s); it does not run: if it reaches the fleet later it is refused. Ask again once `adopt fleet status --fleet %s` answers", name, what, timeout, wq.describe("worker"), path)
	case errors.As(err, &nf):
		return nil, fmt.Errorf("fleet %s is not running (not started, or finished): `adopt fleet start --fleet %s` starts it", name, path)
	case errors.As(err, &se):
		return nil, fmt.Errorf("fleet %s: %s: %w", name, what, err)
	}
	msg := err.Error()
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	return nil, refused(fmt.Errorf("fleet %s: %s refused by the fleet, nothing was sent to a node: %s", name, what, msg), []string{msg})
}

// fleetRun is the fleet's latest run as the server describes it.
func (x *cli) fleetRun(ctx context.Context, name, path string) (*runInfo, error) {
	d, err := x.c.DescribeWorkflow(ctx, fleet.FleetID(name), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("fleet %s not started: `adopt fleet start --fleet %s` starts it", name, path)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet %s: %w", name, err)
	}
	return runFrom(d.RawResponse.GetWorkflowExecutionInfo()), nil
}

// queryFleet asks the running fleet for its state, page by page (the
// fleet answers a page of nodes at a time: docs/fleet.md); ctx bounds it,
// timeout is named when it does not answer. The op's targets are the
// pages' together; its counts are the fleet's.
func (x *cli) queryFleet(ctx context.Context, name string, timeout time.Duration) (*fleet.FleetState, error) {
	var all *fleet.FleetState
	for {
		from := 0
		if all != nil {
			from = len(all.Nodes)
		}
		v, err := x.c.QueryWorkflow(ctx, fleet.FleetID(name), "", fleet.QueryFleet, fleet.FleetPage{From: from})
		if err != nil {
			if ctx.Err() != nil {
				wq := x.queueHealth(context.WithoutCancel(ctx), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
				return nil, fmt.Errorf("fleet %s did not answer within %s: %s", name, timeout, wq.describe("worker"))
			}
			return nil, fmt.Errorf("fleet %s: %w", name, err)
		}
		var st fleet.FleetState
		if err := v.Get(&st); err != nil {
			return nil, err
		}
		if all == nil {
			all = &st
		} else {
			all.Nodes = append(all.Nodes, st.Nodes...)
			if all.Op != nil && st.Op != nil {
				all.Op.Nodes = append(all.Op.Nodes, st.Op.Nodes...)
			}
			for i, op := range all.Following {
				if i < len(st.Following) {
					op.Nodes = append(op.Nodes, st.Following[i].Nodes...)
				}
			}
		}
		// An older fleet answers every node at once (no total); a page
		// that brings none ends it too.
		if len(all.Nodes) >= st.NodesTotal || len(st.Nodes) == 0 {
			all.NodesFrom, all.NodesTotal = 0, 0
			return all, nil
		}
	}
}
