// Adopt phase: probe the node, take custody of its found files while its
// found firewall stays in force, raise the foundation on the control node
// (genesis), and release: everything adoption did, undone.

package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall/flipwire"
)

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
		n.intent, n.serving, n.s.Refused = req.Intent, req, nil
		if req.Plan != nil && req.Kind == SignalRetry { // the fix travels with it
			n.applyPlan(ctx, *req.Plan)
		}
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
	var probe nodewire.ProbeReport
	if err := n.exec(ctx, "probe the node (read-only)", a.Probe, nodewire.ProbeInput{Plan: n.s.Plan.Ref()}, &probe); err != nil {
		return err
	}
	n.s.Probe = &probe
	n.event(ctx, fmt.Sprintf("probed: firewall %s, %d listeners, %d containers, %d declared files",
		probe.Firewall.Kind, len(probe.Sockets), len(probe.Containers.Containers), len(probe.Files)))
	if probe.Firewall.Unsupported != "" {
		return errors.New(probe.Firewall.Unsupported)
	}
	var res nodewire.AdoptResult
	in := nodewire.AdoptInput{Plan: n.s.Plan.Ref(), WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Intent: n.intent}
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
// collides), the foundation's containers raised (a failure rolls back what
// this attempt raised), then the ports something listens on opened through
// the found firewall as marked rules (published ones on the forward path
// too). A member's genesis is its placement: the overlay's port, checked
// free at adoption, checked again; nothing listens on it yet, so nothing
// is opened.
func (n *node) genesis(ctx workflow.Context) {
	if n.s.Genesis.State == "done" {
		return
	}
	step, member := "genesis", n.s.Plan.Role != "control"
	if member {
		if len(n.s.Plan.Placement()) == 0 {
			return
		}
		step = "placement"
	}
	fail := func(err error) {
		n.s.Genesis = StepState{State: "failed", Error: errorMessage(err)}
		n.event(ctx, step+" failed: "+errorMessage(err)+fmt.Sprintf("; fix it, then: adopt retry %s", n.s.Node))
	}
	var chk nodewire.CheckPortsResult
	if err := n.exec(ctx, step+": check the foundation's ports are free", a.CheckFoundationPorts, nodewire.ProbeInput{Plan: n.s.Plan.Ref(), Intent: n.intent}, &chk); err != nil {
		fail(err)
		return
	}
	if member {
		n.s.Genesis = StepState{State: "done"}
		n.event(ctx, fmt.Sprintf("placed: %d foundation port(s) free for the overlay", chk.Checked))
		return
	}
	found := n.s.Plan.Foundation
	var forward []config.Port
	raised := ""
	if len(n.s.Plan.FoundationContainers) > 0 {
		var res nodewire.FoundationResult
		if err := n.exec(ctx, "genesis: raise the foundation's containers", a.RaiseFoundation, nodewire.ProbeInput{Plan: n.s.Plan.Ref(), Intent: n.intent}, &res); err != nil {
			fail(err)
			return
		}
		found = res.Listening
		raised = fmt.Sprintf("%d container(s) raised (%s); ", len(res.Raised), strings.Join(res.Raised, ", "))
		for _, fp := range res.Silent {
			raised += fmt.Sprintf("foundation port %s %s not opened: nothing listens on it; ", fp.Name, fp.Port)
		}
	}
	ports := make([]config.Port, 0, len(found))
	for _, fp := range found {
		ports = append(ports, fp.Port)
		for _, c := range n.s.Plan.FoundationContainers {
			if slices.Contains(publishedPorts(config.ModulePlan{Container: &c}), fp.Port) {
				forward = append(forward, fp.Port)
			}
		}
	}
	if err := n.openRules(ctx, flipwire.OwnerFoundation, ports, forward...); err != nil {
		fail(err)
		return
	}
	n.s.Genesis = StepState{State: "done"}
	n.event(ctx, fmt.Sprintf("genesis: %s%d foundation port(s) free and opened through the found firewall", raised, len(ports)))
}

// openRules opens an owner's ports as marked rules and records them as
// expected, so reconcile reasserts them. forward are host ports the owner's
// container publishes: opened on the forward path too.
func (n *node) openRules(ctx workflow.Context, owner string, ports []config.Port, forward ...config.Port) error {
	if len(ports) == 0 && len(forward) == 0 {
		return nil
	}
	var res nodewire.RulesResult
	in := nodewire.RulesInput{Plan: n.s.Plan.Ref(), Owner: owner, Ports: ports, Forward: forward, Intent: n.intent}
	if err := n.exec(ctx, fmt.Sprintf("open %s's ports %s through the found firewall", owner, portList(ports)), a.OpenRules, in, &res); err != nil {
		return err
	}
	if n.s.Opened == nil {
		n.s.Opened = map[string][]config.Port{}
	}
	n.s.Opened[owner] = ports
	if len(forward) > 0 {
		if n.s.OpenedForward == nil {
			n.s.OpenedForward = map[string][]config.Port{}
		}
		n.s.OpenedForward[owner] = forward
	} else {
		delete(n.s.OpenedForward, owner)
	}
	n.s.Marks = mergeMarks(withoutOwner(n.s.Marks, owner), append(res.Added, res.Present...))
	return nil
}

func (n *node) release(ctx workflow.Context) bool {
	var res nodewire.ReleaseResult
	if err := n.exec(ctx, "release: remove every marked rule", a.Release, nodewire.ProbeInput{Plan: n.s.Plan.Ref(), Intent: n.intent}, &res); err != nil {
		n.s.LastError = "release: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return false
	}
	n.s.Marks, n.s.Opened, n.s.OpenedForward = nil, nil, nil
	n.event(ctx, fmt.Sprintf("released: %d marked rule(s) removed, the found firewall as found", len(res.Removed)))
	n.setPhase(ctx, PhaseReleased)
	return true
}
