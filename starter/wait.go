// `adopt wait NODE ...`: block until the node's state says so, for scripts
// and runbooks. Values are checked before anything is asked; a state that
// can no longer lead to the goal (a failed module, a reverted flip, phase
// failed, a run that ended) ends the wait at once, non-zero; every query
// counts inside --timeout.
package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/spf13/cobra"

	"adoption/workflows"
)

var (
	moduleStates  = []string{workflows.ModulePending, workflows.ModuleQueued, workflows.ModuleMigrating, workflows.ModuleMigrated, workflows.ModuleFailed}
	genesisStates = []string{"done", "failed"}
)

// waitGoal is what to wait for.
type waitGoal struct {
	phase, module, state, genesis string
}

// check validates the values against the known phases and states.
func (g waitGoal) check() error {
	var problems []string
	if g.phase == "" && g.module == "" && g.genesis == "" {
		return usagef("say what to wait for: --phase, --module with --state, or --genesis")
	}
	if g.phase != "" && !validPhase(g.phase) {
		problems = append(problems, fmt.Sprintf("--phase %q is not a phase: use one of %s", g.phase, phaseList()))
	}
	if (g.module == "") != (g.state == "") {
		problems = append(problems, "--module and --state go together: --module NAME --state STATE")
	}
	if g.state != "" && !slices.Contains(moduleStates, g.state) {
		problems = append(problems, fmt.Sprintf("--state %q is not a module state: use one of %s", g.state, strings.Join(moduleStates, ", ")))
	}
	if g.genesis != "" && !slices.Contains(genesisStates, g.genesis) {
		problems = append(problems, fmt.Sprintf("--genesis %q is not a genesis outcome: use one of %s", g.genesis, strings.Join(genesisStates, ", ")))
	}
	if len(problems) > 0 {
		return usagef("%s", strings.Join(problems, "; "))
	}
	return nil
}

// waitOpts are `adopt wait`'s flags: the goal and its bound.
type waitOpts struct {
	goal    waitGoal
	timeout time.Duration
}

func (x *cli) waitCommand(ctx context.Context) *cobra.Command {
	o := &waitOpts{}
	c := &cobra.Command{
		Use:   "wait NODE",
		Short: "Wait until a node reaches a phase, a module a state, or genesis an outcome",
		Long: `Wait until every condition given holds. It ends at once, non-zero, when it
can no longer hold: a module failed, a flip was reverted, the phase is
failed, or the workflow ended. Phases: ` + phaseList() + `; module states: ` + strings.Join(moduleStates, ", ") + `.

` + exitCodesHelp,
		Example: `  adopt wait n1 --phase adopted --timeout 2m
  adopt wait n1 --module mail --state migrated
  adopt wait n1 --genesis done`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, a []string) error { return x.runWait(ctx, o, a[0]) },
	}
	g := &o.goal
	c.Flags().StringVar(&g.phase, "phase", "", "wait for this phase ("+phaseList()+")")
	c.Flags().StringVar(&g.module, "module", "", "the module whose state to wait for (with --state)")
	c.Flags().StringVar(&g.state, "state", "", "the module state to wait for ("+strings.Join(moduleStates, ", ")+")")
	c.Flags().StringVar(&g.genesis, "genesis", "", "wait for genesis to be done or failed")
	c.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long, every query included")
	return c
}

// runWait is `adopt wait NODE`: the goal checked before anything is asked.
func (x *cli) runWait(ctx context.Context, o *waitOpts, node string) error {
	if err := o.goal.check(); err != nil {
		return err
	}
	return x.wait(ctx, node, o.goal, o.timeout)
}

// waitResult is what `adopt wait --json` prints when the goal is met.
type waitResult struct {
	Node string `json:"node"`
	Now  string `json:"now"`
}

// wait waits for g and prints the outcome on stdout.
func (x *cli) wait(ctx context.Context, node string, g waitGoal, timeout time.Duration) error {
	res, err := x.waitQuiet(ctx, node, g, timeout)
	if err != nil {
		return err
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, res)
	}
	fmt.Fprintf(x.stdout, "node %s: %s\n", node, res.Now)
	return nil
}

