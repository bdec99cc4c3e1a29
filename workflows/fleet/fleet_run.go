// The Fleet workflow's run: start nodes in order (in waves, when the fleet
// has them: fleet_waves.go), follow their progress, hold on a node that
// failed (beyond its wave's budget), and continue as new by history length. What
// a node's end does to the fleet: docs/workflows.md.
package fleet

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
)

// Fleet runs every node's NodeMigration as a child, one after another, the
// control node first: the next node starts once the previous one is adopted
// with every module migrated, or when the operator says so. Flips stay per
// node and are never started here.
func Fleet(ctx workflow.Context, in FleetInput) (*FleetState, error) {
	if in.Resume == nil {
		taken(ctx, changeFleetMembers)
	}
	if err := ValidateFleet(in); err != nil {
		return nil, err
	}
	f := &fleet{in: in, members: in.members(), plans: map[string]config.Plan{}, retry: map[string]bool{}, gen: map[string]int{}, heard: map[string]time.Time{}}
	f.askWait = f.askFirst()
	for _, p := range in.Nodes {
		f.plans[p.Node] = p
	}
	if f.in.NodeIntents == nil {
		f.in.NodeIntents = map[string]*intent.Signed{}
	}
	for _, node := range in.Retries {
		f.retry[node] = true
		f.retries = append(f.retries, node)
	}
	if in.Resume != nil {
		f.st = in.Resume
	} else {
		f.st = &FleetState{Name: in.Name, Waves: in.Waves}
		for _, m := range f.members {
			f.st.Nodes = append(f.st.Nodes, FleetNode{NodeProgress: workflows.NodeProgress{Node: m.Node}, Role: m.Role})
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryFleet, func(p FleetPage) (FleetState, error) { return f.st.page(p), nil }); err != nil {
		return nil, err
	}
	if err := f.registerRequests(ctx); err != nil {
		return nil, err
	}
	if err := f.registerOps(ctx); err != nil {
		return nil, err
	}
	f.passOver = workflow.GetVersion(ctx, changeFleetPassOver, workflow.DefaultVersion, 1) >= 1
	f.ask = workflow.GetVersion(ctx, changeFleetAsk, workflow.DefaultVersion, 1) >= 1
	if f.st.Waves != nil && workflow.GetVersion(ctx, changeFleetWaves, workflow.DefaultVersion, 1) < 1 {
		f.st.Waves = nil // a run recorded before waves went one node at a time
	}
	workflow.Go(ctx, f.signals)
	workflow.Go(ctx, f.ops)
	return f.run(ctx)
}

type fleet struct {
	in      FleetInput
	members []FleetMember
	st      *FleetState
	plans   map[string]config.Plan // legacy inline plans only
	retry   map[string]bool        // nodes the operator asked to retry
	retries []string               // ... in arrival order
	// gen counts the starts of each node in this run, so that the end of
	// a run replaced by a retry is not taken for the new one's.
	gen map[string]int
	// passOver: `adopt fleet next` passes over the nodes that hold the
	// fleet (changeFleetPassOver).
	passOver bool
	// reading is what Held says while a node's plan is read from its
	// agent (the main loop waits for it), or "".
	reading string
	// ask: quiet nodes from an earlier run are asked whether their
	// workflow still runs (fleet_ask.go, changeFleetAsk); heard is when
	// each last sent progress, or answered, in this run; askWait is how
	// long the main loop waits before the next round.
	ask     bool
	heard   map[string]time.Time
	askWait time.Duration
	// opBusy: an op's wave waits on its relay activities (fleet_ops.go);
	// leaving: the run is about to continue as new, so no wave starts;
	// opsTaken: this run asked changeFleetOps.
	opBusy, leaving, opsTaken bool
	// batches is how this run sends an op's wave (changeFleetRelayBatches):
	// 0 not asked yet, 1 one relay activity a node, 2 in batches.
	batches int
	// follow is how this run's ops go (changeFleetOpsFollow): 0 not
	// asked yet, 1 on the nodes started when asked, one at a time
	// (runs before), 2 following the waves (fleet_follow.go).
	follow int
	// pos is each node's index (index); draining: drain is taking signals,
	// so show leaves the details to its end; unshown: they are stale.
	pos               map[string]int
	draining, unshown bool
	// heldShown: AdoptionAttention says wave-held (changeFleetAttention).
	heldShown bool
}

// nodeActs names the node agent's activities (called through a nil pointer).
var nodeActs *nodewire.Activities

// planReadTimeout bounds the read of a node's plan from its agent, retries
// included. It is short work (the agent reads its own file), so no answer
// means no agent; and the main loop waits for it, so `adopt fleet next` and
// `adopt fleet retry` wait as long: unbounded, a node whose agent was down
// held the whole fleet, with nothing saying so. A node whose agent did not
// answer is marked not started, which holds the fleet with the reason, and
// `adopt fleet retry NODE` reads again. The bound is an activity option,
// not a timer: it adds no command, so recorded histories replay unchanged.
const planReadTimeout = 2 * time.Minute

// index is f.st.Index by map: the fleet's nodes keep their order for the
// whole run, and a node's progress asks it once per signal.
func (f *fleet) index(node string) int {
	if f.pos == nil {
		f.pos = make(map[string]int, len(f.st.Nodes))
		for i, n := range f.st.Nodes {
			f.pos[n.Node] = i
		}
	}
	if i, ok := f.pos[node]; ok {
		return i
	}
	return -1
}

func (f *fleet) note(ctx workflow.Context, s string) {
	f.event(ctx, s)
	f.show(ctx)
}

// event adds a line to the fleet's events, the oldest dropped past
// maxFleetEvents.
func (f *fleet) event(ctx workflow.Context, s string) {
	f.st.Events = append(f.st.Events, workflow.Now(ctx).UTC().Format("15:04:05")+" "+s)
	if len(f.st.Events) > maxFleetEvents {
		f.st.Events = f.st.Events[len(f.st.Events)-maxFleetEvents:]
	}
}

// show brings what status and the Web UI say up to date. Within a drain
// the details (a line per node) wait for its end: built once per signal,
// a thousand nodes' signals taken in one workflow task cost a second and
// more, past the SDK's deadlock bound. The details are no command.
func (f *fleet) show(ctx workflow.Context) {
	was := f.st.Held
	f.updateHeld()
	if h := f.st.Held; f.st.Waves != nil && h != was && h != f.reading && h != "" {
		f.event(ctx, h) // a wave halted: said once, when it happens
	}
	f.showHeld(ctx)
	if f.draining {
		f.unshown = true
		return
	}
	f.publish(ctx)
}

// showHeld keeps AdoptionAttention at wave-held while failed nodes hold
// the fleet, and clears it when they no longer do. A command only when
// that changes, and versioned there: runs recorded before never ask.
func (f *fleet) showHeld(ctx workflow.Context) {
	held := f.st.Held != "" && f.st.Held != f.reading
	if held == f.heldShown || workflow.GetVersion(ctx, changeFleetAttention, workflow.DefaultVersion, 1) < 1 {
		return
	}
	att := ""
	if held {
		att = workflows.AttentionWaveHeld
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, workflows.AttrAttention.ValueSet(att))
	f.heldShown = held
}

// publish sets the fleet's current details (status, the Web UI).
func (f *fleet) publish(ctx workflow.Context) {
	f.unshown = false
	workflow.SetCurrentDetails(ctx, fleetDetails(f.st))
}

// signals takes progress, next and retry signals as they come. A payload
// that does not decode is dropped by the SDK (and logged); one that decodes
// but makes no sense is dropped here, logged: neither blocks the fleet.
// It waits on the channels' lengths, not in a Selector: a Selector takes a
// value out of its channel as soon as it arrives and holds it until this
// coroutine runs, and a continue-as-new in between would lose it; left in
// the channel, drain finds it.
func (f *fleet) signals(ctx workflow.Context) {
	chans := []workflow.ReceiveChannel{
		workflow.GetSignalChannel(ctx, workflows.SignalNodeProgress),
		workflow.GetSignalChannel(ctx, SignalFleetNext),
		workflow.GetSignalChannel(ctx, SignalFleetRetry),
	}
	for {
		if err := workflow.Await(ctx, func() bool {
			for _, c := range chans {
				if c.Len() > 0 {
					return true
				}
			}
			return false
		}); err != nil {
			return // cancelled: Await returns at once, and looping on it would never yield
		}
		f.drain(ctx)
	}
}

// drain takes every signal already delivered (and, before continue-as-new,
// every one left).
func (f *fleet) drain(ctx workflow.Context) {
	f.draining = true // nothing below blocks: the details are set once, at the end
	defer func() {
		if f.draining = false; f.unshown {
			f.publish(ctx)
		}
	}()
	var p workflows.NodeProgress
	for ch := workflow.GetSignalChannel(ctx, workflows.SignalNodeProgress); ch.ReceiveAsync(&p); p = (workflows.NodeProgress{}) {
		f.progress(ctx, p)
	}
	for ch := workflow.GetSignalChannel(ctx, SignalFleetNext); ch.ReceiveAsync(nil); {
		f.goOn(ctx)
	}
	var r FleetRetry
	for ch := workflow.GetSignalChannel(ctx, SignalFleetRetry); ch.ReceiveAsync(&r); r = (FleetRetry{}) {
		f.takeIntent(r)
		f.askRetry(ctx, r.Node)
	}
}

// goOn serves `adopt fleet next`: go on without the nodes that hold the
// fleet (they are passed over, so status stops naming them and the fleet
// can end without them) and start the next node now. A grant that could
// never be spent (every node started, or one grant already waits for each
// node left) is dropped and said: it would only pile up.
func (f *fleet) goOn(ctx workflow.Context) {
	var passed []string
	if f.passOver {
		var holding []int
		holds := f.st.holding()
		for i := range f.st.Nodes {
			if holds(i) {
				holding = append(holding, i)
			}
		}
		for _, i := range holding {
			f.st.Nodes[i].PassedOver = true
			passed = append(passed, f.st.Nodes[i].Node)
		}
	}
	without := ""
	if len(passed) > 0 {
		without = "go on without " + names(passed, ", ") + "; "
	}
	left := len(f.st.Nodes) - f.st.Next
	if f.st.Waves != nil && left > 0 && (f.st.Grants > 0 || f.st.startsByItself(f.st.Next)) {
		left = 0 // one grant starts the next wave, and none is needed inside one
	}
	switch {
	case f.st.Grants < left:
		f.st.Grants++
		f.note(ctx, "operator: "+without+"start the next node now")
	case len(passed) > 0:
		f.note(ctx, "operator: "+without+"no node is left to start")
	default:
		workflow.GetLogger(ctx).Warn("fleet next dropped: no node left to start", "started", f.st.Next, "nodes", len(f.st.Nodes), "grants", f.st.Grants)
		f.note(ctx, fmt.Sprintf("operator: next dropped: no node is left to start (%d of %d started, %d start(s) already granted) and none holds the fleet", f.st.Next, len(f.st.Nodes), f.st.Grants))
	}
}

func validPhase(p workflows.Phase) bool {
	switch p {
	case workflows.PhaseProbing, workflows.PhaseAdopted, workflows.PhaseMigrating, workflows.PhaseFlipping, workflows.PhaseConverged, workflows.PhaseReleased, workflows.PhaseFailed:
		return true
	}
	return false
}

func (f *fleet) progress(ctx workflow.Context, p workflows.NodeProgress) {
	i := f.index(p.Node)
	if i < 0 || !validPhase(p.Phase) || p.Migrated < 0 || p.Modules < 0 || p.Migrated > p.Modules {
		workflow.GetLogger(ctx).Warn("malformed node progress dropped", "node", p.Node, "phase", p.Phase, "migrated", p.Migrated, "modules", p.Modules)
		return
	}
	n := &f.st.Nodes[i]
	n.NodeProgress = p
	n.Done = nodeDone(p)
	f.nodeServed(*n)
	f.heard[p.Node] = workflow.Now(ctx)
	if p.Phase == workflows.PhaseConverged || p.Phase == workflows.PhaseReleased {
		n.Ended = string(p.Phase)
	}
	if n.Role == "control" && n.Done && f.st.Frozen != "" {
		f.st.Frozen = ""
		f.note(ctx, "control node "+p.Node+" migrated: the predecessor's pipeline is no longer needed")
	}
	f.show(ctx)
}

// takeIntent keeps a fleet request's signed intents: next's (or resume's)
// for every node started from now on, in place of the ones before,
// retry's for its node's next start. Of intents signed for each node, the
// nodes already started need none.
func (f *fleet) takeIntent(r FleetRequest) {
	switch {
	case r.Node != "":
		if s := r.intentFor(r.Node); s != nil {
			f.in.NodeIntents[r.Node] = s
		}
	case r.Intents != nil:
		f.in.Intent, f.in.Intents = nil, r.Intents
		for _, n := range f.st.Nodes {
			if n.Started {
				delete(f.in.Intents, n.Node)
			}
		}
	case r.Intent != nil:
		f.in.Intent, f.in.Intents = r.Intent, nil
	}
}

// nodeIntent is the intent node is started with: a fleet retry's for it,
// else the start's (or next's) for it, else one naming every node.
func (f *fleet) nodeIntent(node string) *intent.Signed {
	if s, ok := f.in.NodeIntents[node]; ok {
		return s
	}
	if s, ok := f.in.Intents[node]; ok {
		return s
	}
	return f.in.Intent
}

// intentFor is the request's intent for node: its own, else the one
// naming every node (an older CLI's), else nil.
func (r FleetRequest) intentFor(node string) *intent.Signed {
	if s, ok := r.Intents[node]; ok {
		return s
	}
	return r.Intent
}

func (f *fleet) askRetry(ctx workflow.Context, node string) {
	// The rule is retryRefusal (fleet_requests.go), which the Update's
	// validator asks too.
	switch why := f.st.retryRefusal(node); {
	case why != "":
		f.note(ctx, fmt.Sprintf("retry %q refused: %s", node, why))
	case f.retry[node]:
	default:
		f.retry[node] = true
		f.retries = append(f.retries, node)
		f.note(ctx, "operator: retry node "+node)
	}
}

// canStartNext: the fleet is not paused, and the next node starts by
// itself (fleet_waves.go) or the operator granted a start.
func (f *fleet) canStartNext() bool {
	if f.st.Next >= len(f.st.Nodes) || f.st.Paused != "" {
		return false
	}
	return f.st.Grants > 0 || f.st.startsByItself(f.st.Next)
}

func (f *fleet) finished() bool {
	if f.st.Next < len(f.st.Nodes) || f.st.opsBusy() {
		return false
	}
	holds := f.st.holding()
	for i, n := range f.st.Nodes {
		if n.Ended == "" || holds(i) {
			return false
		}
	}
	return true
}

func (f *fleet) run(ctx workflow.Context) (*FleetState, error) {
	canDue := func() bool { return f.due(ctx) && !f.opBusy }
	f.show(ctx)
	for {
		// Waits, and asks the nodes it cannot see end (fleet_ask.go).
		round, err := f.awaitOrAsk(ctx, func() bool {
			return f.canStartNext() || len(f.retries) > 0 || canDue() || f.finished()
		})
		if err != nil {
			return f.st, err
		}
		if round {
			continue
		}
		if canDue() {
			return f.continueAsNew(ctx)
		}
		if len(f.retries) > 0 {
			node := f.retries[0]
			f.retries = f.retries[1:]
			delete(f.retry, node)
			f.start(ctx, f.index(node), true)
			continue
		}
		if f.canStartNext() {
			i := f.st.Next
			if !f.st.startsByItself(i) {
				f.st.Grants-- // one operator grant spent
			}
			if line := f.st.waveStart(i); line != "" {
				f.note(ctx, line)
			}
			f.st.Next++
			f.start(ctx, i, false)
			if f.st.Next == len(f.st.Nodes) {
				f.note(ctx, "every node started; flips are per node: adopt flip NODE")
			}
			continue
		}
		if f.finished() {
			f.st.Frozen, f.st.Held = "", ""
			f.note(ctx, "every node has ended")
			return f.st, nil
		}
	}
}

// due: the run's history is long enough to continue as new.
func (f *fleet) due(ctx workflow.Context) bool {
	limit := f.in.HistoryLimit
	if limit <= 0 {
		limit = fleetHistoryLimit
	}
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() >= limit || info.GetContinueAsNewSuggested()
}

// updateHeld says why the fleet is not starting its next node, if a
// node's end holds it.
func (f *fleet) updateHeld() {
	if f.st.Held = f.st.heldBy(); f.st.Held == "" {
		f.st.Held = f.reading
	}
}

// start reads node i's plan from its agent and starts its workflow as a
// child; a refusal marks the node as not started, holding the fleet.
func (f *fleet) start(ctx workflow.Context, i int, again bool) {
	m := f.st.Nodes[i]
	n := &f.st.Nodes[i]
	n.PassedOver = false // started again, its end counts again
	signed := f.nodeIntent(m.Node)
	plan, ok := f.plans[m.Node]
	if !ok {
		until := workflow.Now(ctx).Add(planReadTimeout).UTC().Format("15:04:05")
		f.reading = fmt.Sprintf("reading node %s's plan from its agent: if adopt-worker is not running on %s, the node is marked not started at %s (then `adopt fleet retry %s`)", m.Node, m.Node, until, m.Node)
		f.note(ctx, fmt.Sprintf("reading node %s's plan from its agent (up to %s: adopt-worker must run on %s)", m.Node, planReadTimeout, m.Node))
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:              workflows.NodeQueue(m.Node),
			StartToCloseTimeout:    time.Minute,
			ScheduleToCloseTimeout: planReadTimeout,
			Summary:                "read node " + m.Node + "'s plan",
			RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, NonRetryableErrorTypes: []string{nodewire.ErrWrongNode, nodewire.ErrBadPlan}},
		})
		var p config.Plan
		// The node answers the fleet only under the operator's intent to
		// start it, the one its workflow is started with.
		err := workflow.ExecuteActivity(actx, nodeActs.Plan, nodewire.PlanInput{Node: m.Node, Intent: signed}).Get(ctx, &p)
		f.reading = ""
		f.show(ctx)
		if err != nil {
			n.Started, n.Ended = true, "not started: "+planReadError(m.Node, err)
			f.note(ctx, "node "+m.Node+" "+n.Ended)
			return
		}
		plan = p
	}
	delete(f.plans, m.Node) // inline plans serve once; a retry reads afresh
	if plan.Node != m.Node || plan.Role != m.Role {
		n.Started, n.Ended = true, fmt.Sprintf("not started: its agent's plan is node %q with role %q, the fleet says node %s with role %s", plan.Node, plan.Role, m.Node, m.Role)
		f.note(ctx, "node "+m.Node+" "+n.Ended)
		return
	}
	if err := config.CheckPlan(plan, m.Node, m.Role); err != nil {
		n.Started, n.Ended = true, "not started: "+err.Error()
		f.note(ctx, "node "+m.Node+" "+n.Ended)
		return
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            workflows.WorkflowID(m.Node),
		TaskQueue:             workflows.TaskQueue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON, // a node's adoption outlives its fleet
		StaticSummary:         fmt.Sprintf("adoption of node %s (%s) in fleet %s", m.Node, m.Role, f.st.Name),
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrNode.ValueSet(m.Node), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	})
	delete(f.in.Intents, m.Node) // started: it needs it no more
	delete(f.in.NodeIntents, m.Node)
	fut := workflow.ExecuteChildWorkflow(cctx, workflows.NodeWorkflow, workflows.Input{Plan: plan, Intent: signed})
	var child workflow.Execution
	if err := fut.GetChildWorkflowExecution().Get(ctx, &child); err != nil {
		if again && n.Ended == "" && temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			f.note(ctx, fmt.Sprintf("retry %s refused: its workflow (%s) is still running", m.Node, workflows.WorkflowID(m.Node)))
			return
		}
		why := workflows.ErrorMessage(err)
		if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
			why = fmt.Sprintf("a workflow for node %s is already running (%s), outside this fleet", m.Node, workflows.WorkflowID(m.Node))
		}
		n.Started, n.Ended = true, "not started: "+why
		f.note(ctx, "node "+m.Node+" "+n.Ended)
		return
	}
	n.Started, n.Ended, n.Done = true, "", false
	n.RunID, n.Declares = child.RunID, []string{}
	for _, pm := range plan.Modules {
		n.Declares = append(n.Declares, pm.Name)
	}
	n.NodeProgress = workflows.NodeProgress{Node: m.Node, Phase: workflows.PhaseProbing, Modules: len(plan.Modules)}
	if m.Role == "control" && !again {
		f.st.Frozen = config.PipelineFreeze(m.Role, m.Node)
	}
	verb := "started"
	if again {
		verb = "started again"
	}
	f.note(ctx, verb+" node "+m.Node)
	f.gen[m.Node]++
	g := f.gen[m.Node]
	workflow.Go(ctx, func(ctx workflow.Context) {
		var res workflows.State
		err := fut.Get(ctx, &res)
		if f.gen[m.Node] != g {
			return // a retry started the node again: this run's end is old news
		}
		n := &f.st.Nodes[f.index(m.Node)]
		switch {
		case err == nil:
			n.NodeProgress = workflows.NodeProgress{Node: res.Node, Phase: res.Phase, Migrated: res.MigratedCount(), Modules: len(res.Modules)}
			n.Done, n.Ended = nodeDone(n.NodeProgress), string(res.Phase)
		default:
			n.Ended = childEnd(err)
			f.note(ctx, "node "+m.Node+" "+n.Ended)
		}
		f.show(ctx)
	})
}

