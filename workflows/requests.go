package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall/flipwire"
	"adoption/intent"
)

// RequestInput is the payload of every signal and update: the module for
// migrate and retry, nothing for flip and release. A retry without a module
// retries adoption itself after it failed.
type RequestInput struct {
	Module string `json:"module,omitempty"`
	// Plan, when set, replaces the node's plan when the request is served:
	// a fixed module definition or foundation port reaches a running
	// workflow this way.
	Plan *config.Plan `json:"plan,omitempty"`
	// NotAfter, when set, is the moment the sender stops waiting for the
	// request to be accepted. An Update cannot be withdrawn once sent: one
	// that reaches the workflow later (its worker was down) is refused, so
	// a request the CLI reported as not delivered never runs.
	NotAfter time.Time `json:"not_after,omitzero"`
	// Intent is the operator's signed request: it travels with the queued
	// request into every activity of its operation, and the node checks it.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// RequestResult answers an update: where the request stands in the queue.
type RequestResult struct {
	Queued   int    `json:"queued"` // position in the queue, 1 = next
	Accepted string `json:"accepted"`
}

// Rejection is why a request was refused. Only signals record rejections
// (an update's caller gets the error itself); they change nothing else.
type Rejection struct {
	Kind   string `json:"kind"`
	Module string `json:"module,omitempty"`
	Reason string `json:"reason"`
}

func (n *node) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (State, error) { return n.s, nil }); err != nil {
		return err
	}
	if err := n.registerFlipTrip(ctx); err != nil {
		return err
	}
	for _, kind := range []string{SignalMigrate, SignalRetry, SignalFlip, SignalRelease, SignalPrune, SignalDriftAccept} {
		kind := kind
		if err := workflow.SetUpdateHandlerWithOptions(ctx, kind,
			func(ctx workflow.Context, in RequestInput) (RequestResult, error) {
				n.enqueue(ctx, kind, in)
				return RequestResult{Queued: len(n.s.Queue), Accepted: describe(kind, in.Module)}, nil
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
				return n.validateUpdate(ctx, kind, in)
			}},
		); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePreview,
		func(ctx workflow.Context, in RequestInput) (*flipwire.Preview, error) {
			// The node's own plan sent again changes nothing: not applied,
			// so no "plan updated" and no module state rebuilt.
			if in.Plan != nil && in.Plan.Hash() != n.s.Plan.Hash() {
				pv, err := n.previewPlan(interactive(ctx), *in.Plan)
				n.publish(ctx)
				return pv, err
			}
			// The operator waits for this answer: bounded (history.go).
			pv, err := n.preview(interactive(ctx))
			n.publish(ctx)
			return pv, err
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
			if err := late(ctx, in); err != nil {
				return err
			}
			if in.Plan != nil {
				if err := config.CheckPlan(*in.Plan, n.s.Node, n.s.Plan.Role); err != nil {
					return err
				}
			}
			if n.s.Phase == PhaseProbing || n.s.Phase == PhaseFailed || n.s.Phase == PhaseReleased || n.s.Phase == PhaseConverged {
				return fmt.Errorf("node %s is %s: a preview needs an adopted node", n.s.Node, n.s.Phase)
			}
			return n.validatePreview(in)
		}},
	); err != nil {
		return err
	}
	if err := n.registerResolve(ctx); err != nil {
		return err
	}
	if err := n.registerRehearse(ctx); err != nil {
		return err
	}
	if err := n.registerBrief(ctx); err != nil {
		return err
	}
	// The fleet's no-op ask (workflows/fleet/fleet_ask.go): only its delivery matters to
	// the fleet; taken here so that it is not reported as unhandled.
	workflow.Go(ctx, func(ctx workflow.Context) {
		for ask := workflow.GetSignalChannel(ctx, SignalFleetAsk); ; {
			ask.Receive(ctx, nil)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		n.takeSignals(ctx) // history.go: no request lost at continue-as-new
		sel := n.signalSelector(ctx)
		for {
			sel.Select(ctx)
		}
	})
	return nil
}

