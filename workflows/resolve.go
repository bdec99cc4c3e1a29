// Conflicts reconciled by decision: a module's cutover refused on keys of
// its files that the node changed since custody and the mesh sets otherwise,
// or on its container's variables and labels that the predecessor's sets
// otherwise (path: the module's name, key: env:NAME or label:NAME),
// records them in the module's state, a flip's preview those of the node
// files in its answer; `adopt resolve NODE PATH KEY --take node|mesh`
// records the operator's decision (the side, never the value), and the
// next migrate or retry (the next preview or flip, for a node file)
// carries the decisions to the node.
package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"adoption/activities/filemerge"
	"adoption/activities/nodewire"
	"adoption/containers/cutoverwire"
	"adoption/intent"
)

// UpdateResolve records a decision on a conflicting key.
const UpdateResolve = "resolve"

// ResolveInput is adopt resolve's request.
type ResolveInput struct {
	Path     string    `json:"path"`
	Key      string    `json:"key"`
	Take     string    `json:"take"` // node or mesh
	NotAfter time.Time `json:"not_after,omitzero"`
	// Intent is the operator's signed decision, carried with it to the node.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// ResolveResult says what was recorded and what is left.
type ResolveResult struct {
	Module    string `json:"module"`
	Recorded  string `json:"recorded"`
	Remaining int    `json:"remaining"` // conflicts of the module still to decide
	Next      string `json:"next"`
}

func (n *node) registerResolve(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateResolve,
		func(ctx workflow.Context, in ResolveInput) (ResolveResult, error) {
			m := n.conflictOwner(in.Path, in.Key)
			d := Decision{Path: in.Path, Key: in.Key, Take: in.Take, At: workflow.Now(ctx).UTC(), Intent: in.Intent}
			kept := n.s.Decisions[:0:0]
			for _, old := range n.s.Decisions {
				if old.Path != d.Path || old.Key != d.Key {
					kept = append(kept, old)
				}
			}
			n.s.Decisions = append(kept, d)
			rec := fmt.Sprintf("%s %s: take the %s's value", in.Path, in.Key, in.Take)
			n.event(ctx, "decided "+rec)
			if m == nil { // a node file's, named by the last preview
				left := filemerge.Drop(n.lastNodeFiles(), in.Path, in.Key)
				n.publish(ctx)
				next := fmt.Sprintf("adopt preview %s, then adopt flip %s", n.s.Node, n.s.Node)
				if left > 0 {
					next = fmt.Sprintf("decide the %d other conflict(s) of the node files", left)
				}
				return ResolveResult{Recorded: rec, Remaining: left, Next: next}, nil
			}
			var left []FileConflict
			for _, c := range m.Conflicts {
				if c.Path != in.Path || c.Key != in.Key {
					left = append(left, c)
				}
			}
			m.Conflicts = left
			n.publish(ctx)
			next := fmt.Sprintf("adopt retry %s %s", n.s.Node, m.Name)
			if len(left) > 0 {
				next = fmt.Sprintf("decide the %d other conflict(s) of module %s", len(left), m.Name)
			}
			return ResolveResult{Module: m.Name, Recorded: rec, Remaining: len(left), Next: next}, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, in ResolveInput) error {
			if !in.NotAfter.IsZero() && workflow.Now(ctx).After(in.NotAfter) {
				return errors.New("the request reached the workflow after its sender stopped waiting: it was reported as not delivered; send it again")
			}
			if in.Take != "node" && in.Take != "mesh" {
				return fmt.Errorf("--take %q: say node (keep the node's value) or mesh (take the module's)", in.Take)
			}
			if n.s.Phase == PhaseConverged || n.s.Phase == PhaseReleased {
				return fmt.Errorf("node %s is %s: nothing is left to decide", n.s.Node, n.s.Phase)
			}
			if mp, ok := n.s.Plan.Module(in.Path); ok {
				// A module's container: its variables and labels.
				if mp.Container == nil {
					return fmt.Errorf("module %s of node %s runs no container: only a container's env:NAME or label:NAME, or a declared file's PATH KEY, can be decided", in.Path, n.s.Node)
				}
				if _, _, ok := cutoverwire.SplitKey(in.Key); !ok {
					return fmt.Errorf("key %q of module %s: say env:NAME for an environment variable or label:NAME for a label of its container", in.Key, in.Path)
				}
			} else {
				declared := false
				for _, p := range n.s.Plan.DeclaredPaths() {
					declared = declared || p == in.Path
				}
				if !declared {
					return fmt.Errorf("no module of node %s declares %s, and no module is named so; `adopt brief %s` lists the declared files", n.s.Node, in.Path, n.s.Node)
				}
			}
			if n.conflictOwner(in.Path, in.Key) == nil && !filemerge.Has(n.lastNodeFiles(), in.Path, in.Key) {
				return fmt.Errorf("%s %s has no conflict on node %s: only keys a cutover or the flip's preview refused on can be decided (see `adopt status %s`, `adopt preview %s`)", in.Path, in.Key, n.s.Node, n.s.Node, n.s.Node)
			}
			return nil
		}},
	)
}

// conflictOwner is the module whose state holds the conflict, or nil.
func (n *node) conflictOwner(path, key string) *ModuleState {
	for i := range n.s.Modules {
		for _, c := range n.s.Modules[i].Conflicts {
			if c.Path == path && c.Key == key {
				return &n.s.Modules[i]
			}
		}
	}
	return nil
}

// lastNodeFiles are the node files' fates as the last preview gave them.
func (n *node) lastNodeFiles() []nodewire.FileMerge {
	if n.s.LastPreview == nil {
		return nil
	}
	return n.s.LastPreview.NodeFiles
}

// nodeFileDecisions are the decisions on the node files, for the node's
// preview and flip; signed only for the flip, which applies them.
func (n *node) nodeFileDecisions(signed bool) []nodewire.FileDecision {
	var out []nodewire.FileDecision
	for _, d := range n.s.Decisions {
		for _, f := range n.s.Plan.NodeFiles {
			if f.Path == d.Path {
				fd := nodewire.FileDecision{Path: d.Path, Key: d.Key, Take: d.Take}
				if signed {
					fd.Intent = d.Intent
				}
				out = append(out, fd)
			}
		}
	}
	return out
}

// decisionsFor are the decisions on the module's files and its container
// (by the module's name), for the node.
func (n *node) decisionsFor(module string) []nodewire.FileDecision {
	mp, ok := n.s.Plan.Module(module)
	if !ok {
		return nil
	}
	var out []nodewire.FileDecision
	for _, d := range n.s.Decisions {
		mine := d.Path == module && mp.Container != nil
		for _, f := range mp.Files {
			mine = mine || f.Path == d.Path
		}
		if mine {
			out = append(out, nodewire.FileDecision{Path: d.Path, Key: d.Key, Take: d.Take, Intent: d.Intent})
		}
	}
	return out
}

// recordConflicts keeps the conflicts a refused preflight named, so status,
// the preview and the briefing show them until decided.
func recordConflicts(m *ModuleState, err error) {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != nodewire.ErrFileConflict || !ae.HasDetails() {
		return
	}
	var cs []nodewire.FileConflict
	if ae.Details(&cs) != nil {
		return
	}
	m.Conflicts = nil
	for _, c := range cs {
		m.Conflicts = append(m.Conflicts, FileConflict{Path: c.Path, Key: c.Key, Why: c.Why})
	}
}
