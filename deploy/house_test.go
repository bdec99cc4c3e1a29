// This file holds the test that keeps docs/house.md true: every package of
// the module is in one room, every import between rooms is one its row
// allows, the rooms import each other in no circle, and the packages it
// lists as linking no machinery link none.

package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "adoption"

// machinery is what a package that holds wire types must not link.
var machinery = regexp.MustCompile(`^(github\.com/docker/|github\.com/google/nftables|github\.com/mdlayher/netlink|github\.com/vishvananda/)`)

type room struct {
	name     string
	patterns []string // "x" is the package x, "x/..." x and everything under it
	imports  []string // other rooms; nil with leaf set: no package of the module
	leaf     bool
}

type house struct {
	rooms       []room
	noMachinery []string
}

// readHouse reads the rooms' table and the no-machinery line of
// docs/house.md.
func readHouse(t *testing.T) house {
	t.Helper()
	b, err := os.ReadFile("../docs/house.md")
	if err != nil {
		t.Fatal(err)
	}
	var h house
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "no machinery:"); ok {
			for _, m := range tick.FindAllStringSubmatch(rest, -1) {
				h.noMachinery = append(h.noMachinery, m[1])
			}
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) != 6 || !strings.HasPrefix(line, "| ") || strings.TrimSpace(cells[1]) == "Room" {
			continue
		}
		r := room{name: strings.TrimSpace(cells[1])}
		for _, m := range tick.FindAllStringSubmatch(cells[2], -1) {
			r.patterns = append(r.patterns, m[1])
		}
		if may := strings.TrimSpace(cells[3]); may == "nothing" {
			r.leaf = true
		} else {
			for _, s := range strings.Split(may, ",") {
				r.imports = append(r.imports, strings.TrimSpace(s))
			}
		}
		if len(r.patterns) == 0 {
			t.Fatalf("docs/house.md: room %q names no package (write them in backquotes)", r.name)
		}
		h.rooms = append(h.rooms, r)
	}
	if len(h.rooms) < 10 || len(h.noMachinery) == 0 {
		t.Fatalf("docs/house.md: read %d rooms and %d no-machinery packages; is the table still there?", len(h.rooms), len(h.noMachinery))
	}
	return h
}

// roomOf is the room whose most specific pattern matches pkg (a path
// inside the module, "" for the module's root): the longest, and of two
// as long, the package ("firewall") before the tree ("firewall/...").
func (h house) roomOf(pkg string) (room, bool) {
	var best room
	bestScore := -1
	for _, r := range h.rooms {
		for _, p := range r.patterns {
			base, tree := strings.CutSuffix(p, "/...")
			score := 2 * len(base)
			if !tree {
				score++
			}
			if (pkg == base || tree && strings.HasPrefix(pkg, base+"/")) && score > bestScore {
				best, bestScore = r, score
			}
		}
	}
	return best, bestScore >= 0
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList is `go list -json` of the module's packages, run from its root.
func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, errb.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list -json ./... listed %d packages", len(pkgs))
	}
	return pkgs
}

func inModule(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

// roomImports is, for each room, the rooms its packages import (itself
// aside); problems name every package in no room and every import a row
// does not allow.
func (h house) roomImports(pkgs []listed) (map[string][]string, []string) {
	edges := map[string][]string{}
	var problems []string
	for _, p := range pkgs {
		name, _ := inModule(p.ImportPath)
		from, ok := h.roomOf(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is in no room: add it to a row of docs/house.md", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			iname, ok := inModule(imp)
			if !ok {
				continue
			}
			to, ok := h.roomOf(iname)
			switch {
			case !ok:
				continue // reported as its own package
			case from.leaf:
				problems = append(problems, fmt.Sprintf("%s (room leaves) imports %s: a leaf imports no package of the module", p.ImportPath, imp))
			case to.name == from.name:
			case !slices.Contains(from.imports, to.name):
				problems = append(problems, fmt.Sprintf("%s (room %s) imports %s (room %s), which its row does not allow", p.ImportPath, from.name, imp, to.name))
			}
			if to.name != from.name && !slices.Contains(edges[from.name], to.name) {
				edges[from.name] = append(edges[from.name], to.name)
			}
		}
	}
	return edges, problems
}

// circle is one circle in edges, or nil.
func circle(edges map[string][]string) []string {
	state := map[string]int{} // 1: on the path, 2: done
	var path, found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		state[n] = 1
		path = append(path, n)
		for _, m := range edges[n] {
			if state[m] == 1 {
				i := slices.Index(path, m)
				found = append(slices.Clone(path[i:]), m)
				return true
			}
			if state[m] == 0 && visit(m) {
				return true
			}
		}
		path = path[:len(path)-1]
		state[n] = 2
		return false
	}
	keys := make([]string, 0, len(edges))
	for k := range edges {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if state[k] == 0 && visit(k) {
			return found
		}
	}
	return nil
}