func (n *node) signalSelector(ctx workflow.Context) workflow.Selector {
	sel := workflow.NewSelector(ctx)
	for _, kind := range []string{SignalMigrate, SignalRetry, SignalFlip, SignalRelease, SignalPrune, SignalDriftAccept} {
		kind := kind
		sel.AddReceive(workflow.GetSignalChannel(ctx, kind), func(c workflow.ReceiveChannel, more bool) {
			var in RequestInput
			if !c.ReceiveAsync(&in) {
				return // a corrupt payload: dropped (and logged) by the SDK
			}
			n.onSignal(ctx, kind, in)
		})
	}
	return sel
}

// drainSignals takes in every signal already delivered, so a continue-as-new
// carries them in the queue instead of dropping them.
func (n *node) drainSignals(ctx workflow.Context) {
	for _, kind := range []string{SignalMigrate, SignalRetry, SignalFlip, SignalRelease, SignalPrune, SignalDriftAccept} {
		ch := workflow.GetSignalChannel(ctx, kind)
		var in RequestInput
		for ch.ReceiveAsync(&in) {
			n.onSignal(ctx, kind, in)
			in = RequestInput{}
		}
	}
}

func (n *node) onSignal(ctx workflow.Context, kind string, in RequestInput) {
	err := n.validate(kind, in)
	if err != nil {
		n.event(ctx, "refused "+describe(kind, in.Module)+": "+err.Error())
		workflow.GetLogger(ctx).Warn("request refused", "kind", kind, "module", in.Module, "reason", err.Error())
		n.publish(ctx)
		return
	}
	n.enqueue(ctx, kind, in)
}

func (n *node) enqueue(ctx workflow.Context, kind string, in RequestInput) {
	module := in.Module
	n.s.Queue = append(n.s.Queue, Request{Kind: kind, Module: module, Plan: in.Plan, At: workflow.Now(ctx).UTC(), Intent: in.Intent})
	if m := n.s.module(module); m != nil && (kind == SignalMigrate || kind == SignalRetry) {
		m.State = ModuleQueued
	}
	n.event(ctx, "queued "+describe(kind, module))
	n.publish(ctx)
}

