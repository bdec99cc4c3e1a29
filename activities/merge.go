// The per-key merge of a declared file whose module names load-bearing keys
// (files[].keep) or a per-key format: the base is the file as taken into
// custody, "node" is the file now, "mesh" is the module's content. Conflicts
// (a key the node changed since custody and the mesh sets otherwise) refuse
// the cutover before anything changes, by path and key, never by value;
// an operator's decision (adopt resolve) settles each.
package activities

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
	"adoption/intent"
	"adoption/keyfile"
)

// ErrFileConflict is the error type of a cutover refused on conflicting
// keys; its details are the []FileConflict.
const ErrFileConflict = "FileConflict"

// FileConflict is a conflicting key of a declared file: names only.
type FileConflict struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	Why  string `json:"why"`
}

// FileDecision is an operator's choice for a conflicting key.
type FileDecision struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	Take string `json:"take"` // node or mesh
	// Intent is the operator's signed resolve of this decision.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// fileReader is what a per-key merge reads on the node: custody's blob of
// the file as found, and the file now. The custody store has both; a store
// without them cannot merge, which is said when a file needs it.
type fileReader interface {
	Blob(sum string) ([]byte, error)
	Current(path string) ([]byte, custody.FileState, error)
}

// FileMerge is the outcome of merging one file, by key name.
type FileMerge struct {
	Path      string         `json:"path"`
	Format    string         `json:"format,omitempty"` // "" when replaced whole
	Conflicts []FileConflict `json:"conflicts,omitempty"`
	Kept      []string       `json:"kept,omitempty"`
	Changed   []string       `json:"changed,omitempty"`
	Added     []string       `json:"added,omitempty"`
	Removed   []string       `json:"removed,omitempty"`
}

// merged says what converging f would write: the mesh's content as it is
// for a file replaced whole, else the three-way merge with the decisions
// recorded for its path. The bytes stay on the node.
func (a *Activities) merged(f config.FilePlan, mesh []byte, decisions []FileDecision) ([]byte, FileMerge, error) {
	out := FileMerge{Path: f.Path}
	format := f.MergeFormat()
	if format == "" {
		return mesh, out, nil
	}
	out.Format = string(format)
	base, now, err := a.mergeSides(f)
	if err != nil {
		return nil, out, err
	}
	res := keyfile.Merge(format, base, now, mesh, f.Keep, takesFor(f.Path, decisions))
	for _, c := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, FileConflict{Path: f.Path, Key: c.Key, Why: c.Why})
	}
	out.Kept, out.Changed, out.Added, out.Removed = res.Kept, res.Changed, res.Added, res.Removed
	return res.Content, out, nil
}

// mergeSides reads what a per-key merge of f starts from, on the node: the
// file as taken into custody (base) and the file now.
func (a *Activities) mergeSides(f config.FilePlan) (base, now []byte, err error) {
	r, ok := a.Files.(fileReader)
	if !ok {
		return nil, nil, fmt.Errorf("the custody store of node %s cannot read %s for a per-key merge", a.Node, f.Path)
	}
	rec, found, err := a.Files.Record(f.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("custody record of %s: %w", f.Path, err)
	}
	now, st, err := r.Current(f.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s for a per-key merge: %w", f.Path, err)
	}
	if st.Link != "" {
		return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s is a symlink to %s: a per-key merge does not see through it; declare the target's path instead, or remove keep and format to replace it whole",
			f.Path, st.Link), ErrBadPath, nil)
	}
	switch {
	case !found:
		base = now // not in custody yet: what is there now is the base
	case rec.Found && rec.Link == "":
		if base, err = r.Blob(rec.SHA256); err != nil {
			return nil, nil, fmt.Errorf("custody blob of %s: %w", f.Path, err)
		}
	}
	return base, now, nil
}

func takesFor(path string, decisions []FileDecision) map[string]keyfile.Take {
	takes := map[string]keyfile.Take{}
	for _, d := range decisions {
		if d.Path == path {
			takes[d.Key] = keyfile.Take(d.Take)
		}
	}
	return takes
}

// ErrNoConflict is the error type of a decision on a key that is not in
// conflict on the node now: refused, nothing was changed.
const ErrNoConflict = "NoConflict"

