// Flip phase: the preview that must approve, the flip of the firewall to
// the mesh's derived ruleset, its confirmation or revert, and the commit.

package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/flipwire"
	"adoption/witness"
)

// preview compares what the found firewall opens now with what the mesh's
// derived ruleset would open, and adds the workflow's own refusals: a
// module not migrated, drift not reviewed.
func (n *node) preview(ctx workflow.Context) (*flipwire.Preview, error) {
	return n.previewSpec(ctx, MeshSpec(&n.s))
}

// previewSpec previews one spec: the flip previews the spec it then
// applies, so a plan edited in between cannot slip into the flip.
func (n *node) previewSpec(ctx workflow.Context, spec flipwire.MeshSpec) (*flipwire.Preview, error) {
	var pv flipwire.Preview
	in := nodewire.PreviewInput{Plan: n.s.Plan.Ref(), Spec: spec, Decisions: n.nodeFileDecisions(false)}
	if err := n.exec(ctx, "flip preview: which open ports would close", a.Preview, in, &pv); err != nil {
		return nil, err
	}
	if more := n.refusals(ctx); len(more) > 0 {
		pv.Approved = false
		pv.Reasons = append(pv.Reasons, more...)
	}
	n.s.LastPreview = &pv
	return &pv, nil
}

// refusals are the workflow's own reasons to refuse a flip, whatever the
// node's preview says: a control node whose genesis has not succeeded (the
// foundation's ports would drop out of the derived ruleset), a module not
// migrated, drift not reviewed.
func (n *node) refusals(ctx workflow.Context) []string { return n.refusalsWith(ctx, n.s.Drift) }

// refusalsWith is refusals with drift as given (a briefing's, measured now).
func (n *node) refusalsWith(ctx workflow.Context, drift []nodewire.DriftItem) []string {
	var why []string
	if g := n.genesisBlocker(true); g != "" {
		why = append(why, g)
	}
	for _, m := range n.s.Modules {
		if m.State != ModuleMigrated {
			why = append(why, fmt.Sprintf("module %s is %s, not migrated: run adopt migrate %s %s first", m.Name, m.State, n.s.Node, m.Name))
		}
	}
	if len(drift) > 0 {
		why = append(why, fmt.Sprintf("%d drift(s) not reviewed: accept them (adopt drift accept %s) or restore the originals", len(drift), n.s.Node))
	}
	return why
}

// genesisBlocker is why a flip must wait for the control node's genesis,
// or "": until it succeeds the foundation is not raised nor its ports
// opened, and the derived ruleset would leave them out unnamed. A request's
// validator (served false) refuses only a failed one: one not yet run or
// still running is decided when the flip is served.
func (n *node) genesisBlocker(served bool) string {
	if n.s.Plan.Role != "control" || n.s.Genesis.State == "done" || (!served && n.s.Genesis.State != "failed") {
		return ""
	}
	return fmt.Sprintf("node %s is the control node and its genesis has not succeeded (%s): the foundation's ports %s would not be in the mesh's ruleset; fix the genesis error and run adopt retry %s first",
		n.s.Node, cmp.Or(n.s.Genesis.State, "not run"), foundationPorts(n.s.Plan), n.s.Node)
}

// foundationPorts lists the plan's foundation ports as name port, for
// messages.
func foundationPorts(p config.Plan) string {
	out := make([]string, 0, len(p.Foundation))
	for _, fp := range p.Foundation {
		out = append(out, fp.Name+" "+fp.Port.String())
	}
	return strings.Join(out, ", ")
}

// Flip states as the workflow reports them. "reverted" is said only when
// the node says it reverted the flip.
const (
	FlipStateFlipping   = "flipping"
	FlipStateFlipped    = "flipped"
	FlipStateConfirmed  = "confirmed"
	FlipStateCommitting = "committing" // confirmed and in force; the commit failed and waits for a retry
	FlipStateCommitted  = "committed"
	FlipStateReverted   = "reverted"
	FlipStateNotApplied = "not-applied"
)

