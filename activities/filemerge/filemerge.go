// The per-key merge of declared files on the node (a module's files at its
// cutover, the node files at the flip): the base is the file as taken into
// custody (as first found, even after a drift was accepted), "node" is the
// file now, "mesh" is the configuration's content. Conflicts (a key the node
// changed since custody and the mesh sets otherwise) refuse before anything
// changes, by path and key, never by value; an operator's decision (adopt
// resolve) settles each. Nothing here writes.
package filemerge

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

// Error types: a refusal on conflicting keys (its details are the
// []Conflict), and a decision on a key that is not in conflict.
const (
	ErrFileConflict = "FileConflict"
	ErrNoConflict   = "NoConflict"
	errBadPath      = "BadPath" // activities.ErrBadPath, the same wire name
)

type (
	// Conflict is a conflicting key of a declared file: names only.
	Conflict = keyfile.FileConflict
	// Merge is the outcome of merging one file, by key name.
	Merge = keyfile.FileMerge
)

// Decision is an operator's choice for a conflicting key.
type Decision struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	Take string `json:"take"` // node or mesh
	// Intent is the operator's signed resolve of this decision.
	Intent *intent.Signed `json:"intent,omitempty"`
}

// Store is what a merge reads from custody: the record of a path; a store
// that also reads blobs and the file now (Reader) can merge per key.
type Store interface {
	Record(path string) (custody.Record, bool, error)
}

// Reader is custody's blob of the file as found, and the file now.
type Reader interface {
	Blob(sum string) ([]byte, error)
	Current(path string) ([]byte, custody.FileState, error)
}

// Merger merges the declared files of one node.
type Merger struct {
	Node  string
	Files Store
	// Digest, when set, gives each merge that writes the keyed digest
	// of what it would write.
	Digest func([]byte) string
}

// Merged says what converging f would write: the mesh's content as it is
// for a file replaced whole, else the three-way merge with the decisions
// recorded for its path. The bytes stay on the node.
func (m Merger) Merged(f config.FilePlan, mesh []byte, decisions []Decision) ([]byte, Merge, error) {
	out := Merge{Path: f.Path}
	format := f.MergeFormat()
	if format == "" {
		if m.Digest != nil {
			out.Digest = m.Digest(mesh)
		}
		return mesh, out, nil
	}
	out.Format = string(format)
	base, now, err := m.Sides(f)
	if err != nil {
		return nil, out, err
	}
	res := keyfile.Merge(format, base, now, mesh, f.Keep, TakesFor(f.Path, decisions))
	for _, c := range res.Conflicts {
		out.Conflicts = append(out.Conflicts, Conflict{Path: f.Path, Key: c.Key, Why: c.Why})
	}
	out.Kept, out.Changed, out.Added, out.Removed = res.Kept, res.Changed, res.Added, res.Removed
	if m.Digest != nil && len(out.Conflicts) == 0 {
		out.Digest = m.Digest(res.Content)
	}
	if m.Digest != nil {
		out.Keys = m.keyDigests(format, now, mesh, res)
	}
	return res.Content, out, nil
}