// validate decides whether a request can be queued. It reads the state and
// changes nothing, so it is safe as an update validator.
func (n *node) validate(kind string, in RequestInput) error {
	module := in.Module
	if in.Plan != nil {
		if err := config.CheckPlan(*in.Plan, n.s.Node, n.s.Plan.Role); err != nil {
			return err
		}
	}
	if in.Plan != nil && module != "" {
		if _, ok := in.Plan.Module(module); !ok {
			names := make([]string, 0, len(in.Plan.Modules))
			for _, m := range in.Plan.Modules {
				names = append(names, m.Name)
			}
			return unknownModule(module, n.s.Node, names)
		}
	}
	switch n.s.Phase {
	case PhaseConverged, PhaseReleased:
		return fmt.Errorf("node %s is %s: the workflow takes no more requests", n.s.Node, n.s.Phase)
	}
	queued := func(k, mod string) bool {
		for _, r := range n.s.Queue {
			if r.Kind == k && r.Module == mod {
				return true
			}
		}
		return false
	}
	switch kind {
	case SignalMigrate, SignalRetry:
		if module == "" {
			if kind == SignalRetry {
				// Whether the adoption or the genesis failed is decided when
				// the retry is served (retryAdoption), not here: a refusal
				// from a validator that saw a state not yet caught up would
				// turn away a retry the operator was told to send.
				if queued(SignalRetry, "") {
					return fmt.Errorf("a retry of node %s's adoption is already queued", n.s.Node)
				}
				return nil
			}
			return fmt.Errorf("migrate needs a module name; modules of node %s: %v", n.s.Node, n.moduleNames())
		}
		m := n.s.module(module)
		if m == nil && in.Plan != nil {
			// A module new in the plan sent has no state until the request
			// is served (applyPlan adds it), so the checks below cannot see
			// it queued: the queue is asked instead. Queued twice, the
			// second cutover found it migrated and failed it for good.
			if queued(SignalMigrate, module) || queued(SignalRetry, module) {
				return fmt.Errorf("module %s is already queued (it is new in the plan a queued request carries): adopt status %s shows the queue", module, n.s.Node)
			}
			if n.s.Phase == PhaseFlipping {
				return fmt.Errorf("node %s is flipping: no module can migrate now", n.s.Node)
			}
			return nil
		}
		if m == nil {
			return unknownModule(module, n.s.Node, n.moduleNames())
		}
		if n.s.Phase == PhaseFlipping {
			return fmt.Errorf("node %s is flipping: no module can migrate now", n.s.Node)
		}
		switch {
		case kind == SignalMigrate && m.State == ModuleMigrated:
			return fmt.Errorf("module %s is already migrated", module)
		case kind == SignalMigrate && m.State == ModuleFailed:
			return fmt.Errorf("module %s failed its cutover (%s); use retry", module, m.LastError)
		case kind == SignalRetry && m.State != ModuleFailed:
			return fmt.Errorf("module %s has not failed (state %s): nothing to retry", module, m.State)
		case m.State == ModuleQueued || m.State == ModuleMigrating:
			return fmt.Errorf("module %s is already %s", module, m.State)
		}
	case SignalFlip:
		if queued(SignalFlip, "") {
			return fmt.Errorf("a flip of node %s is already queued", n.s.Node)
		}
		if n.committing() {
			return fmt.Errorf("node %s's flip %s is confirmed and in force, and waits for its commit: adopt retry %s", n.s.Node, n.s.Flip.ID, n.s.Node)
		}
		if n.s.Phase == PhaseFlipping || n.inFlip {
			return fmt.Errorf("node %s is already flipping", n.s.Node)
		}
	case SignalDriftAccept:
		if len(n.s.Drift) == 0 {
			return fmt.Errorf("node %s has no drift to accept", n.s.Node)
		}
		if queued(SignalDriftAccept, "") {
			return fmt.Errorf("accepting node %s's drift is already queued", n.s.Node)
		}
	case SignalPrune:
		if queued(SignalPrune, "") {
			return fmt.Errorf("a prune of node %s is already queued", n.s.Node)
		}
	case SignalRelease:
		if n.s.Phase == PhaseFlipping {
			return fmt.Errorf("node %s is flipping: a release now would leave the mesh's table and the predecessor's dormant firewall half way; wait until the flip is reverted or committed (a failed commit: adopt retry %s)", n.s.Node, n.s.Node)
		}
		if queued(SignalRelease, "") {
			return fmt.Errorf("a release of node %s is already queued", n.s.Node)
		}
	default:
		return fmt.Errorf("unknown request %q", kind)
	}
	return nil
}

// previewPlan previews the mesh's ruleset as plan p would derive it, with
// p in the request, and applies p to the workflow only if the node accepts
// it and nothing queued or started meanwhile would see its module change.
// A refused plan leaves the workflow's plan, modules and last preview as
// they were, with an event naming why.
func (n *node) previewPlan(ctx workflow.Context, p config.Plan) (*flipwire.Preview, error) {
	trial := n.s
	trial.Plan, trial.Modules = p, modulesFor(&n.s, p)
	var pv flipwire.Preview
	in := nodewire.PreviewInput{Plan: p.Ref(), Spec: MeshSpec(&trial), Decisions: n.nodeFileDecisions(false)}
	if err := n.exec(ctx, "flip preview (with the plan sent): which open ports would close", a.Preview, in, &pv); err != nil {
		n.event(ctx, "the plan sent with a preview was not applied: node "+n.s.Node+" refused it: "+errorMessage(err))
		return nil, err
	}
	if n.s.Phase != PhaseAdopted || n.previewPlanRefusal(p) != nil {
		err := fmt.Errorf("node %s accepted the plan sent with the preview, but the workflow moved on meanwhile (%s): the plan was not applied; preview again with it once node %s is adopted and idle (adopt status %s)", n.s.Node, n.s.Phase, n.s.Node, n.s.Node)
		n.event(ctx, err.Error())
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), Refused, nil)
	}
	n.applyPlan(ctx, p)
	if more := n.refusals(ctx); len(more) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, more...)
	}
	n.s.LastPreview = &pv
	return &pv, nil
}