// planReadError says why a node's plan could not be read: its agent's own
// refusal, or no answer within planReadTimeout (with the last attempt's
// error, if one came back).
func planReadError(node string, err error) string {
	var te *temporal.TimeoutError
	if !errors.As(err, &te) {
		return workflows.ErrorMessage(err)
	}
	why := fmt.Sprintf("its agent did not answer within %s (is adopt-worker running on %s?)", planReadTimeout, node)
	if last := errors.Unwrap(te); last != nil {
		why += "; its last attempt: " + workflows.ErrorMessage(last)
	}
	return why
}

// childEnd names how a child workflow ended without a result.
func childEnd(err error) string {
	var term *temporal.TerminatedError
	var canc *temporal.CanceledError
	var to *temporal.TimeoutError
	switch {
	case errors.As(err, &term):
		return "terminated"
	case errors.As(err, &canc):
		return "canceled"
	case errors.As(err, &to):
		return "timed out"
	}
	return "failed: " + workflows.ErrorMessage(err)
}

// continueAsNew carries the fleet's state (names, progress, grants; never
// plans) to a fresh run, after taking in every signal already delivered.
func (f *fleet) continueAsNew(ctx workflow.Context) (*FleetState, error) {
	f.drain(ctx)
	f.leaving = true // an op's next wave starts in the next run
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && !f.opBusy }); err != nil {
		return f.st, err
	}
	st := *f.st
	st.Runs++
	// The members are the state's nodes (names and roles): not carried twice.
	in := FleetInput{Name: f.in.Name, Resume: &st, Retries: f.retries, HistoryLimit: f.in.HistoryLimit, AskFirst: f.in.AskFirst,
		Intent: f.in.Intent, Intents: f.in.Intents, NodeIntents: f.in.NodeIntents}
	return nil, workflow.NewContinueAsNewError(ctx, FleetWorkflow, in)
}