// keyDigests names each key the merge changes, adds or removes by the
// keyed digests of its value now and as written; with conflicts, only
// those, by the node's value and the mesh's.
func (m Merger) keyDigests(format keyfile.Format, now, mesh []byte, res keyfile.Result) []keyfile.KeyDigest {
	nv, mv := keyfile.Parse(format, now).Values(), keyfile.Parse(format, mesh).Values()
	ov := keyfile.Parse(format, res.Content).Values()
	d := func(vs map[string]string, k string) string {
		if v, ok := vs[k]; ok {
			return m.Digest([]byte(v))
		}
		return ""
	}
	var out []keyfile.KeyDigest
	changes := [][]string{res.Changed, res.Added, res.Removed}
	if len(res.Conflicts) > 0 {
		changes = nil // nothing would be written: only the conflicts are named
	}
	for _, ks := range changes {
		for _, k := range ks {
			out = append(out, keyfile.KeyDigest{Key: k, Old: d(nv, k), New: d(ov, k)})
		}
	}
	for _, c := range res.Conflicts {
		out = append(out, keyfile.KeyDigest{Key: c.Key, Old: d(nv, c.Key), New: d(mv, c.Key)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Sides reads what a per-key merge of f starts from, on the node: the file
// as taken into custody (base: as first found, a drift accepted since
// does not move it) and the file now.
func (m Merger) Sides(f config.FilePlan) (base, now []byte, err error) {
	r, ok := m.Files.(Reader)
	if !ok {
		return nil, nil, fmt.Errorf("the custody store of node %s cannot read %s for a per-key merge", m.Node, f.Path)
	}
	rec, found, err := m.Files.Record(f.Path)
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
			f.Path, st.Link), errBadPath, nil)
	}
	switch {
	case !found:
		base = now // not in custody yet: what is there now is the base
	case rec.Base != "":
		if base, err = r.Blob(rec.Base); err != nil {
			return nil, nil, fmt.Errorf("custody blob of %s as first found: %w", f.Path, err)
		}
	case rec.Found && rec.Link == "":
		if base, err = r.Blob(rec.SHA256); err != nil {
			return nil, nil, fmt.Errorf("custody blob of %s: %w", f.Path, err)
		}
	}
	return base, now, nil
}

// TakesFor are the decisions on path, by key.
func TakesFor(path string, decisions []Decision) map[string]keyfile.Take {
	takes := map[string]keyfile.Take{}
	for _, d := range decisions {
		if d.Path == path {
			takes[d.Key] = keyfile.Take(d.Take)
		}
	}
	return takes
}

// Check validates decisions and merges every file without writing; it
// refuses (non-retryable, the conflicts in the details) if any key
// conflicts. what names the files' owner in the refusal ("module app",
// "node files"), next is what to run once decided. It is the check a
// preflight, the converge step and the flip make.
func (m Merger) Check(auth *authority.Authority, what, next string, files []config.FilePlan, decisions []Decision) ([]Merge, error) {
	for _, d := range decisions {
		if d.Take != string(keyfile.TakeNode) && d.Take != string(keyfile.TakeMesh) {
			return nil, authority.NotDeclared("decision on %s %s: take %q is neither node nor mesh", d.Path, d.Key, d.Take)
		}
		if err := authority.CheckDeclared(auth, d.Path); err != nil {
			return nil, err
		}
	}
	if err := m.decisionsInConflict(auth, what, files, decisions); err != nil {
		return nil, err
	}
	var merges []Merge
	var conflicts []Conflict
	for _, f := range files {
		mesh, ok := auth.Contents[f.SHA256]
		if !ok {
			continue // preflight names missing content on its own
		}
		_, fm, err := m.Merged(f, mesh, decisions)
		if err != nil {
			return nil, err
		}
		merges = append(merges, fm)
		conflicts = append(conflicts, fm.Conflicts...)
	}
	if len(conflicts) == 0 {
		return merges, nil
	}
	return merges, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"%s: %d key(s) changed on node %s since custody and set otherwise by the mesh: %s; decide each with `adopt resolve %s PATH KEY --take node|mesh`, then `%s`; nothing was changed",
		what, len(conflicts), m.Node, Names(conflicts), m.Node, next), ErrFileConflict, nil, conflicts)
}

// Has reports whether merges name the conflict of path and key.
func Has(merges []Merge, path, key string) bool {
	for _, fm := range merges {
		for _, c := range fm.Conflicts {
			if c.Path == path && c.Key == key {
				return true
			}
		}
	}
	return false
}

// Drop takes the conflict of path and key off merges (a decision settled
// it) and counts the conflicts left.
func Drop(merges []Merge, path, key string) int {
	left := 0
	for i, fm := range merges {
		var keep []Conflict
		for _, c := range fm.Conflicts {
			if c.Path != path || c.Key != key {
				keep = append(keep, c)
			}
		}
		merges[i].Conflicts, left = keep, left+len(keep)
	}
	return left
}

// Names lists conflicts as "PATH KEY, ...".
func Names(cs []Conflict) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, c.Path+" "+c.Key)
	}
	return strings.Join(parts, ", ")
}

// decisionsInConflict is the node's own gate on decisions: a decision settles
// only a key in conflict now, as the node computes it from its own files
// (custody's copy as found, the file now, the mesh's content of its own
// configuration), never because a request says so. A decision on any
// other key is refused by path and key, unless it is moot: it changes
// nothing the merge writes (take mesh where the mesh's value stands
// anyway, take node where the node already has the mesh's value or keeps
// the key), as a resumed converge or a retry after a rollback sends the
// decisions recorded before. A decision on a file not among files, or on
// a file replaced whole, is refused too.
func (m Merger) decisionsInConflict(auth *authority.Authority, what string, files []config.FilePlan, decisions []Decision) error {
	byPath := map[string]config.FilePlan{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	for _, d := range decisions {
		f, ok := byPath[d.Path]
		switch {
		case !ok:
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: decision on %s %s: %s is not among the files of %s on node %s; nothing was changed", d.Path, d.Key, d.Path, what, m.Node), ErrNoConflict, nil)
		case f.MergeFormat() == "":
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("refused: decision on %s %s: %s is replaced whole (no keep, no format), so no key of it is in conflict; nothing was changed", d.Path, d.Key, d.Path), ErrNoConflict, nil)
		}
	}
	for _, f := range files {
		takes := TakesFor(f.Path, decisions)
		if len(takes) == 0 {
			continue
		}
		mesh, ok := auth.Contents[f.SHA256]
		if !ok {
			continue // preflight names missing content on its own
		}
		format := f.MergeFormat()
		base, now, err := m.Sides(f)
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
					f.Path, k, takes[k], k, m.Node), ErrNoConflict, nil)
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
