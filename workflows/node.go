// Package workflows holds the durable state machines: one NodeMigration per
// node. No I/O happens here; everything that touches a node is an activity
// on that node's own task queue.
package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
)

// Search attributes, registered on the server (see Makefile dev-server), so
// the Web UI can filter nodes by phase.
var (
	AttrNode  = temporal.NewSearchAttributeKeyKeyword("AdoptionNode")
	AttrPhase = temporal.NewSearchAttributeKeyKeyword("AdoptionPhase")
)

// The workflow calls activities through a nil pointer: only the method
// values matter, and tests mock the same ones.
var a *activities.Activities

// node is the entity behind one NodeMigration execution.
type node struct {
	s    State
	told NodeProgress // last progress signalled to the fleet
	// When the periodic jobs are next due (not carried across
	// continue-as-new: a new run starts its timers afresh).
	nextReconcile, nextDrift time.Time
	driftOn                  bool
}

// NodeMigration holds a node's adoption for as long as it lasts: probe and
// adopt, then serve queued requests (migrate, retry, flip, release) one at a
// time until the node converges or is released.
func NodeMigration(ctx workflow.Context, in Input) (*State, error) {
	n := &node{}
	if in.Resume != nil {
		n.s = *in.Resume
		n.s.Plan = in.Plan
	} else {
		n.s = State{Node: in.Plan.Node, Plan: in.Plan}
		for _, m := range in.Plan.Modules {
			n.s.Modules = append(n.s.Modules, ModuleState{Name: m.Name, State: ModulePending})
		}
	}
	if err := n.register(ctx); err != nil {
		return nil, err
	}
	return n.run(ctx)
}

func (n *node) run(ctx workflow.Context) (*State, error) {
	if n.s.Phase == "" || n.s.Phase == PhaseProbing || n.s.Phase == PhaseFailed {
		if done, err := n.adoptUntilDone(ctx); done || err != nil {
			return &n.s, err
		}
	}
	n.publish(ctx)
	now := workflow.Now(ctx)
	n.nextReconcile, n.nextDrift = now.Add(n.s.Plan.ReconcileInterval), now.Add(n.s.Plan.DriftInterval)
	// Runs started before drift checks existed must replay without their
	// timer: they keep drift off.
	n.driftOn = workflow.GetVersion(ctx, "drift-checks", workflow.DefaultVersion, 1) >= 1
	for {
		ready := func() bool {
			return len(n.s.Queue) > 0 || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		}
		// While adopted, two jobs run on timers between requests: marked
		// rules are reasserted (the found firewall's boot-time service may
		// reload it without them), and drift is looked for.
		if wait := n.untilPeriodic(ctx); wait > 0 {
			ok, err := workflow.AwaitWithTimeout(ctx, wait, ready)
			if err != nil {
				return &n.s, err
			}
			if !ok {
				n.periodic(ctx)
				continue
			}
		} else if err := workflow.Await(ctx, ready); err != nil {
			return &n.s, err
		}
		// Between steps is the one safe moment to continue as new: the
		// queue travels in the carried state, so no request is lost.
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return n.continueAsNew(ctx)
		}
		req := n.s.Queue[0]
		n.s.Queue = n.s.Queue[1:]
		if req.Plan != nil {
			n.applyPlan(ctx, *req.Plan)
		}
		switch {
		case req.Kind == SignalRetry && req.Module == "":
			if n.s.Genesis.State == "failed" {
				n.genesis(ctx)
			} else {
				n.event(ctx, "retry: neither the adoption nor the genesis has failed; nothing to retry (name a failed module to retry its cutover)")
			}
		case req.Kind == SignalMigrate, req.Kind == SignalRetry:
			n.migrate(ctx, req.Module)
		case req.Kind == SignalFlip:
			n.flip(ctx)
		case req.Kind == SignalPrune:
			n.prune(ctx)
		case req.Kind == SignalDriftAccept:
			n.acceptDrift(ctx)
		case req.Kind == SignalRelease:
			if n.release(ctx) {
				return &n.s, nil
			}
		}
		if n.s.Phase == PhaseConverged {
			return &n.s, nil
		}
		n.publish(ctx)
	}
}

