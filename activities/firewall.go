package activities

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/nodestate"
	"adoption/sockets"
)

// Marks opens ports through the found firewall as rules marked as the
// mesh's own, and removes only those.
type Marks interface {
	Open(node, owner string, ports []config.Port) (added, present []marks.MarkedRule, err error)
	Close(node, owner string) ([]marks.MarkedRule, error)
	Release(node string) ([]marks.MarkedRule, error)
	List(node string) ([]marks.MarkedRule, error)
}

// ForwardMarks opens a module's published host ports on the forward path
// of the found firewall (firewall.Marker has it). Close and Release remove
// these marks with the rest.
type ForwardMarks interface {
	OpenForward(node, owner string, ports []config.Port) (added, present []marks.MarkedRule, err error)
}

// ErrPortCollision is nodewire.ErrPortCollision.
const ErrPortCollision = nodewire.ErrPortCollision

// Collision is nodewire.Collision.
type Collision = nodewire.Collision

// CheckPortsResult is nodewire.CheckPortsResult.
type CheckPortsResult = nodewire.CheckPortsResult

// CheckFoundationPorts checks, before anything is raised, that every
// foundation port the node binds when placed on the overlay is free (the
// control node's genesis: all of them; a member's placement: the
// overlay's, config.Plan.Placement): no listening socket in the node's
// namespace (on any address, loopback included) and no container publishing
// it. Every collision is reported at once, naming its holder and the key to
// change; then the step fails non-retryably and nothing was changed.
func (a *Activities) CheckFoundationPorts(ctx context.Context, in ProbeInput) (*CheckPortsResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkIntent(ctx, auth, in.Intent, authority.StartIntent()); err != nil {
		return nil, err
	}
	// A genesis run again (a retry, or before a flip) finds the containers
	// an earlier one raised on their ports: those are the mesh's own (a
	// container of that name that is not the mesh's is refused by
	// RaiseFoundation, which takes nothing over).
	own := make([]string, 0, len(auth.Plan.FoundationContainers))
	for _, c := range auth.Plan.FoundationContainers {
		own = append(own, c.Name)
	}
	return a.checkFree(ctx, auth.Plan.Placement(), "nothing was opened or started", own...)
}

// checkFree checks that no listening socket in the node's namespace (on
// any address, loopback included) and no container holds any of ports,
// and refuses non-retryably naming every holder at once, the key to
// change, and that nothing was changed (done says what was not). The
// containers named own hold their ports by right.
func (a *Activities) checkFree(ctx context.Context, ports []config.NamedPort, done string, own ...string) (*CheckPortsResult, error) {
	ls, err := a.Sockets.Listeners()
	if err != nil {
		return nil, fmt.Errorf("list listening sockets: %w", err)
	}
	ls = slices.DeleteFunc(attributePublished(ls, a.Engine.Report(ctx)), func(l sockets.Listener) bool {
		return l.Container != "" && slices.Contains(own, l.Container)
	})
	res := &CheckPortsResult{Checked: len(ports)}
	for _, fp := range ports {
		if h := holders(ls, fp.Port); h != "" {
			res.Collisions = append(res.Collisions, Collision{Name: fp.Name, Port: fp.Port, Holder: h, Key: "foundation.ports." + fp.Name})
		}
	}
	if len(res.Collisions) > 0 {
		msgs := make([]string, 0, len(res.Collisions))
		for _, c := range res.Collisions {
			msgs = append(msgs, c.String())
		}
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d foundation port(s) collide; %s: %s", len(msgs), done, strings.Join(msgs, "; ")),
			ErrPortCollision, nil, res)
	}
	return res, nil
}

// holders names everything holding port, or "".
func holders(ls []sockets.Listener, p config.Port) string {
	seen := map[string]bool{}
	var out []string
	for _, l := range ls {
		if l.Port == p.Num && l.Proto == p.Proto && !seen[l.Holder()] {
			seen[l.Holder()] = true
			out = append(out, l.Holder())
		}
	}
	sort.Strings(out)
	return strings.Join(out, " and ")
}

// RulesInput is nodewire.RulesInput.
type RulesInput = nodewire.RulesInput

// RulesResult is nodewire.RulesResult.
type RulesResult = nodewire.RulesResult