// decisionsInConflict is the node's own gate on decisions: a decision settles
// only a key in conflict now, as the node computes it from its own files
// (custody's copy as found, the file now, the mesh's content of its own
// configuration), never because a request says so. A decision on any
// other key is refused by path and key, unless it is moot: it changes
// nothing the merge writes (take mesh where the mesh's value stands
// anyway, take node where the node already has the mesh's value or keeps
// the key), as a resumed converge or a retry after a rollback sends the
// decisions recorded before. A decision on a file of another module, or on
// a file replaced whole, is refused too.
func (a *Activities) decisionsInConflict(auth *authority.Authority, m config.ModulePlan, decisions []FileDecision) error {
	files := map[string]config.FilePlan{}
	for _, f := range m.Files {
		files[f.Path] = f
	}
	for _, d := range decisions {
		f, ok := files[d.Path]
		switch {
		case !ok:
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: decision on %s %s: %s is not a file of module %s on node %s; nothing was changed", d.Path, d.Key, d.Path, m.Name, a.Node), ErrNoConflict, nil)
		case f.MergeFormat() == "":
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: decision on %s %s: %s is replaced whole (no keep, no format), so no key of it is in conflict; nothing was changed", d.Path, d.Key, d.Path), ErrNoConflict, nil)
		}
	}
	for _, f := range m.Files {
		takes := takesFor(f.Path, decisions)
		if len(takes) == 0 {
			continue
		}
		mesh, ok := auth.Contents[f.SHA256]
		if !ok {
			continue // preflight names missing content on its own
		}
		format := f.MergeFormat()
		base, now, err := a.mergeSides(f)
		if err != nil {
			return err
		}
		conflict := map[string]bool{}
		for _, c := range keyfile.Merge(format, base, now, mesh, f.Keep, nil).Conflicts {
			conflict[c.Key] = true
		}
		// The decisions on keys in conflict, every other conflict taken
		// from the mesh: the outcome a moot decision must not change.
		settled := map[string]keyfile.Take{}
		for k := range conflict {
			settled[k] = keyfile.TakeMesh
		}
		for k, t := range takes {
			if conflict[keyfile.NormalizeKey(format, k)] {
				settled[k] = t
			}
		}
		want := keyfile.Merge(format, base, now, mesh, f.Keep, settled).Content
		for _, k := range sortedKeys(takes) {
			if conflict[keyfile.NormalizeKey(format, k)] {
				continue
			}
			with := map[string]keyfile.Take{k: takes[k]}
			for sk, st := range settled {
				with[sk] = st
			}
			if got := keyfile.Merge(format, base, now, mesh, f.Keep, with).Content; !bytes.Equal(got, want) {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"refused: decision on %s %s (take %s): key %s is not in conflict on node %s now (the node has not changed it since custody, or the mesh sets the same value), and a decision settles only a conflicting key; the mesh's value stands. Nothing was changed",
					f.Path, k, takes[k], k, a.Node), ErrNoConflict, nil)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]keyfile.Take) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// conflictsOf merges every declared file of a module without writing, and
// refuses (non-retryable, the conflicts in the details) if any key
// conflicts. It is the check preflight and the converge step both make.
func (a *Activities) conflictsOf(auth *authority.Authority, m config.ModulePlan, decisions []FileDecision) ([]FileMerge, error) {
	for _, d := range decisions {
		if d.Take != string(keyfile.TakeNode) && d.Take != string(keyfile.TakeMesh) {
			return nil, authority.NotDeclared("decision on %s %s: take %q is neither node nor mesh", d.Path, d.Key, d.Take)
		}
		if err := authority.CheckDeclared(auth, d.Path); err != nil {
			return nil, err
		}
	}
	if err := a.decisionsInConflict(auth, m, decisions); err != nil {
		return nil, err
	}
	var merges []FileMerge
	var conflicts []FileConflict
	for _, f := range m.Files {
		mesh, ok := auth.Contents[f.SHA256]
		if !ok {
			continue // preflight names missing content on its own
		}
		_, fm, err := a.merged(f, mesh, decisions)
		if err != nil {
			return nil, err
		}
		merges = append(merges, fm)
		conflicts = append(conflicts, fm.Conflicts...)
	}
	if len(conflicts) == 0 {
		return merges, nil
	}
	var parts []string
	for _, c := range conflicts {
		parts = append(parts, c.Path+" "+c.Key)
	}
	return merges, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"module %s: %d key(s) changed on node %s since custody and set otherwise by the mesh: %s; decide each with `adopt resolve %s PATH KEY --take node|mesh`, then `adopt retry %s %s`; nothing was changed",
		m.Name, len(conflicts), a.Node, strings.Join(parts, ", "), a.Node, a.Node, m.Name), ErrFileConflict, nil, conflicts)
}