// applyPlan takes an updated plan sent with a request: new modules are
// added as pending; a module dropped from the plan is forgotten unless it
// already migrated (what it did on the node is still there).
func (n *node) applyPlan(ctx workflow.Context, p config.Plan) {
	n.s.Plan = p
	var mods []ModuleState
	for _, m := range p.Modules {
		if cur := n.s.module(m.Name); cur != nil {
			mods = append(mods, *cur)
		} else {
			mods = append(mods, ModuleState{Name: m.Name, State: ModulePending})
		}
	}
	for _, m := range n.s.Modules {
		if _, ok := p.Module(m.Name); !ok && m.State == ModuleMigrated {
			mods = append(mods, m)
		}
	}
	n.s.Modules = mods
	n.event(ctx, "plan updated")
}

// adoptUntilDone probes and adopts the node. A refusal (a control daemon
// still running, an unsupported firewall) leaves the node in phase failed,
// unchanged, until the operator fixes the cause and asks to retry, or
// releases. It returns done=true when the workflow should end.
func (n *node) adoptUntilDone(ctx workflow.Context) (bool, error) {
	for {
		n.setPhase(ctx, PhaseProbing)
		err := n.adopt(ctx)
		if err == nil {
			n.s.LastError = ""
			n.setPhase(ctx, PhaseAdopted)
			n.genesis(ctx)
			return false, nil
		}
		n.s.LastError = "adoption: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		n.setPhase(ctx, PhaseFailed)
		// Only a retry of the adoption or a release ends the wait; other
		// requests (a module's migrate) stay queued for after adoption.
		if err := workflow.Await(ctx, func() bool { return n.adoptionRequest() >= 0 }); err != nil {
			return true, err
		}
		i := n.adoptionRequest()
		req := n.s.Queue[i]
		n.s.Queue = append(n.s.Queue[:i:i], n.s.Queue[i+1:]...)
		if req.Kind == SignalRelease {
			n.setPhase(ctx, PhaseReleased)
			n.event(ctx, "released before adoption completed: nothing had been changed on the node")
			return true, nil
		}
		n.event(ctx, "retrying adoption")
	}
}

// adoptionRequest is the index of the first queued request that ends a
// failed adoption (a retry without module, or a release), or -1.
func (n *node) adoptionRequest() int {
	for i, r := range n.s.Queue {
		if r.Kind == SignalRelease || (r.Kind == SignalRetry && r.Module == "") {
			return i
		}
	}
	return -1
}

