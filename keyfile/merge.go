// The three-way merge of a declared file, per key. The base is the file as
// taken into custody at adoption, "node" is the file on the node now, "mesh"
// is the module's content. The rules, in order:
//
//   - a key in keep takes the node's lines (the operator said it is
//     load-bearing), wherever the mesh puts it or if the mesh omits it;
//   - a key with a recorded decision takes the side decided;
//   - a key the node changed since custody and the mesh sets to something
//     else is a conflict: nothing is written until someone decides;
//   - otherwise the mesh's content stands, line for line.
//
// Conflicts name keys only, never values: they travel to the workflow.
package keyfile

import (
	"sort"
	"strconv"
	"strings"
)

// Take is a decision on a conflicting key.
type Take string

const (
	TakeNode Take = "node"
	TakeMesh Take = "mesh"
)

// Conflict is a key both sides changed. It holds no value on purpose.
type Conflict struct {
	Key string `json:"key"`
	// Why says which sides changed it, for the operator.
	Why string `json:"why"`
}

// FileConflict is a conflicting key of a declared file, by path: names
// only, as it travels to the workflow.
type FileConflict struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	Why  string `json:"why"`
}

// FileMerge is the outcome of merging one declared file, by key name, as
// a rehearsal or a flip's preview shows it. Digest is the node's keyed
// digest of what the merge would write (empty with conflicts): shown in
// place of any value.
type FileMerge struct {
	Path      string         `json:"path"`
	Format    string         `json:"format,omitempty"` // "" when replaced whole
	Conflicts []FileConflict `json:"conflicts,omitempty"`
	Kept      []string       `json:"kept,omitempty"`
	Changed   []string       `json:"changed,omitempty"`
	Added     []string       `json:"added,omitempty"`
	Removed   []string       `json:"removed,omitempty"`
	Digest    string         `json:"digest,omitempty"`
	// Keys are the keyed digests of each changed, added or removed key's
	// value (the text of its lines), on the node now (Old) and as the
	// merge would write it (New); with conflicts, only theirs (New: the
	// mesh's). Shown in place of the values.
	Keys []KeyDigest `json:"keys,omitempty"`
}

