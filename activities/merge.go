// The per-key merge of a declared file whose module names load-bearing keys
// (files[].keep) or a per-key format: the base is the file as taken into
// custody, "node" is the file now, "mesh" is the module's content. Conflicts
// (a key the node changed since custody and the mesh sets otherwise) refuse
// the cutover before anything changes, by path and key, never by value;
// an operator's decision (adopt resolve) settles each.
package activities

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

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
	r, ok := a.Files.(fileReader)
	if !ok {
		return nil, out, fmt.Errorf("the custody store of node %s cannot read %s for a per-key merge", a.Node, f.Path)
	}
	var base []byte
	rec, found, err := a.Files.Record(f.Path)
	if err != nil {
		return nil, out, fmt.Errorf("custody record of %s: %w", f.Path, err)
	}
	now, st, err := r.Current(f.Path)
	if err != nil {
		return nil, out, fmt.Errorf("read %s for a per-key merge: %w", f.Path, err)
	}
	if st.Link != "" {
		return nil, out, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"%s is a symlink to %s: a per-key merge does not see through it; declare the target's path instead, or remove keep and format to replace it whole",
			f.Path, st.Link), ErrBadPath, nil)
	}
	switch {
	case !found:
		base = now // not in custody yet: what is there now is the base
	case rec.Found && rec.Link == "":
		if base, err = r.Blob(rec.SHA256); err != nil {
			return nil, out, fmt.Errorf("custody blob of %s: %w", f.Path, err)
		}
	}
	takes := map[string]keyfile.Take{}
	for _, d := range decisions {
		if d.Path == f.Path {
			takes[d.Key] = keyfile.Take(d.Take)
		}
	}
	res := keyfile.Merge(format, base, now, mesh, f.Keep, takes)
	for _, c := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, FileConflict{Path: f.Path, Key: c.Key, Why: c.Why})
	}
	out.Kept, out.Changed, out.Added, out.Removed = res.Kept, res.Changed, res.Added, res.Removed
	return res.Content, out, nil
}

// conflictsOf merges every declared file of a module without writing, and
// refuses (non-retryable, the conflicts in the details) if any key
// conflicts. It is the check preflight and the converge step both make.
func (a *Activities) conflictsOf(auth *Authority, m config.ModulePlan, decisions []FileDecision) ([]FileMerge, error) {
	for _, d := range decisions {
		if d.Take != string(keyfile.TakeNode) && d.Take != string(keyfile.TakeMesh) {
			return nil, notDeclared("decision on %s %s: take %q is neither node nor mesh", d.Path, d.Key, d.Take)
		}
		if err := checkDeclared(auth, d.Path); err != nil {
			return nil, err
		}
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