func (n *node) adopt(ctx workflow.Context) error {
	var probe activities.ProbeReport
	if err := n.exec(ctx, "probe the node (read-only)", a.Probe, activities.ProbeInput{Plan: n.s.Plan}, &probe); err != nil {
		return err
	}
	n.s.Probe = &probe
	n.event(ctx, fmt.Sprintf("probed: firewall %s, %d listeners, %d containers, %d declared files",
		probe.Firewall.Kind, len(probe.Sockets), len(probe.Containers.Containers), len(probe.Files)))
	if probe.Firewall.Unsupported != "" {
		return errors.New(probe.Firewall.Unsupported)
	}
	var res activities.AdoptResult
	in := activities.AdoptInput{Plan: n.s.Plan, WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if err := n.exec(ctx, "adopt: take custody of found files, keep the found firewall", a.Adopt, in, &res); err != nil {
		return err
	}
	n.s.Custody = res.Custody
	n.s.FirewallKind = res.Firewall
	n.s.FirewallFingerprint = res.FirewallFingerprint
	n.event(ctx, fmt.Sprintf("adopted: %d file(s) in custody, found firewall (%s) kept in force", len(res.Custody), res.Firewall))
	return nil
}

// genesis raises the foundation on the control node: every foundation port
// checked free first (all collisions at once, nothing opened if one
// collides), then opened through the found firewall as marked rules.
func (n *node) genesis(ctx workflow.Context) {
	if n.s.Plan.Role != "control" || n.s.Genesis.State == "done" {
		return
	}
	fail := func(err error) {
		n.s.Genesis = StepState{State: "failed", Error: errorMessage(err)}
		n.event(ctx, "genesis failed: "+errorMessage(err)+fmt.Sprintf("; fix it, then: adopt retry %s", n.s.Node))
	}
	var chk activities.CheckPortsResult
	if err := n.exec(ctx, "genesis: check the foundation's ports are free", a.CheckFoundationPorts, activities.ProbeInput{Plan: n.s.Plan}, &chk); err != nil {
		fail(err)
		return
	}
	ports := make([]config.Port, 0, len(n.s.Plan.Foundation))
	for _, fp := range n.s.Plan.Foundation {
		ports = append(ports, fp.Port)
	}
	if err := n.openRules(ctx, activities.OwnerFoundation, ports); err != nil {
		fail(err)
		return
	}
	n.s.Genesis = StepState{State: "done"}
	n.event(ctx, fmt.Sprintf("genesis: %d foundation port(s) free and opened through the found firewall", len(ports)))
}

// openRules opens an owner's ports as marked rules and records them as
// expected, so reconcile reasserts them.
// forward are host ports the owner's container publishes: opened on the
// forward path too.
func (n *node) openRules(ctx workflow.Context, owner string, ports []config.Port, forward ...config.Port) error {
	if len(ports) == 0 && len(forward) == 0 {
		return nil
	}
	var res activities.RulesResult
	in := activities.RulesInput{Plan: n.s.Plan, Owner: owner, Ports: ports, Forward: forward}
	if err := n.exec(ctx, fmt.Sprintf("open %s's ports %s through the found firewall", owner, portList(ports)), a.OpenRules, in, &res); err != nil {
		return err
	}
	if n.s.Opened == nil {
		n.s.Opened = map[string][]config.Port{}
	}
	n.s.Opened[owner] = ports
	n.s.Marks = mergeMarks(withoutOwner(n.s.Marks, owner), append(res.Added, res.Present...))
	return nil
}

func (n *node) reconcileDue() bool {
	return n.s.Plan.ReconcileInterval > 0 && len(n.s.Opened) > 0
}

func (n *node) driftDue() bool {
	return n.driftOn && n.s.Plan.DriftInterval > 0 && n.s.Phase == PhaseAdopted
}

// untilPeriodic is how long until the next periodic job, or 0 for none.
func (n *node) untilPeriodic(ctx workflow.Context) time.Duration {
	now := workflow.Now(ctx)
	var wait time.Duration
	for _, due := range []struct {
		on   bool
		next time.Time
	}{{n.reconcileDue(), n.nextReconcile}, {n.driftDue(), n.nextDrift}} {
		if !due.on {
			continue
		}
		d := max(due.next.Sub(now), time.Millisecond)
		if wait == 0 || d < wait {
			wait = d
		}
	}
	return wait
}

// periodic runs whichever periodic job is due.
func (n *node) periodic(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if n.reconcileDue() && !now.Before(n.nextReconcile) {
		n.reconcile(ctx)
		n.nextReconcile = workflow.Now(ctx).Add(n.s.Plan.ReconcileInterval)
	}
	if n.driftDue() && !now.Before(n.nextDrift) {
		n.checkDrift(ctx)
		n.nextDrift = workflow.Now(ctx).Add(n.s.Plan.DriftInterval)
	}
}

// checkDrift compares the node with what adoption recorded; a difference
// shows in status and blocks the flip until accepted or undone.
func (n *node) checkDrift(ctx workflow.Context) {
	var res activities.DriftResult
	in := activities.DriftInput{Plan: n.s.Plan, Custody: n.driftBaseline(), Firewall: n.s.FirewallFingerprint}
	if err := n.exec(ctx, "drift: compare custody files and the found firewall with what was adopted", a.CheckDrift, in, &res); err != nil {
		n.event(ctx, "drift check failed: "+errorMessage(err))
		return
	}
	if len(res.Items) != len(n.s.Drift) {
		if len(res.Items) == 0 {
			n.event(ctx, "drift resolved: the node is as adopted again")
		} else {
			whats := make([]string, 0, len(res.Items))
			for _, it := range res.Items {
				whats = append(whats, it.What)
			}
			n.event(ctx, fmt.Sprintf("drift: %s; accept with adopt drift accept %s, or restore the original", strings.Join(whats, "; "), n.s.Node))
		}
	}
	n.s.Drift = res.Items
	n.publish(ctx)
}

// driftBaseline is what each custody file should be now: as found, except
// a migrated module's files, which its cutover converged to the mesh's.
func (n *node) driftBaseline() []custody.Record {
	out := append([]custody.Record(nil), n.s.Custody...)
	for _, m := range n.s.Plan.Modules {
		if st := n.s.module(m.Name); st == nil || st.State != ModuleMigrated {
			continue
		}
		for _, f := range m.Files {
			for i := range out {
				if out[i].Path == f.Path {
					out[i].Found, out[i].Exists, out[i].SHA256 = true, true, f.SHA256
				}
			}
		}
	}
	return out
}

// acceptDrift records the node as it is now.
func (n *node) acceptDrift(ctx workflow.Context) {
	var res activities.DriftResult
	in := activities.DriftInput{Plan: n.s.Plan, Custody: n.driftBaseline(), Firewall: n.s.FirewallFingerprint}
	if err := n.exec(ctx, "drift: accept the node as it is now", a.AcceptDrift, in, &res); err != nil {
		n.s.LastError = "drift accept: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	for _, rec := range res.Custody {
		for i := range n.s.Custody {
			if n.s.Custody[i].Path == rec.Path {
				n.s.Custody[i] = rec
			}
		}
	}
	n.s.FirewallFingerprint = res.Firewall
	n.s.Drift = nil
	n.event(ctx, fmt.Sprintf("drift accepted: %d difference(s) recorded as the node's new state", len(res.Items)))
}

// reconcile reasserts every expected marked rule.
func (n *node) reconcile(ctx workflow.Context) {
	var res activities.RulesResult
	in := activities.ReconcileInput{Plan: n.s.Plan, Owners: n.s.Opened}
	err := n.exec(ctx, "reconcile: reassert marked rules", a.Reconcile, in, &res)
	rec := &Reconcile{At: workflow.Now(ctx).UTC()}
	if err != nil {
		rec.Error = errorMessage(err)
		n.event(ctx, "reconcile failed: "+rec.Error)
	} else {
		rec.Restored, rec.Present = res.Added, len(res.Present)
		n.s.Marks = mergeMarks(nil, append(res.Added, res.Present...))
		if len(res.Added) > 0 {
			n.event(ctx, fmt.Sprintf("reconcile: %d marked rule(s) had vanished and were put back: %s", len(res.Added), markList(res.Added)))
		}
	}
	n.s.LastReconcile = rec
	n.publish(ctx)
}

// migrate cuts a module over, one step per activity so the Web UI shows
// each ("cutover mail: swap containers"): preflight (nothing changes if it
// refuses), open its ports through the found firewall, create its container
// beside the predecessor, converge its files, swap, wait healthy. A failure
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
	m.State, m.LastError = ModuleMigrating, ""
	m.Attempts++
	n.setPhase(ctx, PhaseMigrating)
	in := activities.ModuleInput{Plan: n.s.Plan, Module: module}
	step := func(name string, fn, arg any) error {
		n.s.module(module).Step = name
		n.publish(ctx)
		var res activities.CutoverResult
		return n.exec(ctx, fmt.Sprintf("cutover %s: %s", module, name), fn, arg, &res)
	}
	fail := func(stepName string, err error, rollback bool) {
		msg := fmt.Sprintf("step %q failed: %s", stepName, errorMessage(err))
		if rollback {
			msg += "; " + n.rollback(ctx, module, in)
		}
		mm := n.s.module(module)
		mm.State, mm.LastError = ModuleFailed, msg
		n.event(ctx, fmt.Sprintf("cutover %s failed: %s; fix it and run: adopt retry %s %s", module, msg, n.s.Node, module))
		n.setPhase(ctx, PhaseAdopted)
	}

	n.s.module(module).Step = "preflight"
	n.publish(ctx)
	var pre activities.CutoverResult
	if err := n.exec(ctx, fmt.Sprintf("cutover %s: preflight", module), a.CutoverPreflight, in, &pre); err != nil {
		fail("preflight", err, false) // refused before anything changed
		return
	}
	n.s.module(module).Step = "open ports"
	n.publish(ctx)
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
		{"create container", a.CutoverCreate, activities.CutoverInput{Plan: n.s.Plan, Module: module, Predecessor: pre.Predecessor}, mp.Container != nil},
		{"converge files", a.ConvergeFiles, in, len(mp.Files) > 0},
		{"swap containers", a.CutoverSwap, in, mp.Container != nil},
		{"wait healthy", a.CutoverWaitHealthy, in, mp.Container != nil},
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
	mm.State, mm.Step = ModuleMigrated, "done"
	n.event(ctx, "cutover "+module+": migrated")
	n.setPhase(ctx, PhaseAdopted)
}

