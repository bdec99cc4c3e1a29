// Migrate phase: a module's cutover, one activity per step, with an
// automatic rollback on failure, and the prune of kept predecessors.

package workflows

import (
	"errors"
	"fmt"
	"strings"

	"adoption/activities/nodewire"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// migrate cuts a module over, one step per activity so the Web UI shows
// each ("cutover mail: swap containers"): preflight (nothing changes if it
// refuses), open its ports through the found firewall, create its container
// beside the predecessor, swap (its files converge inside the swap, between
// the predecessor's stop and the new container's start; a module with no
// container converges them as a step of their own), wait healthy. A failure
// after preflight rolls everything back: the predecessor serves again, the
// files are as found, the module's marked rules are gone. The module is
// then failed, and `adopt retry` runs the whole cutover again.
func (n *node) migrate(ctx workflow.Context, module string) {
	m := n.s.module(module)
	mp, ok := n.s.Plan.Module(module)
	if m == nil || !ok { // validated on arrival; the plan may have changed since
		n.event(ctx, "skipped "+module+": no longer in the plan")
		return
	}
	// A module is migrated once: a second cutover fails its preflight
	// (already migrated, not retryable) and would leave it failed for good.
	// Only a migrate queued twice (before validate saw new modules queued)
	// gets here.
	if m.State == ModuleMigrated {
		n.event(ctx, "skipped migrate "+module+": it is already migrated (requested twice)")
		return
	}
	m.State, m.LastError = ModuleMigrating, ""
	m.Attempts++
	n.setPhase(ctx, PhaseMigrating)
	in := nodewire.ModuleInput{Plan: n.s.Plan.Ref(), Module: module, Decisions: n.decisionsFor(module), Intent: n.intent}
	// The module's state is looked up afresh after every wait: a plan
	// applied meanwhile rebuilds n.s.Modules, so a pointer taken before
	// would write into the old slice. The plan could also drop the module
	// (a preview's plan did, before validatePreview refused that; such a
	// history replays here): the cutover then stops at its next step and
	// rolls back, so the node matches a plan without it, instead of a nil
	// dereference failing every replay.
	gone := fmt.Errorf("module %s left node %s's plan during its cutover", module, n.s.Node)
	at := func(stepName string) *ModuleState {
		m := n.s.module(module)
		if m != nil {
			m.Step = stepName
		}
		n.publish(ctx)
		return m
	}
	step := func(name string, fn, arg any) error {
		if at(name) == nil {
			return gone
		}
		var res nodewire.CutoverResult
		err := n.exec(ctx, fmt.Sprintf("cutover %s: %s (%s)", module, name, cutoverSteps[name]), fn, arg, &res)
		if m := n.s.module(module); err == nil && res.Carried != nil && m != nil {
			m.Carried = res.Carried
		}
		if m := n.s.module(module); err == nil && res.Hold != nil && m != nil {
			m.Hold = res.Hold
		}
		return err
	}
	fail := func(stepName string, err error, rollback bool) {
		msg := fmt.Sprintf("step %q failed: %s", stepName, errorMessage(err))
		if err == gone {
			msg = fmt.Sprintf("%s (before step %q)", errorMessage(err), stepName)
		}
		if rollback {
			said, confirmed := n.rollback(ctx, module, in)
			msg += "; " + said
			if mm := n.s.module(module); confirmed && mm != nil {
				// The node confirmed the cutover (its last check passed,
				// the answer was lost) and refuses to undo it: migrated.
				mm.State, mm.Step, mm.LastError = ModuleMigrated, "done", ""
				n.event(ctx, "cutover "+module+": migrated (the node had confirmed it: "+msg+")")
				n.setPhase(ctx, PhaseAdopted)
				return
			}
		}
		if mm := n.s.module(module); mm != nil {
			mm.State, mm.LastError = ModuleFailed, msg
			n.event(ctx, fmt.Sprintf("cutover %s failed: %s; fix it and run: adopt retry %s %s", module, msg, n.s.Node, module))
		} else {
			n.event(ctx, fmt.Sprintf("cutover %s stopped: %s", module, msg))
		}
		n.setPhase(ctx, PhaseAdopted)
	}

	at("preflight")
	var pre nodewire.CutoverResult
	if err := n.exec(ctx, fmt.Sprintf("cutover %s: preflight (%s)", module, cutoverSteps["preflight"]), a.CutoverPreflight, in, &pre); err != nil {
		if m := n.s.module(module); m != nil {
			recordConflicts(m, err)
		}
		fail("preflight", err, false) // refused before anything changed
		return
	}
	if n.s.module(module) == nil {
		fail("open ports", gone, false) // nothing changed yet either
		return
	}
	n.s.module(module).Conflicts = nil // every file merges cleanly now
	at("open ports")
	if err := n.openRules(ctx, module, mp.Ports, publishedPorts(mp)...); err != nil {
		fail("open ports", err, true)
		return
	}
	type stepDef struct {
		name string
		fn   any
		arg  any
		when bool
	}
	for _, st := range []stepDef{
		{"create container", a.CutoverCreate, nodewire.CutoverInput{Plan: n.s.Plan.Ref(), Module: module, Predecessor: pre.Predecessor, Intent: n.intent, Decisions: in.Decisions}, mp.Container != nil},
		{"converge files", a.ConvergeFiles, in, len(mp.Files) > 0 && mp.Container == nil},
		{"swap containers", a.CutoverSwap, in, mp.Container != nil},
		{"wait healthy", a.CutoverWaitHealthy, in, mp.Container != nil || mp.Health != nil},
	} {
		if !st.when {
			continue
		}
		if err := step(st.name, st.fn, st.arg); err != nil {
			fail(st.name, err, true)
			return
		}
	}
	mm := n.s.module(module)
	if mm == nil {
		fail("done", gone, true)
		return
	}
	mm.State, mm.Step = ModuleMigrated, "done"
	n.event(ctx, "cutover "+module+": migrated")
	n.setPhase(ctx, PhaseAdopted)
}

// cutoverSteps say what each step of a cutover does to the node, for the
// activity's summary on the workflow page. Summaries are no part of the
// command sequence: changing them needs no version.
var cutoverSteps = map[string]string{
	"preflight":        "checks that the module can cut over; changes nothing",
	"create container": "creates the module's container beside the predecessor, not started",
	"converge files":   "writes the module's declared files, keeping the node's own changes decided",
	"swap containers":  "stops the predecessor and starts the new container, holding its ports meanwhile",
	"wait healthy":     "waits until the new container answers its health check",
	"roll back":        "the predecessor serves again, its files as found",
}

// rollback undoes a cutover that failed after preflight and says how it
// went; confirmed is true when the node refused because it had confirmed
// the cutover (it is migrated there, and stays so).
func (n *node) rollback(ctx workflow.Context, module string, in nodewire.ModuleInput) (said string, confirmed bool) {
	if m := n.s.module(module); m != nil { // nil: it left the plan (migrate)
		m.Step = "rollback"
	}
	n.publish(ctx)
	var res nodewire.CutoverResult
	if err := n.exec(ctx, fmt.Sprintf("cutover %s: roll back (%s)", module, cutoverSteps["roll back"]), a.CutoverRollback, in, &res); err != nil {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == nodewire.ErrCutoverConfirmed {
			return "not rolled back: " + errorMessage(err), true
		}
		return "ROLLBACK FAILED: " + errorMessage(err) + " (the node may be half cut over; retry or inspect it)", false
	}
	if m := n.s.module(module); m != nil && res.Hold != nil {
		m.Hold = res.Hold
	}
	if err := n.closeRules(ctx, module); err != nil {
		return "rolled back, but closing its marked rules failed: " + errorMessage(err), false
	}
	return "rolled back: the predecessor serves again, its files are as found, its marked rules are gone", false
}

// closeRules removes an owner's marked rules and forgets them.
func (n *node) closeRules(ctx workflow.Context, owner string) error {
	var res nodewire.RulesResult
	if err := n.exec(ctx, fmt.Sprintf("close %s's marked rules", owner), a.CloseRules, nodewire.RulesInput{Plan: n.s.Plan.Ref(), Owner: owner, Intent: n.intent}, &res); err != nil {
		return err
	}
	delete(n.s.Opened, owner)
	delete(n.s.OpenedForward, owner)
	n.s.Marks = withoutOwner(n.s.Marks, owner)
	return nil
}

// prune removes the predecessor containers kept for rollback.
func (n *node) prune(ctx workflow.Context) {
	var mods []string
	for _, m := range n.s.Modules {
		if m.State == ModuleMigrated {
			mods = append(mods, m.Name)
		}
	}
	var res nodewire.CutoverResult
	if err := n.exec(ctx, "prune the kept predecessor containers", a.Prune, nodewire.PruneInput{Plan: n.s.Plan.Ref(), Modules: mods, Intent: n.intent}, &res); err != nil {
		n.s.LastError = "prune: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	n.event(ctx, fmt.Sprintf("pruned %d predecessor container(s): %s", len(res.Files), strings.Join(res.Files, ", ")))
}