// waitQuiet waits for g, its progress on stderr as it changes (text
// output only), and returns what it saw when g was met.
func (x *cli) waitQuiet(ctx context.Context, node string, g waitGoal, timeout time.Duration) (waitResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := x.dial(); err != nil {
		return waitResult{}, err
	}
	last, shown := "nothing yet", ""
	checkedModule := false
	// Each look asks the workflow and the task queues: after the first
	// ones it backs off while nothing changes, doubling up to
	// waitMaxEvery, and comes back to waitFirstEvery as soon as something
	// does (cenkalti/backoff, without jitter: one CLI waits alone).
	looks := &backoff.ExponentialBackOff{InitialInterval: waitFirstEvery, Multiplier: 2, MaxInterval: waitMaxEvery}
	for {
		ns, err := x.nodeStatus(ctx, node)
		switch {
		case err == nil && ns.StateFrom == "visibility" && (g.module != "" || g.genesis != ""):
			last = fmt.Sprintf("phase %s; %s", ns.Phase, orUnknown(ns.Stuck))
		case err == nil:
			if g.module != "" && !checkedModule && ns.StateFrom != "visibility" {
				if ns.module(g.module) == nil {
					return waitResult{}, usagef("node %s has no module %q (modules: %s)", node, g.module, strings.Join(ns.moduleNames(), ", "))
				}
				checkedModule = true
			}
			ok, now, why := waitMet(&ns.State, g, ns.Run.Status == "running")
			if ok {
				return waitResult{Node: node, Now: now}, nil
			}
			if why != "" {
				return waitResult{}, fmt.Errorf("node %s: %s; it cannot reach what was waited for (%s). Next: %s", node, why, now, ns.Next)
			}
			last = now
			if ns.Stuck != "" {
				last += "; " + ns.Stuck
			}
		case ctx.Err() == nil:
			last = err.Error()
		}
		if last != shown {
			// Progress, as it changes, on stderr: stdout keeps the result.
			if !x.asJSON {
				fmt.Fprintf(x.stderr, "%s node %s: %s\n", x.zone().clock(time.Now()), node, last)
			}
			shown = last
			looks.Reset()
		}
		every := looks.NextBackOff()
		select {
		case <-ctx.Done():
			if parentDone := errors.Is(context.Cause(ctx), context.Canceled); parentDone {
				return waitResult{}, fmt.Errorf("node %s: interrupted; last seen: %s", node, last)
			}
			return waitResult{}, fmt.Errorf("node %s: timed out after %s; last seen: %s", node, timeout, last)
		case <-time.After(every):
		}
	}
}

// How often `adopt wait` looks: first, and at most apart while nothing
// changes.
const (
	waitFirstEvery = 500 * time.Millisecond
	waitMaxEvery   = 5 * time.Second
)

// waitMet says whether the state meets every condition, describes it, and
// says why it never will (empty while it still may).
func waitMet(st *workflows.State, g waitGoal, running bool) (ok bool, now, never string) {
	now = "phase " + string(st.Phase)
	ok = g.phase == "" || string(st.Phase) == g.phase
	var ms *workflows.ModuleState
	if g.module != "" {
		state := "absent"
		if ms = stModule(st, g.module); ms != nil {
			state = ms.State
		}
		now += ", module " + g.module + " " + state
		ok = ok && state == g.state
	}
	if g.genesis != "" {
		now += ", genesis " + orNone(st.Genesis.State)
		ok = ok && st.Genesis.State == g.genesis
	}
	if ok {
		return true, now, ""
	}
	switch {
	case st.Phase == workflows.PhaseFailed && g.phase != string(workflows.PhaseFailed):
		never = "phase failed: " + st.LastError
	case ms != nil && ms.State == workflows.ModuleFailed && g.state != workflows.ModuleFailed:
		never = fmt.Sprintf("module %s failed: %s", ms.Name, ms.LastError)
	case g.genesis == "done" && st.Genesis.State == "failed":
		never = "genesis failed: " + st.Genesis.Error
	case g.phase == string(workflows.PhaseConverged) && failedModule(st) != nil:
		m := failedModule(st)
		never = fmt.Sprintf("module %s failed: %s", m.Name, m.LastError)
	case (g.phase == string(workflows.PhaseConverged) || g.phase == string(workflows.PhaseFlipping)) &&
		st.Phase == workflows.PhaseAdopted && st.Flip != nil && !flipQueued(st) &&
		(st.Flip.State == workflows.FlipStateReverted || st.Flip.State == workflows.FlipStateNotApplied):
		never = fmt.Sprintf("flip %s was %s: %s", st.Flip.ID, st.Flip.State, st.Flip.Error)
	case !running:
		never = "the workflow has ended"
	}
	return false, now, never
}

func stModule(st *workflows.State, name string) *workflows.ModuleState {
	for i := range st.Modules {
		if st.Modules[i].Name == name {
			return &st.Modules[i]
		}
	}
	return nil
}

func failedModule(st *workflows.State) *workflows.ModuleState {
	for i := range st.Modules {
		if st.Modules[i].State == workflows.ModuleFailed {
			return &st.Modules[i]
		}
	}
	return nil
}

func flipQueued(st *workflows.State) bool {
	for _, r := range st.Queue {
		if r.Kind == workflows.SignalFlip {
			return true
		}
	}
	return false
}

func (ns *nodeStatus) module(name string) *workflows.ModuleState { return stModule(&ns.State, name) }

func (ns *nodeStatus) moduleNames() []string {
	var out []string
	for _, m := range ns.Modules {
		out = append(out, m.Name)
	}
	return out
}