// rollback undoes a cutover that failed after preflight and says how it went.
func (n *node) rollback(ctx workflow.Context, module string, in activities.ModuleInput) string {
	n.s.module(module).Step = "rollback"
	n.publish(ctx)
	var res activities.CutoverResult
	if err := n.exec(ctx, fmt.Sprintf("cutover %s: roll back", module), a.CutoverRollback, in, &res); err != nil {
		return "ROLLBACK FAILED: " + errorMessage(err) + " (the node may be half cut over; retry or inspect it)"
	}
	if err := n.closeRules(ctx, module); err != nil {
		return "rolled back, but closing its marked rules failed: " + errorMessage(err)
	}
	return "rolled back: the predecessor serves again, its files are as found, its marked rules are gone"
}

// closeRules removes an owner's marked rules and forgets them.
func (n *node) closeRules(ctx workflow.Context, owner string) error {
	var res activities.RulesResult
	if err := n.exec(ctx, fmt.Sprintf("close %s's marked rules", owner), a.CloseRules, activities.RulesInput{Plan: n.s.Plan, Owner: owner}, &res); err != nil {
		return err
	}
	delete(n.s.Opened, owner)
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
	var res activities.CutoverResult
	if err := n.exec(ctx, "prune the kept predecessor containers", a.Prune, activities.PruneInput{Plan: n.s.Plan, Modules: mods}, &res); err != nil {
		n.s.LastError = "prune: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	n.event(ctx, fmt.Sprintf("pruned %d predecessor container(s): %s", len(res.Files), strings.Join(res.Files, ", ")))
}

// preview compares what the found firewall opens now with what the mesh's
// derived ruleset would open, and adds the workflow's own refusals: a
// module not migrated, drift not reviewed.
func (n *node) preview(ctx workflow.Context) (*firewall.Preview, error) {
	var pv firewall.Preview
	in := activities.PreviewInput{Plan: n.s.Plan, Spec: MeshSpec(&n.s)}
	if err := n.exec(ctx, "flip preview: which open ports would close", a.Preview, in, &pv); err != nil {
		return nil, err
	}
	for _, m := range n.s.Modules {
		if m.State != ModuleMigrated {
			pv.Approved = false
			pv.Reasons = append(pv.Reasons, fmt.Sprintf("module %s is %s, not migrated: run adopt migrate %s %s first", m.Name, m.State, n.s.Node, m.Name))
		}
	}
	if len(n.s.Drift) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, fmt.Sprintf("%d drift(s) not reviewed: accept them (adopt drift accept %s) or restore the originals", len(n.s.Drift), n.s.Node))
	}
	n.s.LastPreview = &pv
	return &pv, nil
}