func TestHouseMapHolds(t *testing.T) {
	h := readHouse(t)
	allowed := map[string][]string{}
	for _, r := range h.rooms {
		for _, to := range r.imports {
			if !slices.ContainsFunc(h.rooms, func(o room) bool { return o.name == to }) {
				t.Errorf("docs/house.md: room %s may import %q, which is no room", r.name, to)
			}
		}
		allowed[r.name] = r.imports
	}
	if c := circle(allowed); c != nil {
		t.Errorf("docs/house.md: the rows allow a circle: %s", strings.Join(c, " -> "))
	}
	pkgs := goList(t)
	edges, problems := h.roomImports(pkgs)
	for _, p := range problems {
		t.Error(p)
	}
	if c := circle(edges); c != nil {
		t.Errorf("the rooms import each other in a circle: %s", strings.Join(c, " -> "))
	}
	for _, want := range h.noMachinery {
		i := slices.IndexFunc(pkgs, func(p listed) bool { return p.ImportPath == module+"/"+want })
		if i < 0 {
			t.Errorf("docs/house.md lists %s as linking no machinery, but the module has no such package", want)
			continue
		}
		var linked []string
		for _, d := range pkgs[i].Deps {
			if machinery.MatchString(d) {
				linked = append(linked, d)
			}
		}
		if len(linked) > 0 {
			t.Errorf("%s links %d machinery packages (docs/house.md says none), among them %s", want, len(linked), strings.Join(linked[:min(3, len(linked))], ", "))
		}
	}
}

// The checks can fail: a leaf that imports, an import no row allows, a
// package in no room and a circle are each found.
func TestHouseChecksCanFail(t *testing.T) {
	h := house{rooms: []room{
		{name: "leaves", patterns: []string{"a"}, leaf: true},
		{name: "low", patterns: []string{"b/..."}, imports: []string{"leaves"}},
		{name: "high", patterns: []string{"c"}, imports: []string{"low", "leaves"}},
	}}
	pkgs := []listed{
		{ImportPath: "adoption/a", Imports: []string{"adoption/b/x"}},
		{ImportPath: "adoption/b/x", Imports: []string{"adoption/c", "fmt"}},
		{ImportPath: "adoption/c", Imports: []string{"adoption/b/x"}},
		{ImportPath: "adoption/d"},
	}
	edges, problems := h.roomImports(pkgs)
	for _, want := range []string{"adoption/a (room leaves) imports", "adoption/b/x (room low) imports adoption/c (room high)", "adoption/d is in no room"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("no problem says %q; problems: %q", want, problems)
		}
	}
	if c := circle(edges); len(c) == 0 {
		t.Errorf("no circle found in %v", edges)
	}
	if c := circle(map[string][]string{"x": {"y"}, "y": {"z"}}); c != nil {
		t.Errorf("a circle found where there is none: %v", c)
	}
	if r, ok := h.roomOf("b/x/y"); !ok || r.name != "low" {
		t.Errorf("b/x/y is in room %q (%v), want low", r.name, ok)
	}
	h.rooms = append(h.rooms, room{name: "model", patterns: []string{"b"}})
	if r, _ := h.roomOf("b"); r.name != "model" {
		t.Errorf("b is in room %q, want model (the package before the tree)", r.name)
	}
	if r, _ := h.roomOf("b/x"); r.name != "low" {
		t.Errorf("b/x is in room %q, want low", r.name)
	}
}