// previewApart is the preview apart after the node refused a flip as
// stale: the approving preview, or nil
// when the flip ends here (the preview failed, or refused: said either
// way) with the phase back at prevPhase.
func (n *node) previewApart(ctx workflow.Context, spec flipwire.MeshSpec, refused func(*flipwire.Preview), prevPhase Phase) *flipwire.Preview {
	pv, err := n.previewSpec(ctx, spec)
	switch {
	case err != nil:
		n.setPhase(ctx, prevPhase)
		n.s.LastError = "flip preview: " + errorMessage(err)
		n.event(ctx, n.s.LastError)
		return nil
	case !pv.Approved:
		n.setPhase(ctx, prevPhase)
		refused(pv)
		return nil
	}
	return pv
}

// flip runs the flip in one round trip to the node (fliptrip.go): the
// node's own preview and, only if it approves, the flip of exactly the
// ruleset it approved, the found firewall out of force and the mesh's in,
// in one step; then the confirmation within flip.confirm_timeout (or the
// revert, which the node's watchdog does by itself if this workflow
// cannot), then the commit.
func (n *node) flip(ctx workflow.Context) {
	n.inFlip = true
	defer func() { n.inFlip = false }()
	// A control node's genesis with no recorded outcome (a state carried
	// from before it was recorded, a node made control by a plan) is run
	// first: an outcome not known is never flipped over. It is idempotent.
	if n.s.Plan.Role == "control" && n.s.Genesis.State == "" {
		n.genesis(ctx)
	}
	spec := MeshSpec(&n.s)
	refused := func(pv *flipwire.Preview) {
		n.s.LastError = "flip refused by the preview: " + strings.Join(pv.Reasons, "; ")
		n.event(ctx, n.s.LastError)
	}
	// The workflow's own refusals need no round trip to refuse, but the
	// operator is shown the whole preview: those flips preview apart.
	if len(n.refusals(ctx)) > 0 {
		pv, err := n.previewSpec(ctx, spec)
		switch {
		case err != nil:
			n.s.LastError = "flip preview: " + errorMessage(err)
			n.event(ctx, n.s.LastError)
			return
		case !pv.Approved:
			refused(pv)
			return
		}
	}
	n.flipTrip(ctx, spec, refused, false)
}

// commit makes a confirmed flip final. A commit that fails leaves the node
// flipping (the flip confirmed and in force, the reason in status) until
// `adopt retry` runs it again; converged is reached only once the node says
// the predecessor's leftovers are gone.
func (n *node) commit(ctx workflow.Context) {
	id := n.s.Flip.ID
	n.s.Flip.State = FlipStateConfirmed
	// The found firewall is out of force for good: its marks are not
	// reasserted any more.
	n.s.Opened, n.s.OpenedForward = nil, nil
	var cm nodewire.FlipResult
	if err := n.exec(ctx, "flip: commit (boot-time ruleset, save and remove the predecessor's firewall, prune predecessors)", a.CommitFlip, nodewire.ConfirmInput{Plan: n.s.Plan.Ref(), ID: id, Intent: n.intent}, &cm); err != nil {
		n.s.Flip.Error = "commit: " + errorMessage(err)
		n.s.Flip.State = FlipStateCommitting
		n.s.LastError = fmt.Sprintf("flip %s is confirmed and in force, but its commit failed: %s; fix the cause, then: adopt retry %s", id, errorMessage(err), n.s.Node)
		n.event(ctx, n.s.LastError)
		n.publish(ctx)
		return
	}
	n.committed(ctx, cm)
}

// committed records a commit the node reports done.
func (n *node) committed(ctx workflow.Context, cm nodewire.FlipResult) {
	n.s.Flip.State, n.s.Flip.Listing, n.s.Flip.Error = FlipStateCommitted, cm.Listing, ""
	n.s.LastError = ""
	n.converged(ctx)
}

// converged ends the flip: the found firewall's chains are gone, and the
// marks with them.
func (n *node) converged(ctx workflow.Context) {
	n.s.Marks, n.s.Opened, n.s.OpenedForward = nil, nil, nil
	n.event(ctx, "converged: the mesh's own ruleset is the node's firewall")
	n.setPhase(ctx, PhaseConverged)
}

// committing reports whether a confirmed flip waits for its commit.
func (n *node) committing() bool {
	return n.s.Phase == PhaseFlipping && n.s.Flip != nil && n.s.Flip.State == FlipStateCommitting
}