// flip runs a preview and, only if it approves, the flip: the found
// firewall out of force and the mesh's derived ruleset in, in one step; then
// the confirmation within flip.confirm_timeout (or the revert, which the
// node's watchdog does by itself if this workflow cannot), then the commit.
func (n *node) flip(ctx workflow.Context) {
	pv, err := n.preview(ctx)
	if err != nil {
		n.s.LastError = "flip preview: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	if !pv.Approved {
		n.s.LastError = "flip refused by the preview: " + strings.Join(pv.Reasons, "; ")
		n.event(ctx, n.s.LastError)
		return
	}
	n.s.LastError = ""
	n.setPhase(ctx, PhaseFlipping)
	n.s.FlipAttempts++
	id := fmt.Sprintf("%s-%d", n.s.Node, n.s.FlipAttempts)
	n.s.Flip = &FlipStatus{ID: id, State: "flipping"}
	back := func(why string) {
		n.s.Flip.State, n.s.Flip.Error = "reverted", why
		n.s.LastError = "flip " + id + " reverted: " + why
		n.event(ctx, n.s.LastError)
		n.setPhase(ctx, PhaseAdopted)
	}
	var fr activities.FlipResult
	in := activities.FlipInput{Plan: n.s.Plan, Spec: MeshSpec(&n.s), ExpectFound: pv.FoundFingerprint, ID: id, ConfirmTimeout: n.s.Plan.ConfirmTimeout}
	if err := n.exec(ctx, "flip: replace the found firewall with the mesh's, in one transaction", a.Flip, in, &fr); err != nil {
		n.revertFlip(ctx, id)
		back(errorMessage(err))
		return
	}
	n.s.Flip.State, n.s.Flip.Deadline = "flipped", fr.Deadline
	n.event(ctx, fmt.Sprintf("flipped (%s): confirming by %s", id, fr.Deadline.Format(time.RFC3339)))
	n.publish(ctx)

	// The confirmation must run by the deadline: reaching the worker at all
	// proves the new ruleset still lets it talk to Temporal.
	cctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeQueue(n.s.Node),
		ScheduleToCloseTimeout: n.s.Plan.ConfirmTimeout,
		Summary:                "flip: confirm (declared ports answer, worker reaches Temporal)",
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 5 * time.Second},
	})
	var cr activities.FlipResult
	if err := workflow.ExecuteActivity(cctx, a.ConfirmFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}).Get(ctx, &cr); err != nil {
		n.revertFlip(ctx, id)
		back(fmt.Sprintf("not confirmed within %s: %s", n.s.Plan.ConfirmTimeout, errorMessage(err)))
		return
	}
	n.s.Flip.State = "confirmed"
	var cm activities.FlipResult
	if err := n.exec(ctx, "flip: commit (save and remove the predecessor's firewall, prune predecessors)", a.CommitFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}, &cm); err != nil {
		n.s.Flip.Error = "commit: " + errorMessage(err)
		n.s.LastError = "flip " + id + " is confirmed, but removing the predecessor's leftovers failed: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
	} else {
		n.s.Flip.State, n.s.Flip.Listing = "committed", cm.Listing
	}
	// The found firewall's chains are gone, and the marks with them.
	n.s.Marks, n.s.Opened = nil, nil
	n.event(ctx, "converged: the mesh's own ruleset is the node's firewall")
	n.setPhase(ctx, PhaseConverged)
}