// validatePreview refuses a preview while a flip is queued or in flight:
// the flip runs its own preview and applies exactly what that approved, so
// a preview now (and the plan it may carry) could only mislead, or change
// the plan under the flip.
func (n *node) validatePreview(in RequestInput) error {
	if in.Plan != nil && in.Plan.Node != n.s.Node {
		return fmt.Errorf("the plan sent is node %q's, not %s's; pass node %s's configuration", in.Plan.Node, n.s.Node, n.s.Node)
	}
	if n.inFlip || n.s.Phase == PhaseFlipping {
		id := ""
		if n.s.Flip != nil {
			id = " (flip " + n.s.Flip.ID + ")"
		}
		return fmt.Errorf("node %s is flipping%s: a preview now is not the flip's, and its plan would not reach the flip; preview again once the flip has ended (adopt status %s)", n.s.Node, id, n.s.Node)
	}
	for _, r := range n.s.Queue {
		if r.Kind == SignalFlip {
			return fmt.Errorf("a flip of node %s is queued: it runs its own preview, with the plan it carries; preview again once it has ended", n.s.Node)
		}
	}
	if in.Plan != nil {
		return n.previewPlanRefusal(*in.Plan)
	}
	return nil
}

// previewPlanRefusal says why a plan sent with a preview cannot be taken
// now. Unlike a plan sent with a queued request, it replaces the node's
// plan the moment the preview is accepted, whatever the main loop is
// doing: in the middle of a cutover that dropped the cutover's module
// (migrate then found no module and panicked, on every replay), and ahead
// of a queued migrate it changes what that migrate runs. So a plan that
// differs from the node's is taken only while the node is adopted and no
// queued request would see its module change; the node's own plan, sent
// again, changes nothing and is always fine.
func (n *node) previewPlanRefusal(p config.Plan) error {
	diff := config.Diff(n.s.Plan, p)
	if diff == nil {
		return nil
	}
	first := fmt.Sprintf("%s is %s in the node's plan, %s in the one sent", diff.Key, diff.A, diff.B)
	if n.s.Phase != PhaseAdopted {
		what := ""
		for _, m := range n.s.Modules {
			if m.State == ModuleMigrating {
				what = fmt.Sprintf(" (cutover of %s, step %q)", m.Name, m.Step)
			}
		}
		return fmt.Errorf("node %s is %s%s: the plan sent with this preview differs from the node's (%s) and would replace it at once, under the running step; preview without --config to see what the node's plan would flip, or with it once node %s is adopted again (adopt status %s)",
			n.s.Node, n.s.Phase, what, first, n.s.Node, n.s.Node)
	}
	for _, r := range n.s.Queue {
		if r.Module == "" {
			continue
		}
		was, had := n.s.Plan.Module(r.Module)
		now, has := p.Module(r.Module)
		change := ""
		switch {
		case had && !has:
			change = "drops it"
		case had && string(config.Plan{Modules: []config.ModulePlan{was}}.Canonical()) != string(config.Plan{Modules: []config.ModulePlan{now}}.Canonical()):
			change = "defines it otherwise"
		}
		if change != "" {
			return fmt.Errorf("module %s is queued (%s) and the plan sent with this preview %s: the queued cutover would run with a definition its request did not carry; preview with this plan once the request is served (adopt status %s), or send the plan with the request itself",
				r.Module, describe(r.Kind, r.Module), change, n.s.Node)
		}
	}
	return nil
}

func (n *node) moduleNames() []string {
	out := make([]string, 0, len(n.s.Modules))
	for _, m := range n.s.Modules {
		out = append(out, m.Name)
	}
	return out
}

func describe(kind, module string) string {
	if module == "" {
		return kind
	}
	return kind + " " + module
}

func unknownModule(module, node string, names []string) error {
	return fmt.Errorf("module %q is not in node %s's plan (modules: %v); add it to the configuration and pass it with the request", module, node, names)
}

// Refused is the error type of a validator's refusal; its details are the
// reasons, one per line, so the CLI can show them as a list.
const Refused = "Refused"

// late refuses a request that reaches the workflow after its sender gave
// up waiting for it to be accepted (workflow.Now is the time the workflow
// task started, on the server's clock).
func late(ctx workflow.Context, in RequestInput) error { return lateAfter(ctx, in.NotAfter) }