// revertFlip asks the node to revert a flip and returns what the node says
// the flip is now: reverted, not-applied, or confirmed (it stays; the
// caller commits it). It asks until the node answers: until then the flip
// counts as in force, and the node's watchdog reverts it at the deadline by
// itself.
func (n *node) revertFlip(ctx workflow.Context, id string) string {
	for {
		var res nodewire.FlipResult
		err := n.exec(ctx, "flip: revert to the firewall as it was", a.RevertFlip, nodewire.ConfirmInput{Plan: n.s.Plan.Ref(), ID: id, Intent: n.intent}, &res)
		var ae *temporal.ApplicationError
		switch {
		case err == nil && res.State == FlipStateNotApplied:
			return FlipStateNotApplied
		case err == nil:
			return FlipStateReverted
		case errors.As(err, &ae) && ae.Type() == nodewire.ErrFlipConfirmed:
			return FlipStateConfirmed
		case errors.As(err, &ae) && ae.Type() == nodewire.ErrFlipReverted:
			return FlipStateReverted
		}
		n.s.Waiting = fmt.Sprintf("the node has not acknowledged the revert of flip %s (%s): it counts as in force, and the node's watchdog reverts it at its deadline; asking again", id, errorMessage(err))
		n.event(ctx, n.s.Waiting)
		n.publish(ctx)
		if err := workflow.Sleep(ctx, 30*time.Second); err != nil {
			return FlipStateReverted // the workflow is ending; the watchdog remains
		}
	}
}

// MeshSpec derives what the mesh's own ruleset opens: the management
// ports, the foundation's (once genesis opened them) and every migrated
// module's, with the host ports its container publishes for forwarding.
func MeshSpec(s *State) flipwire.MeshSpec {
	spec := flipwire.MeshSpec{Node: s.Node, Drop: s.Plan.Drop, Widen: s.Plan.Widen, DropClasses: s.Plan.DropClasses, WidenClasses: s.Plan.WidenClasses}
	for _, p := range s.Plan.ManagementPorts {
		spec.Input = append(spec.Input, flipwire.Allow{Port: p, Owner: "management"})
	}
	if s.Genesis.State == "done" && s.Plan.Role == "control" {
		for _, fp := range s.Plan.Foundation {
			spec.Input = append(spec.Input, flipwire.Allow{Port: fp.Port, Owner: flipwire.OwnerFoundation})
		}
		for _, p := range s.OpenedForward[flipwire.OwnerFoundation] {
			spec.Forward = append(spec.Forward, flipwire.Allow{Port: p, Owner: flipwire.OwnerFoundation})
		}
	}
	for _, m := range s.Plan.Modules {
		if st := s.module(m.Name); st == nil || st.State != ModuleMigrated {
			continue
		}
		for _, p := range m.Ports {
			spec.Input = append(spec.Input, flipwire.Allow{Port: p, Owner: m.Name})
		}
		for _, p := range publishedPorts(m) {
			spec.Forward = append(spec.Forward, flipwire.Allow{Port: p, Owner: m.Name})
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
		if p, ok := config.HostPort(h); ok {
			out = append(out, p)
		}
	}
	return out
}

// witnessInput is what the witness dials (flip.witness.*, else the
// addresses of the node's probe); false, with an event, when
// flip.witness.disabled is set.
func (n *node) witnessInput(ctx workflow.Context) (witness.Input, bool) {
	in := witness.Input{Node: n.s.Node, Ports: n.s.Plan.ManagementPorts, PlanHash: n.s.Plan.Hash()}
	if w := n.s.Plan.Witness; w != nil && w.Disabled {
		n.event(ctx, "not witnessed from outside the node: flip.witness.disabled is set")
		return in, false
	}
	if w := n.s.Plan.Witness; w != nil {
		in.From, in.Netns = w.From, w.Netns
		if w.Address != "" {
			in.Addresses = []string{w.Address}
		}
	}
	if len(in.Addresses) == 0 && n.s.Probe != nil {
		node := n.s.Probe.Firewall.Node
		for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
			for _, a := range node.Own(fam) {
				in.Addresses = append(in.Addresses, a.String())
			}
		}
	}
	return in, true
}