// revertFlip asks the node to revert a flip; the watchdog may have already.
func (n *node) revertFlip(ctx workflow.Context, id string) {
	var res activities.FlipResult
	if err := n.exec(ctx, "flip: revert to the firewall as it was", a.RevertFlip, activities.ConfirmInput{Plan: n.s.Plan, ID: id}, &res); err != nil {
		n.event(ctx, "revert of "+id+" failed: "+errorMessage(err)+" (the node's watchdog reverts it at the deadline)")
	}
}

// MeshSpec derives what the mesh's own ruleset opens: the management
// ports, the foundation's (once genesis opened them) and every migrated
// module's, with the host ports its container publishes for forwarding.
func MeshSpec(s *State) firewall.MeshSpec {
	spec := firewall.MeshSpec{Node: s.Node, Drop: s.Plan.Drop}
	for _, p := range s.Plan.ManagementPorts {
		spec.Input = append(spec.Input, firewall.Allow{Port: p, Owner: "management"})
	}
	if s.Genesis.State == "done" {
		for _, fp := range s.Plan.Foundation {
			spec.Input = append(spec.Input, firewall.Allow{Port: fp.Port, Owner: activities.OwnerFoundation})
		}
	}
	for _, m := range s.Plan.Modules {
		if st := s.module(m.Name); st == nil || st.State != ModuleMigrated {
			continue
		}
		for _, p := range m.Ports {
			spec.Input = append(spec.Input, firewall.Allow{Port: p, Owner: m.Name})
		}
		for _, p := range publishedPorts(m) {
			spec.Forward = append(spec.Forward, firewall.Allow{Port: p, Owner: m.Name})
		}
	}
	return spec
}

