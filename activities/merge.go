// The per-key merge of declared files, as the activities ask it: package
// filemerge holds the merge, its conflicts and the node's gate on
// decisions; these are its names here (the wire format stays theirs).
package activities

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/filemerge"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/firewall/flip"
)

// ErrFileConflict is the error type of a refusal on conflicting keys; its
// details are the []FileConflict. ErrNoConflict: a decision on a key that
// is not in conflict on the node now, refused.
const (
	ErrFileConflict = nodewire.ErrFileConflict
	ErrNoConflict   = filemerge.ErrNoConflict
)

type (
	FileConflict = nodewire.FileConflict
	FileDecision = nodewire.FileDecision
	FileMerge    = nodewire.FileMerge
)

func (a *Activities) merger() filemerge.Merger { return filemerge.Merger{Node: a.Node, Files: a.Files} }

// merged says what converging f would write (filemerge.Merger.Merged).
func (a *Activities) merged(f config.FilePlan, mesh []byte, decisions []FileDecision) ([]byte, FileMerge, error) {
	return a.merger().Merged(f, mesh, decisions)
}

// conflictsOf merges every declared file of a module without writing, and
// refuses (non-retryable, the conflicts in the details) if any key
// conflicts. It is the check preflight and the converge step both make.
// The decisions on the module's container are not the files' (spec).
func (a *Activities) conflictsOf(auth *authority.Authority, m config.ModulePlan, decisions []FileDecision) ([]FileMerge, error) {
	return a.merger().Check(auth, "module "+m.Name, fmt.Sprintf("adopt retry %s %s", a.Node, m.Name), m.Files, fileDecisions(m, decisions))
}

// nodeFileMerges merges the node files (they converge at the flip) with
// the decisions on them, without writing: each with its fates and the
// keyed digest of what it would write. Conflicts refuse, as conflictsOf.
func (a *Activities) nodeFileMerges(auth *authority.Authority, decisions []FileDecision) ([]FileMerge, error) {
	m := a.merger()
	if d, ok := a.Files.(interface{ Digest([]byte) string }); ok {
		m.Digest = d.Digest
	}
	return m.Check(auth, "node files", "adopt flip "+a.Node, auth.Plan.NodeFiles, decisions)
}

// previewNodeFiles gives a flip's preview the node files' fates, read from
// the node with the decisions recorded for them. A conflict, or a file the
// merge cannot read, refuses the flip, by path and key: it is found before
// the firewall's transaction, never after it.
// merges and err are nodeFileMerges' answer.
func (a *Activities) previewNodeFiles(pv *flip.Preview, merges []FileMerge, err error) {
	pv.NodeFiles = merges
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return
	case errors.As(err, &ae) && ae.Type() == ErrFileConflict:
		for _, fm := range merges {
			for _, c := range fm.Conflicts {
				pv.Reasons = append(pv.Reasons, fmt.Sprintf("node file %s key %s: %s; decide it with `adopt resolve %s %s %s --take node|mesh`",
					c.Path, c.Key, c.Why, a.Node, c.Path, c.Key))
			}
		}
	default:
		pv.Reasons = append(pv.Reasons, "node files: "+message(err))
	}
	pv.Approved = false
}
