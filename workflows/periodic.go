// Periodic phase: while a node is adopted, marked rules are reasserted and
// drift from what adoption recorded is looked for, each on its own timer.

package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"adoption/activities/nodewire"
	"adoption/custody"
)

func (n *node) reconcileDue() bool {
	return n.s.Plan.ReconcileInterval > 0 && len(n.s.Opened) > 0
}

func (n *node) driftDue() bool {
	return n.s.Plan.DriftInterval > 0 && n.s.Phase == PhaseAdopted
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
	var res nodewire.DriftResult
	in := nodewire.DriftInput{Plan: n.s.Plan.Ref(), Custody: n.driftBaseline(), Firewall: n.s.FirewallFingerprint}
	if err := n.exec(ctx, "drift: compare custody files and the found firewall with what was adopted", a.CheckDrift, in, &res); err != nil {
		n.event(ctx, "drift check failed: "+errorMessage(err))
		return
	}
	n.takeDrift(ctx, res.Items)
	n.publish(ctx)
}

// takeDrift records the drift found, and says so when it changed.
func (n *node) takeDrift(ctx workflow.Context, items []nodewire.DriftItem) {
	if len(items) != len(n.s.Drift) {
		if len(items) == 0 {
			n.event(ctx, "drift resolved: the node is as adopted again")
		} else {
			whats := make([]string, 0, len(items))
			for _, it := range items {
				whats = append(whats, it.What)
			}
			n.event(ctx, fmt.Sprintf("drift: %s; accept with adopt drift accept %s, or restore the original", strings.Join(whats, "; "), n.s.Node))
		}
	}
	n.s.Drift = items
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
	var res nodewire.DriftResult
	in := nodewire.DriftInput{Plan: n.s.Plan.Ref(), Custody: n.driftBaseline(), Firewall: n.s.FirewallFingerprint, Intent: n.intent}
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
	var res nodewire.RulesResult
	in := nodewire.ReconcileInput{Plan: n.s.Plan.Ref(), Owners: n.s.Opened, Forward: n.s.OpenedForward}
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