// OpenRules opens an owner's ports through the found firewall as marked
// rules. It is idempotent: a mark already present is not added again.
func (a *Activities) OpenRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkIntent(ctx, auth, in.Intent, authority.OwnerIntent(in.Owner)); err != nil {
		return nil, err
	}
	fm, err := a.checkOpen(auth, in.Owner, in.Ports, in.Forward)
	if err != nil {
		return nil, err
	}
	if err := a.refuseUnsupported(ctx); err != nil {
		return nil, err
	}
	added, present, err := a.Marks.Open(auth.Plan.Node, in.Owner, in.Ports)
	if err != nil {
		return nil, fmt.Errorf("open %s's ports %v through the found firewall: %w", in.Owner, in.Ports, err)
	}
	if len(in.Forward) > 0 {
		fa, fp, err := fm.OpenForward(auth.Plan.Node, in.Owner, in.Forward)
		if err != nil {
			return nil, fmt.Errorf("open %s's published ports %v on the forward path: %w", in.Owner, in.Forward, err)
		}
		added, present = append(added, fa...), append(present, fp...)
	}
	if err := a.State.RecordOpened(in.Owner); err != nil {
		return nil, fmt.Errorf("record that node %s placed %s's marks: %w", a.Node, in.Owner, err)
	}
	// A module whose cutover is only the opening of its ports (no
	// container, files or health check) is confirmed by it (gates.go).
	if m, ok := auth.Plan.Module(in.Owner); ok && m.Container == nil && len(m.Files) == 0 && m.Health == nil {
		if err := a.confirmCutover(ctx, auth, m, in.Intent); err != nil {
			return nil, err
		}
	}
	a.Failpoints.Hit("open-rules")
	return &RulesResult{Added: added, Present: present}, nil
}

// checkOpen refuses, before anything changes on the node, an opening the
// node's own configuration does not make (ports for owner, and host ports
// its container publishes); it returns the worker's forward-path marker
// when forward asks for one, and refuses if the worker has none.
func (a *Activities) checkOpen(auth *authority.Authority, owner string, ports, forward []config.Port) (ForwardMarks, error) {
	if err := authority.CheckOwnerPorts(auth, owner, ports); err != nil {
		return nil, err
	}
	if err := authority.CheckOwnerForward(auth, owner, forward); err != nil {
		return nil, err
	}
	if len(forward) == 0 {
		return nil, nil
	}
	fm, ok := a.Marks.(ForwardMarks)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s publishes %v, but this worker's marks cannot open the forward path", owner, forward), authority.ErrBadOwner, nil)
	}
	return fm, nil
}

// CloseRules removes an owner's marked rules, and only those.
func (a *Activities) CloseRules(ctx context.Context, in RulesInput) (*RulesResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkUndo(ctx, auth, in.Intent, authority.OwnerIntent(in.Owner))
	if err != nil {
		return nil, err
	}
	// Closing removes only the mesh's own marks, so an owner no longer
	// declared (a module taken out of the file) can still be closed.
	if !config.ValidName(in.Owner) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("owner %q is invalid: it must be %s", in.Owner, config.NameRule), authority.ErrBadOwner, nil)
	}
	// Closing is a rollback's last step: only a module's marks the node
	// placed for it, while its cutover is not confirmed, and never under a
	// flip or on a converged node.
	if in.Owner == flip.OwnerFoundation || in.Owner == "management" {
		return nil, gateRefusal(ErrNodeState, "the %s's marks on node %s are closed only by a release, never one owner at a time", in.Owner, a.Node)
	}
	if err := a.flipSettled("closing of " + in.Owner + "'s marks"); err != nil {
		return nil, err
	}
	if rec, err := a.confirmedCutover(in.Owner); err != nil {
		return nil, err
	} else if rec != nil {
		return nil, gateRefusal(ErrCutoverConfirmed, "module %s's cutover was confirmed on node %s at %s: its ports stay open until the flip", in.Owner, a.Node, rec.Confirmed.Format(time.RFC3339))
	}
	placed, err := a.Marks.List(a.Node)
	if err != nil {
		return nil, fmt.Errorf("list node %s's marked rules: %w", a.Node, err)
	}
	mine := false
	for _, r := range placed {
		mine = mine || r.Mark.Owner == in.Owner
	}
	var removed []marks.MarkedRule
	if mine { // none placed for this owner: nothing to close
		if removed, err = a.Marks.Close(in.Plan.Node, in.Owner); err != nil {
			return nil, fmt.Errorf("close %s's marked rules: %w", in.Owner, err)
		}
	}
	if err := a.State.ForgetOpened(in.Owner); err != nil {
		return nil, fmt.Errorf("forget that node %s placed %s's marks: %w", a.Node, in.Owner, err)
	}
	a.spendIntent(ctx, auth, in.Intent, v) // the end of a rolled back cutover
	return &RulesResult{Removed: removed}, nil
}

// ReconcileInput is nodewire.ReconcileInput.
type ReconcileInput = nodewire.ReconcileInput

