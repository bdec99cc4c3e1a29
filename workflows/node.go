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
	s State
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
	for {
		ready := func() bool {
			return len(n.s.Queue) > 0 || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		}
		if every := n.s.Plan.ReconcileInterval; every > 0 && len(n.s.Opened) > 0 {
			// While adopted, marked rules are reasserted on a timer: the found
			// firewall's own boot-time service may reload it without them.
			ok, err := workflow.AwaitWithTimeout(ctx, every, ready)
			if err != nil {
				return &n.s, err
			}
			if !ok {
				n.reconcile(ctx)
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
			n.genesis(ctx)
		case req.Kind == SignalMigrate, req.Kind == SignalRetry:
			n.migrate(ctx, req.Module)
		case req.Kind == SignalFlip:
			n.flip(ctx)
		case req.Kind == SignalPrune:
			n.prune(ctx)
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
func (n *node) openRules(ctx workflow.Context, owner string, ports []config.Port) error {
	if len(ports) == 0 {
		return nil
	}
	var res activities.RulesResult
	in := activities.RulesInput{Plan: n.s.Plan, Owner: owner, Ports: ports}
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
	if err := n.openRules(ctx, module, mp.Ports); err != nil {
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

func (n *node) flip(ctx workflow.Context) {
	var pv activities.PreviewResult
	if err := n.exec(ctx, "flip preview", a.Preview, activities.ProbeInput{Plan: n.s.Plan}, &pv); err != nil {
		n.s.LastError = "flip: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return
	}
	n.s.LastPreview = &pv
	if !pv.Approved {
		n.event(ctx, "flip refused by the preview: "+strings.Join(pv.Reasons, "; "))
		return
	}
	n.setPhase(ctx, PhaseFlipping)
	var res activities.PreviewResult
	if err := n.exec(ctx, "flip the firewall", a.Flip, activities.ProbeInput{Plan: n.s.Plan}, &res); err != nil {
		n.s.LastError = "flip: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		n.setPhase(ctx, PhaseAdopted)
		return
	}
	n.setPhase(ctx, PhaseConverged)
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
	if len(s.Queue) > 0 {
		b.WriteString(fmt.Sprintf("- queued: %d request(s), next %s %s\n", len(s.Queue), s.Queue[0].Kind, s.Queue[0].Module))
	}
	if s.Waiting != "" {
		b.WriteString(fmt.Sprintf("- waiting: %s\n", s.Waiting))
	}
	if s.LastError != "" {
		b.WriteString(fmt.Sprintf("- last error: %s\n", s.LastError))
	}
	b.WriteString(fmt.Sprintf("\n**Next step:** %s\n", NextStep(s)))
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
