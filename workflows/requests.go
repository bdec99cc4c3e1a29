package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"adoption/config"
	"adoption/firewall"
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
	for _, kind := range []string{SignalMigrate, SignalRetry, SignalFlip, SignalRelease, SignalPrune, SignalDriftAccept} {
		kind := kind
		if err := workflow.SetUpdateHandlerWithOptions(ctx, kind,
			func(ctx workflow.Context, in RequestInput) (RequestResult, error) {
				n.enqueue(ctx, kind, in)
				return RequestResult{Queued: len(n.s.Queue), Accepted: describe(kind, in.Module)}, nil
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
				return n.validate(kind, in)
			}},
		); err != nil {
			return err
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePreview,
		func(ctx workflow.Context, in RequestInput) (*firewall.Preview, error) {
			if in.Plan != nil {
				n.applyPlan(ctx, *in.Plan)
			}
			// The operator waits for this answer: bounded (history.go).
			pv, err := n.preview(interactive(ctx))
			n.publish(ctx)
			return pv, err
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in RequestInput) error {
			if in.Plan != nil {
				if err := checkPlan(*in.Plan, n.s.Node, n.s.Plan.Role); err != nil {
					return err
				}
			}
			if n.s.Phase == PhaseProbing || n.s.Phase == PhaseFailed || n.s.Phase == PhaseReleased || n.s.Phase == PhaseConverged {
				return fmt.Errorf("node %s is %s: a preview needs an adopted node", n.s.Node, n.s.Phase)
			}
			return nil
		}},
	); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		if n.bounded { // set by NodeMigration before this coroutine first runs
			n.takeSignals(ctx) // history.go: no request lost at continue-as-new
		}
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
	if err := n.validate(kind, in); err != nil {
		n.event(ctx, "refused "+describe(kind, in.Module)+": "+err.Error())
		workflow.GetLogger(ctx).Warn("request refused", "kind", kind, "module", in.Module, "reason", err.Error())
		n.publish(ctx)
		return
	}
	n.enqueue(ctx, kind, in)
}

func (n *node) enqueue(ctx workflow.Context, kind string, in RequestInput) {
	module := in.Module
	n.s.Queue = append(n.s.Queue, Request{Kind: kind, Module: module, Plan: in.Plan, At: workflow.Now(ctx).UTC()})
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
		if err := checkPlan(*in.Plan, n.s.Node, n.s.Plan.Role); err != nil {
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
			return nil // a module new in the plan sent: it is added when the request is served
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
		if n.s.Phase == PhaseFlipping {
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
		if queued(SignalRelease, "") {
			return fmt.Errorf("a release of node %s is already queued", n.s.Node)
		}
	default:
		return fmt.Errorf("unknown request %q", kind)
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