// publishedPorts are the host ports a module's container publishes, in a
// deterministic order.
func publishedPorts(m config.ModulePlan) []config.Port {
	if m.Container == nil {
		return nil
	}
	var out []config.Port
	for _, h := range workflow.DeterministicKeys(m.Container.Ports) {
		if i := strings.LastIndex(h, ":"); i >= 0 {
			h = h[i+1:] // [IP:]PORT/PROTO: the address does not matter to the filter
		}
		if p, err := config.ParsePort(h); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func (n *node) release(ctx workflow.Context) bool {
	var res activities.ReleaseResult
	if err := n.exec(ctx, "release: remove every marked rule", a.Release, activities.ProbeInput{Plan: n.s.Plan}, &res); err != nil {
		n.s.LastError = "release: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return false
	}
	n.s.Marks, n.s.Opened = nil, nil
	n.event(ctx, fmt.Sprintf("released: %d marked rule(s) removed, the found firewall as found", len(res.Removed)))
	n.setPhase(ctx, PhaseReleased)
	return true
}

// continueAsNew starts a fresh run with the same state once the history is
// long, after taking in every signal already delivered so none is lost.
func (n *node) continueAsNew(ctx workflow.Context) (*State, error) {
	n.drainSignals(ctx)
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return &n.s, err
	}
	n.s.Runs++
	n.event(ctx, "continued as new")
	s := n.s
	return nil, workflow.NewContinueAsNewError(ctx, NodeMigration, Input{Plan: n.s.Plan, Resume: &s})
}

// exec runs a node activity. A node whose worker is not polling shows as a
// schedule-to-start timeout: the workflow says so and keeps waiting rather
// than failing the step.
func (n *node) exec(ctx workflow.Context, summary string, fn, in, out any) error {
	opts := workflow.ActivityOptions{
		TaskQueue:              NodeQueue(n.s.Node),
		ScheduleToStartTimeout: 5 * time.Minute,
		StartToCloseTimeout:    10 * time.Minute,
		HeartbeatTimeout:       10 * time.Second,
		Summary:                summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    10,
		},
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	for {
		err := workflow.ExecuteActivity(actx, fn, in).Get(ctx, out)
		var te *temporal.TimeoutError
		if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			n.s.Waiting = fmt.Sprintf("no worker has picked up %q on task queue %s for 5m: is adopt-worker running on node %s?", summary, NodeQueue(n.s.Node), n.s.Node)
			n.publish(ctx)
			continue
		}
		if n.s.Waiting != "" {
			n.s.Waiting = ""
			n.publish(ctx)
		}
		return err
	}
}

func (n *node) setPhase(ctx workflow.Context, p Phase) {
	if n.s.Phase != p {
		n.s.Phase = p
		n.event(ctx, "phase "+string(p))
	}
	n.publish(ctx)
}

// publish shows the state where the operator looks: search attributes (in
// visibility, always shown) and current details (the Web UI, while a worker
// runs).
func (n *node) publish(ctx workflow.Context) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrNode.ValueSet(n.s.Node), AttrPhase.ValueSet(string(n.s.Phase)))
	workflow.SetCurrentDetails(ctx, Details(&n.s))
	// A node started by a fleet tells it how far it is, when that changes.
	if parent := workflow.GetInfo(ctx).ParentWorkflowExecution; parent != nil {
		p := NodeProgress{Node: n.s.Node, Phase: n.s.Phase, Migrated: n.s.MigratedCount(), Modules: len(n.s.Modules)}
		if p != n.told {
			n.told = p
			workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalNodeProgress, p)
		}
	}
}

func (n *node) event(ctx workflow.Context, text string) {
	n.s.Events = append(n.s.Events, Event{At: workflow.Now(ctx).UTC(), Text: text})
	if len(n.s.Events) > maxEvents {
		n.s.Events = n.s.Events[len(n.s.Events)-maxEvents:]
	}
}

