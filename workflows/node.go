// Package workflows holds the durable state machines: one NodeMigration per
// node. No I/O happens here; everything that touches a node is an activity
// on that node's own task queue.
package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall"
	"adoption/intent"
)

// Search attributes, registered on the server (see Makefile dev-server), so
// the Web UI can filter nodes by phase.
var (
	AttrNode  = temporal.NewSearchAttributeKeyKeyword("AdoptionNode")
	AttrPhase = temporal.NewSearchAttributeKeyKeyword("AdoptionPhase")
)

// The workflow calls activities through a nil pointer: only the method
// values matter, and tests mock the same ones.
var a *nodewire.Activities

// node is the entity behind one NodeMigration execution.
type node struct {
	s    State
	told NodeProgress // last progress signalled to the fleet
	// quiet: the fleet is not told of a phase while it is set (a flip in
	// one round trip tells it only how the flip ended).
	quiet bool
	// verdict is the witness's on the flip in one round trip, for the
	// node's query.
	verdict nodewire.WitnessVerdict
	// upserted is the node, phase and attention last written to the
	// search attributes in this run: they are upserted only when they
	// change.
	upserted string
	// told is delivered to the fleet when this future is ready: the
	// workflow waits for the last one before it ends (history.go, finish).
	toldSent workflow.Future
	// inFlip is set while a flip request is served: a preview (and the
	// plan it may carry) waits until it has ended.
	inFlip bool
	// intent is the operator's signed request being served: every
	// activity of its operation carries it to the node.
	intent *intent.Signed
	// serving is the request being served ("" kind: the adoption).
	serving Request
}

// NodeMigration holds a node's adoption for as long as it lasts: probe and
// adopt, then serve queued requests (migrate, retry, flip, release) one at a
// time until the node converges or is released.
func NodeMigration(ctx workflow.Context, in Input) (*State, error) {
	n := &node{intent: in.Intent}
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
			if err == nil {
				n.finish(ctx)
			}
			return &n.s, err
		}
	}
	n.publish(ctx)
	for {
		ready := func() bool {
			return len(n.s.Queue) > 0 || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		}
		// While adopted, two jobs run between requests: marked rules are
		// reasserted (the found firewall's boot-time service may reload it
		// without them), and drift is looked for. The node checks in its
		// own loop; the workflow hears only changes, and an idle node
		// writes nothing to the history.
		if n.watchDue() {
			got, err := n.watchNode(ctx, ready)
			if err != nil {
				return &n.s, err
			}
			if !got {
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
		n.intent, n.serving, n.s.Refused = req.Intent, req, nil
		if req.Plan != nil {
			n.applyPlan(ctx, *req.Plan)
		}
		switch {
		case req.Kind == SignalRetry && req.Module == "" && n.committing():
			n.event(ctx, "retrying the commit of flip "+n.s.Flip.ID)
			n.commit(ctx)
		case req.Kind == SignalRetry && req.Module == "":
			if n.s.Genesis.State == "failed" {
				n.genesis(ctx)
			} else {
				n.event(ctx, "retry: neither the adoption nor the genesis has failed; nothing to retry (no flip waits for its commit either; nothing changed; name a failed module to retry its cutover)")
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
				n.finish(ctx)
				return &n.s, nil
			}
		}
		if n.s.Phase == PhaseConverged {
			n.finish(ctx)
			return &n.s, nil
		}
		n.publish(ctx)
	}
}

// applyPlan takes an updated plan sent with a request: new modules are
// added as pending; a module dropped from the plan is forgotten unless it
// already migrated (what it did on the node is still there).
func (n *node) applyPlan(ctx workflow.Context, p config.Plan) {
	n.s.Modules = modulesFor(&n.s, p)
	n.s.Plan = p
	n.event(ctx, "plan updated")
}

// modulesFor is the module states under plan p: each module's state as it
// is (pending when new), and a migrated module p no longer names kept.
func modulesFor(s *State, p config.Plan) []ModuleState {
	var mods []ModuleState
	for _, m := range p.Modules {
		if cur := s.module(m.Name); cur != nil {
			mods = append(mods, *cur)
		} else {
			mods = append(mods, ModuleState{Name: m.Name, State: ModulePending})
		}
	}
	for _, m := range s.Modules {
		if _, ok := p.Module(m.Name); !ok && m.State == ModuleMigrated {
			mods = append(mods, m)
		}
	}
	return mods
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
	return nil, workflow.NewContinueAsNewError(ctx, NodeMigration, Input{Plan: n.s.Plan, Resume: &s, Intent: n.intent})
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
	if att := Attention(&n.s); n.s.Node+"/"+string(n.s.Phase)+"/"+att != n.upserted {
		_ = workflow.UpsertTypedSearchAttributes(ctx, AttrNode.ValueSet(n.s.Node), AttrPhase.ValueSet(string(n.s.Phase)), AttrAttention.ValueSet(att))
		n.upserted = n.s.Node + "/" + string(n.s.Phase) + "/" + att
	}
	workflow.SetCurrentDetails(ctx, Details(&n.s))
	// A node started by a fleet tells it how far it is, when that changes.
	if parent := workflow.GetInfo(ctx).ParentWorkflowExecution; parent != nil && !n.quiet {
		p := NodeProgress{Node: n.s.Node, Phase: n.s.Phase, Migrated: n.s.MigratedCount(), Modules: len(n.s.Modules)}
		if p != n.told {
			n.told = p
			n.toldSent = workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalNodeProgress, p)
		}
	}
}

func (n *node) event(ctx workflow.Context, text string) {
	n.s.Events = append(n.s.Events, Event{At: workflow.Now(ctx).UTC(), Text: text})
	if len(n.s.Events) > maxEvents {
		n.s.Events = n.s.Events[len(n.s.Events)-maxEvents:]
	}
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
