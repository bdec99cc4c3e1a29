// Adopted phase's two jobs: marked rules reasserted, and drift from what
// adoption recorded looked for (both by the node's watch, watch.go), and
// what the workflow keeps of them.

package workflows

import (
	"fmt"
	"strings"

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