// lateAfter refuses a request that arrives after notAfter (zero: never).
func lateAfter(ctx workflow.Context, notAfter time.Time) error {
	if !notAfter.IsZero() && workflow.Now(ctx).After(notAfter) {
		return temporal.NewApplicationError(fmt.Sprintf("the request reached the workflow at %s, after its sender stopped waiting (%s): it was reported as not delivered and does not run; send it again",
			workflow.Now(ctx).UTC().Format(time.RFC3339), notAfter.UTC().Format(time.RFC3339)), "Late")
	}
	return nil
}

// validateUpdate is validate plus what only an Update can afford to check:
// its sender waits for the answer, so a request that could only fail once
// served (a flip before every module is migrated, a retry with nothing to
// retry) is refused now, with every reason, instead of queued. Validators
// do not run on replay, so this can grow without versioning; the signal
// path keeps validate alone and the preview's refusal.
func (n *node) validateUpdate(ctx workflow.Context, kind string, in RequestInput) error {
	if err := late(ctx, in); err != nil {
		return err
	}
	if err := n.validate(kind, in); err != nil {
		return err
	}
	var reasons []string
	switch kind {
	case SignalFlip:
		reasons = n.flipBlockers(in)
	case SignalMigrate:
		reasons = n.controlBlockers()
	case SignalRetry:
		if in.Module != "" {
			reasons = n.controlBlockers()
		}
		// A commit that failed waits for this retry (node.go serves it).
		if in.Module == "" && n.s.Phase != PhaseFailed && n.s.Phase != PhaseProbing && n.s.Genesis.State != "failed" && !n.committing() {
			reasons = append(reasons, fmt.Sprintf("node %s is %s and its genesis has not failed: there is nothing to retry", n.s.Node, n.s.Phase))
			for _, m := range n.s.Modules {
				if m.State == ModuleFailed {
					reasons = append(reasons, fmt.Sprintf("module %s failed (%s): retry it by name, adopt retry %s %s", m.Name, m.LastError, n.s.Node, m.Name))
				}
			}
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s refuses %s: %s", n.s.Node, describe(kind, in.Module), strings.Join(reasons, "; ")), Refused, nil, reasons)
}

// flipBlockers are the reasons a flip would be refused when served that do
// not need the node to be asked: the phase, a module that will not be
// migrated by then (migrations already queued ahead of the flip count as
// done), drift not reviewed. The preview, when served, checks the ports.
func (n *node) flipBlockers(in RequestInput) []string {
	var reasons []string
	switch n.s.Phase {
	case PhaseProbing, PhaseFailed:
		return []string{fmt.Sprintf("node %s is %s: a flip needs an adopted node", n.s.Node, n.s.Phase)}
	}
	plan := n.s.Plan
	if in.Plan != nil {
		plan = *in.Plan
	}
	for _, pm := range plan.Modules {
		m := n.s.module(pm.Name)
		switch {
		case m == nil:
			reasons = append(reasons, fmt.Sprintf("module %s is new in the plan and not migrated: run adopt migrate %s %s first", pm.Name, n.s.Node, pm.Name))
		case m.State == ModuleMigrated, m.State == ModuleMigrating, m.State == ModuleQueued:
		default:
			reasons = append(reasons, fmt.Sprintf("module %s is %s, not migrated: run adopt migrate %s %s first", m.Name, m.State, n.s.Node, m.Name))
		}
	}
	if g := n.genesisBlocker(false); g != "" {
		reasons = append(reasons, g)
	}
	if len(n.s.Drift) > 0 {
		reasons = append(reasons, fmt.Sprintf("%d drift(s) not reviewed: accept them (adopt drift accept %s) or restore the originals", len(n.s.Drift), n.s.Node))
	}
	return append(reasons, n.controlBlockers()...)
}

// controlBlockers refuse a migration or a flip while the node's watch
// reports the predecessor's control daemon running: it would rewrite what
// the mesh holds. The node refuses them too, measured when served
// (activities/control.go); this says so before anything is queued.
func (n *node) controlBlockers() []string {
	var reasons []string
	for _, d := range n.s.Control {
		reasons = append(reasons, fmt.Sprintf("the predecessor's control daemon is running on node %s and would rewrite what the mesh holds: %s", n.s.Node, d))
	}
	return reasons
}