// KeyDigest is one key's values by the node's keyed digest; "" where the
// key is absent.
type KeyDigest struct {
	Key string `json:"key"`
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

// short is a digest as a person compares it: its kind and 12 hex digits.
func short(d string) string {
	if d == "" {
		return "absent"
	}
	if i := strings.LastIndex(d, ":"); i >= 0 && len(d) > i+13 {
		return d[:i+13]
	}
	return d
}

// Text says what converging the file would do, by key, with every value
// masked: which keys change, appear, go, or keep the node's value, the
// conflicts, and the keyed digest of what it would hold when known.
func (f FileMerge) Text() string {
	digest := ""
	if f.Digest != "" {
		digest = "; would hold " + f.Digest
	}
	if f.Format == "" {
		return f.Path + ": replaced whole by the module's content (the found file stays in custody)" + digest
	}
	var parts []string
	add := func(what string, keys []string) {
		if len(keys) > 0 {
			parts = append(parts, what+" "+strings.Join(keys, ", ")+" (values masked)")
		}
	}
	add("changes", f.Changed)
	add("adds", f.Added)
	add("removes", f.Removed)
	add("keeps the node's", f.Kept)
	for _, c := range f.Conflicts {
		parts = append(parts, "CONFLICT on "+c.Key+": "+c.Why)
	}
	if len(parts) == 0 {
		parts = []string{"no key changes"}
	}
	if len(f.Keys) > 0 {
		var ks []string
		for _, k := range f.Keys {
			ks = append(ks, k.Key+" "+short(k.Old)+" -> "+short(k.New))
		}
		parts = append(parts, "by key: "+strings.Join(ks, ", "))
	}
	return f.Path + " (" + f.Format + ", per key): " + strings.Join(parts, "; ") + digest
}

// Result is a merge's outcome: the content to write (nil when there are
// conflicts), and what happened to each key, by name.
type Result struct {
	Content   []byte     `json:"-"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Kept      []string   `json:"kept,omitempty"`    // node's value kept (keep or decision)
	Changed   []string   `json:"changed,omitempty"` // keys whose value the merge changes on the node
	Added     []string   `json:"added,omitempty"`
	Removed   []string   `json:"removed,omitempty"`
}

// Merge merges base, node and mesh in format f. keep and the decisions' keys
// are as the operator wrote them; they are normalised here.
func Merge(f Format, base, node, mesh []byte, keep []string, decisions map[string]Take) Result {
	keepSet := map[string]bool{}
	for _, k := range keep {
		keepSet[NormalizeKey(f, k)] = true
	}
	decided := map[string]Take{}
	for k, t := range decisions {
		decided[NormalizeKey(f, k)] = t
	}
	bf, nf, mf := Parse(f, base), Parse(f, node), Parse(f, mesh)
	bv, nv, mv := bf.Values(), nf.Values(), mf.Values()

	var res Result
	takeNode := map[string]bool{}
	for _, k := range mf.Keys() {
		switch {
		case keepSet[k]:
			if _, ok := nv[k]; ok {
				takeNode[k] = true
			}
		case decided[k] == TakeNode:
			takeNode[k] = true
		case decided[k] == TakeMesh:
		case nodeChanged(bv, nv, k) && nv[k] != mv[k]:
			why := "changed on the node since custody; the mesh sets another value"
			if _, ok := nv[k]; !ok {
				why = "removed on the node since custody; the mesh sets it"
			}
			res.Conflicts = append(res.Conflicts, Conflict{Key: k, Why: why})
		}
	}

	// Build the result from the mesh's lines, putting the node's lines of
	// each key taken from the node where the mesh has the key first.
	nodeLines := map[string][]line{}
	for _, l := range nf.lines {
		if l.key != "" {
			nodeLines[l.key] = append(nodeLines[l.key], l)
		}
	}
	out := &File{format: f}
	placed := map[string]bool{}
	for _, l := range mf.lines {
		if l.key != "" && takeNode[l.key] {
			if !placed[l.key] {
				out.lines = append(out.lines, nodeLines[l.key]...)
				placed[l.key] = true
			}
			continue
		}
		out.lines = append(out.lines, l)
	}
	// Kept keys the mesh does not set: the node's lines go at the end of
	// their section, or at the end of the file.
	for _, k := range nf.Keys() {
		if !keepSet[k] || placed[k] {
			continue
		}
		placed[k] = true
		out.lines = insertInSection(out.lines, nodeLines[k], headerOf(nf, nodeLines[k][0].section))
	}
	res.Content = out.Bytes()
	res.Kept = sortedTrue(placed)

	ov := out.Values()
	for k, v := range ov {
		if old, ok := nv[k]; !ok {
			res.Added = append(res.Added, k)
		} else if old != v {
			res.Changed = append(res.Changed, k)
		}
	}
	for k := range nv {
		if _, ok := ov[k]; !ok {
			res.Removed = append(res.Removed, k)
		}
	}
	sort.Strings(res.Added)
	sort.Strings(res.Changed)
	sort.Strings(res.Removed)
	if len(res.Conflicts) > 0 {
		// What the other keys would do is still said (a rehearsal shows
		// it); nothing is to be written until the conflicts are decided.
		res.Content = nil
	}
	return res
}

// nodeChanged reports whether the node's value of k differs from custody's.
func nodeChanged(base, node map[string]string, k string) bool {
	b, inBase := base[k]
	n, inNode := node[k]
	return inBase != inNode || b != n
}

// insertInSection appends ls after the last line of their section in out,
// adding the section's header when out has none.
func insertInSection(out []line, ls []line, header line) []line {
	if len(ls) == 0 {
		return out
	}
	section := ls[0].section
	last := -1
	for i, l := range out {
		if l.section == section {
			last = i
		}
	}
	if last < 0 {
		if section == "" {
			// Before the first header: keys of no section must stay above it.
			first := len(out)
			for i, l := range out {
				if l.header {
					first = i
					break
				}
			}
			return append(out[:first:first], append(append([]line(nil), ls...), out[first:]...)...)
		}
		return append(append(out, header), ls...)
	}
	return append(out[:last+1:last+1], append(append([]line(nil), ls...), out[last+1:]...)...)
}

// headerOf finds the node's header line of a section, to repeat it when the
// mesh's content has no such section.
func headerOf(f *File, section string) line {
	for _, l := range f.lines {
		if l.header && l.section == section {
			return l
		}
	}
	return line{raw: "[" + section + "]", section: section, header: true}
}

func sortedTrue(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Mask shows a value's shape, never its text: the rehearsal and the briefing
// print it for keys nobody asked to show.
func Mask(v string) string {
	if v == "" {
		return "(empty)"
	}
	n := len(strings.Split(v, "\n"))
	if n > 1 {
		return "(masked, " + strconv.Itoa(n) + " lines)"
	}
	return "(masked)"
}