// Details is the short markdown the Web UI shows for the node.
func Details(s *State) string {
	// Sprintf into a Builder, not Fprintf: workflowcheck cannot tell that
	// Fprintf's writer is a Builder and flags it as non-deterministic I/O.
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**Node %s**: phase **%s**\n\n", s.Node, s.Phase))
	// The next step first: the Web UI's details pane is short.
	b.WriteString(fmt.Sprintf("**Next step:** %s\n\n", NextStep(s)))
	b.WriteString(fmt.Sprintf("- modules migrated: %d of %d\n", s.MigratedCount(), len(s.Modules)))
	if s.FirewallKind != "" {
		b.WriteString(fmt.Sprintf("- found firewall: %s, kept in force; %d marked rule(s)\n", s.FirewallKind, len(s.Marks)))
	}
	b.WriteString(fmt.Sprintf("- files in custody: %d\n", len(s.Custody)))
	if s.Genesis.State != "" {
		b.WriteString(fmt.Sprintf("- genesis: %s %s\n", s.Genesis.State, s.Genesis.Error))
	}
	if r := s.LastReconcile; r != nil && (len(r.Restored) > 0 || r.Error != "") {
		b.WriteString(fmt.Sprintf("- last reconcile (%s): %d marked rule(s) put back %s\n", r.At.Format("15:04:05"), len(r.Restored), r.Error))
	}
	if s.LastPreview != nil {
		verdict := "refused"
		if s.LastPreview.Approved {
			verdict = "approved"
		}
		b.WriteString(fmt.Sprintf("- last preview: %s %s\n", verdict, strings.Join(s.LastPreview.Reasons, "; ")))
	}
	if f := s.Flip; f != nil {
		b.WriteString(fmt.Sprintf("- flip %s: %s %s\n", f.ID, f.State, f.Error))
	}
	for _, d := range s.Drift {
		b.WriteString(fmt.Sprintf("- DRIFT: %s\n", d.What))
	}
	if len(s.Queue) > 0 {
		b.WriteString(fmt.Sprintf("- queued: %d request(s), next %s %s\n", len(s.Queue), s.Queue[0].Kind, s.Queue[0].Module))
	}
	if s.Waiting != "" {
		b.WriteString(fmt.Sprintf("- waiting: %s\n", s.Waiting))
	}
	if s.LastError != "" {
		b.WriteString(fmt.Sprintf("- last error: %s\n", s.LastError))
	}
	return b.String()
}

// NextStep tells the operator what to do next.
func NextStep(s *State) string {
	switch s.Phase {
	case PhaseProbing:
		return "wait: the node is being probed and adopted"
	case PhaseFailed:
		return fmt.Sprintf("fix the cause above, then `adopt retry %s` (or `adopt release %s`)", s.Node, s.Node)
	case PhaseMigrating:
		return "wait: a module is cutting over"
	case PhaseFlipping:
		return "wait: the flip is being applied and confirmed"
	case PhaseConverged, PhaseReleased:
		return "none: the workflow is complete"
	}
	if s.Genesis.State == "failed" {
		return fmt.Sprintf("fix the genesis error above in the configuration, then `adopt retry %s`", s.Node)
	}
	for _, m := range s.Modules {
		if m.State == ModuleFailed {
			return fmt.Sprintf("`adopt retry %s %s` after fixing: %s", s.Node, m.Name, m.LastError)
		}
	}
	for _, m := range s.Modules {
		if m.State == ModulePending {
			return fmt.Sprintf("`adopt migrate %s %s`", s.Node, m.Name)
		}
	}
	return fmt.Sprintf("`adopt preview %s`, then `adopt flip %s`", s.Node, s.Node)
}

// errorMessage is the operator-facing text of an activity error.
func errorMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timed out (" + te.TimeoutType().String() + ")"
	}
	return err.Error()
}

func portList(ps []config.Port) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

func markList(ms []firewall.MarkedRule) string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s/%s", m.Mark.Comment(), m.Family, m.Chain))
	}
	return strings.Join(out, ", ")
}

func withoutOwner(ms []firewall.MarkedRule, owner string) []firewall.MarkedRule {
	var out []firewall.MarkedRule
	for _, m := range ms {
		if m.Mark.Owner != owner {
			out = append(out, m)
		}
	}
	return out
}

// mergeMarks adds marks to a list, once each (by place and comment).
func mergeMarks(have, add []firewall.MarkedRule) []firewall.MarkedRule {
	key := func(m firewall.MarkedRule) string {
		return m.Family + " " + m.Table + " " + m.Chain + " " + m.Mark.Comment()
	}
	seen := map[string]bool{}
	var out []firewall.MarkedRule
	for _, m := range append(append([]firewall.MarkedRule{}, have...), add...) {
		if !seen[key(m)] {
			seen[key(m)] = true
			out = append(out, m)
		}
	}
	return out
}