// reconcile puts back marked rules that vanished (the found firewall was
// reloaded by its own boot-time service, or someone deleted one by hand).
// It needs no intent, so it re-places only the marks the node placed
// itself (placedOwners): an owner the request lists that the node never
// opened for is left out, named in NotPlaced, and nothing of it changes.
func (a *Activities) reconcile(ctx context.Context, in ReconcileInput) (*RulesResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	var all []string
	for _, o := range append(slices.Collect(maps.Keys(in.Owners)), slices.Collect(maps.Keys(in.Forward))...) {
		if !slices.Contains(all, o) {
			all = append(all, o)
		}
	}
	sort.Strings(all)
	fms := map[string]ForwardMarks{}
	for _, o := range all {
		fm, err := a.checkOpen(auth, o, in.Owners[o], in.Forward[o])
		if err != nil {
			return nil, err
		}
		fms[o] = fm
	}
	placed, err := a.placedOwners()
	if err != nil {
		return nil, err
	}
	res := &RulesResult{}
	var owners []string
	for _, o := range all {
		if placed[o] {
			owners = append(owners, o)
		} else {
			res.NotPlaced = append(res.NotPlaced, o)
		}
	}
	if len(owners) == 0 {
		return res, nil
	}
	if err := a.refuseUnsupported(ctx); err != nil {
		return nil, err
	}
	for _, o := range owners {
		heartbeat(ctx, "reconcile "+o)
		if ports := in.Owners[o]; len(ports) > 0 {
			added, present, err := a.Marks.Open(auth.Plan.Node, o, ports)
			if err != nil {
				return nil, fmt.Errorf("reassert %s's marked rules: %w", o, err)
			}
			res.Added = append(res.Added, added...)
			res.Present = append(res.Present, present...)
		}
		if fwd := in.Forward[o]; len(fwd) > 0 {
			added, present, err := fms[o].OpenForward(auth.Plan.Node, o, fwd)
			if err != nil {
				return nil, fmt.Errorf("reassert %s's marked rules on the forward path: %w", o, err)
			}
			res.Added = append(res.Added, added...)
			res.Present = append(res.Present, present...)
		}
	}
	return res, nil
}

// placedOwners are the owners whose marks the node placed itself, by its
// own records: none unless it is adopted; those OpenRules recorded; the
// foundation (opened at adoption) and every module with a cutover under
// way or confirmed, for a node adopted before that record.
func (a *Activities) placedOwners() (map[string]bool, error) {
	_, adopted, err := a.State.Adopted()
	if err != nil || !adopted {
		return nil, err
	}
	opened, err := a.State.Opened()
	if err != nil {
		return nil, fmt.Errorf("read the owners node %s placed marks for: %w", a.Node, err)
	}
	placed := map[string]bool{flip.OwnerFoundation: true}
	for o := range opened {
		placed[o] = true
	}
	recs, err := a.State.Cutovers()
	if err != nil {
		return nil, fmt.Errorf("read node %s's cutover records: %w", a.Node, err)
	}
	for m, r := range recs {
		placed[m] = placed[m] || r.State == nodestate.CutoverMigrating || r.State == nodestate.CutoverConfirmed
	}
	return placed, nil
}

// ReleaseResult is nodewire.ReleaseResult.
type ReleaseResult = nodewire.ReleaseResult

// Release removes every marked rule of the node, leaving the found firewall
// exactly as found, and clears the adopted marker.
func (a *Activities) Release(ctx context.Context, in ProbeInput) (*ReleaseResult, error) {
	auth, err := a.authorize(ctx, in.Plan)
	if err != nil {
		return nil, err
	}
	v, err := a.checkIntent(ctx, auth, in.Intent, []authority.Form{{Actions: []string{authority.ActRelease}}})
	if err != nil {
		return nil, err
	}
	// The node's own state first: never under a flip that may be in force
	// (the mesh's table and the predecessor's dormant firewall would be
	// left half way), never on a converged node (the mesh's table is its
	// firewall). A node not adopted has nothing to release: a release
	// already done, answered again.
	if err := a.flipSettled("release"); err != nil {
		return nil, err
	}
	if _, adopted, err := a.State.Adopted(); err != nil {
		return nil, err
	} else if !adopted {
		placed, err := a.Marks.List(a.Node)
		if err != nil {
			return nil, fmt.Errorf("list node %s's marked rules: %w", a.Node, err)
		}
		if len(placed) > 0 {
			return nil, gateRefusal(ErrNodeState, "node %s is not adopted (no marker under state_dir), yet %d marked rule(s) of it are in the firewall: not released by this agent; inspect them (adopt-worker probe)", a.Node, len(placed))
		}
		if err := a.State.ClearOwner(); err != nil {
			return nil, fmt.Errorf("clear the owner record: %w", err)
		}
		a.spendIntent(ctx, auth, in.Intent, v)
		return &ReleaseResult{}, nil
	}
	removed, err := a.Marks.Release(in.Plan.Node)
	if err != nil {
		return nil, fmt.Errorf("remove marked rules: %w", err)
	}
	a.Failpoints.Hit("release-removed")
	enabled, err := a.enableDisabledUnits(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.State.ClearAdopted(); err != nil {
		return nil, fmt.Errorf("clear the adopted marker: %w", err)
	}
	if err := a.State.ClearOwner(); err != nil {
		return nil, fmt.Errorf("clear the owner record: %w", err)
	}
	if err := a.State.ForgetOpened(""); err != nil {
		return nil, fmt.Errorf("forget the owners whose marks the node placed: %w", err)
	}
	a.spendIntent(ctx, auth, in.Intent, v)
	return &ReleaseResult{Removed: removed, Units: enabled}, nil
}

func (a *Activities) refuseUnsupported(ctx context.Context) error {
	fw, err := a.Firewall.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("inspect the found firewall: %w", err)
	}
	if fw.Unsupported != "" {
		return temporal.NewNonRetryableApplicationError(fw.Unsupported, ErrUnsupportedFW, nil)
	}
	return nil
}
