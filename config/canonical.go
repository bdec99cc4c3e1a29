package config

// This file holds the plan's canonical form: the node agent compares the
// plan a request carries with the one it derives from its own file by a
// hash of this form, and names the first difference when they differ.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Canonical is the plan as bytes that do not depend on how it was written:
// sets (ports, control daemons, modules, files) are sorted, empty and absent
// lists are the same, and the JSON field order is the struct's. Two plans
// with the same canonical form act identically on a node.
//
// Workflow code compares plans with it (the same bytes on every replay:
// encoding/json writes a struct's fields in order and sorts map keys);
// workflowcheck sees only that json.Marshal uses reflection.
//
//workflowcheck:ignore
func (p Plan) Canonical() []byte {
	b, err := json.Marshal(p.normalized())
	if err != nil {
		// Every field is a plain value: this cannot fail.
		panic(fmt.Sprintf("config: canonical plan: %v", err))
	}
	return b
}

// Hash is the sha256 of Canonical, in hex.
func (p Plan) Hash() string {
	s := sha256.Sum256(p.Canonical())
	return hex.EncodeToString(s[:])
}

// normalized returns a deep copy with every set sorted and every empty list
// nil, so that a plan that went through JSON compares equal to the original.
func (p Plan) normalized() Plan {
	q := p
	q.Digests = p.DigestKind() // absent (an older plan) and sha256 are the same
	q.ManagementPorts = sortPorts(p.ManagementPorts)
	q.Drop = sortPorts(p.Drop)
	q.Widen = sortPorts(p.Widen)
	q.DropClasses = sortStrings(p.DropClasses)
	q.WidenClasses = sortStrings(p.WidenClasses)
	q.Control = sortStrings(p.Control)
	q.NodeFiles = sortFiles(p.NodeFiles)
	q.Foundation = nil
	if len(p.Foundation) > 0 {
		q.Foundation = append([]NamedPort(nil), p.Foundation...)
		sort.Slice(q.Foundation, func(i, j int) bool { return q.Foundation[i].Name < q.Foundation[j].Name })
	}
	q.FoundationContainers = nil
	for _, c := range p.FoundationContainers {
		q.FoundationContainers = append(q.FoundationContainers, canonicalContainer(c))
	}
	q.Modules = nil
	for _, m := range p.Modules {
		mm := m
		mm.Ports = sortPorts(m.Ports)
		mm.Files = sortFiles(m.Files)
		mm.Holders = sortStrings(m.Holders)
		if m.Container != nil {
			c := canonicalContainer(*m.Container)
			mm.Container = &c
		}
		if m.Health != nil {
			h := *m.Health
			mm.Health = &h
		}
		q.Modules = append(q.Modules, mm)
	}
	sort.Slice(q.Modules, func(i, j int) bool { return q.Modules[i].Name < q.Modules[j].Name })
	return q
}

func sortPorts(ps []Port) []Port {
	if len(ps) == 0 {
		return nil
	}
	out := append([]Port(nil), ps...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Proto != out[j].Proto {
			return out[i].Proto < out[j].Proto
		}
		return out[i].Num < out[j].Num
	})
	return out
}

// canonicalContainer is c with its empty lists and maps as nil.
func canonicalContainer(c Container) Container {
	c.Cmd = append([]string(nil), c.Cmd...) // order matters: it is argv
	if len(c.Cmd) == 0 {
		c.Cmd = nil
	}
	if len(c.Ports) == 0 {
		c.Ports = nil
	}
	return c
}

func sortStrings(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

func sortFiles(fs []FilePlan) []FilePlan {
	if len(fs) == 0 {
		return nil
	}
	out := append([]FilePlan(nil), fs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Difference is one key at which two plans differ, with each side's value
// ("absent" when a side lacks the key).
type Difference struct {
	Key string
	A   string
	B   string
}

// Diff names the first difference between two plans (in a stable order of
// keys), or nil when their canonical forms are equal. Lists of named things
// are keyed by the name (modules[mail].ports[25/tcp]), so the difference
// reads like the configuration file. Its map walks only fill a set, read
// back sorted, so workflow code may call it (a preview's refusal names the
// first difference).
//
//workflowcheck:ignore
func Diff(a, b Plan) *Difference {
	if a.Hash() == b.Hash() {
		return nil
	}
	fa, fb := flatten(a), flatten(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		va, oka := fa[k]
		vb, okb := fb[k]
		if !oka {
			va = "absent"
		}
		if !okb {
			vb = "absent"
		}
		if va != vb {
			return &Difference{Key: k, A: va, B: vb}
		}
	}
	// Equal leaves with different hashes cannot happen; say so plainly.
	return &Difference{Key: "(canonical form)", A: a.Hash(), B: b.Hash()}
}

// flatten maps every leaf of the plan's canonical JSON to its value. It
// walks maps, but only to fill one, so their order never shows and
// workflow code may call it (through Diff).
//
//workflowcheck:ignore
func flatten(p Plan) map[string]string {
	var v any
	if err := json.Unmarshal(p.Canonical(), &v); err != nil {
		panic(fmt.Sprintf("config: canonical plan does not decode: %v", err))
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if port, ok := portText(t); ok {
				out[prefix] = port
				return
			}
			if len(t) == 0 {
				out[prefix] = "{}"
			}
			for k, e := range t {
				walk(join(prefix, k), e)
			}
		case []any:
			if len(t) == 0 {
				out[prefix] = "[]"
			}
			for i, e := range t {
				walk(fmt.Sprintf("%s[%s]", prefix, elemKey(i, e)), e)
			}
		case nil:
			// absent and empty are the same in the canonical form
		case float64:
			last := prefix[strings.LastIndex(prefix, ".")+1:]
			if strings.Contains(last, "timeout") || strings.Contains(last, "interval") {
				out[prefix] = time.Duration(t).String()
				return
			}
			out[prefix] = fmt.Sprint(t)
		default:
			b, _ := json.Marshal(t)
			out[prefix] = string(b)
		}
	}
	walk("", v)
	return out
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// elemKey names a list element by what identifies it: a module or a
// foundation port by its name, a file by its path, a port by itself.
func elemKey(i int, e any) string {
	if m, ok := e.(map[string]any); ok {
		for _, k := range []string{"name", "path"} {
			if s, ok := m[k].(string); ok {
				return s
			}
		}
		if p, ok := portText(m); ok {
			return p
		}
	}
	if s, ok := e.(string); ok && !strings.ContainsAny(s, "[]") {
		return s
	}
	return fmt.Sprint(i)
}

// portText reads a Port's JSON ({"port":25,"proto":"tcp"}) as "25/tcp".
func portText(m map[string]any) (string, bool) {
	n, ok := m["port"].(float64)
	proto, ok2 := m["proto"].(string)
	if !ok || !ok2 || len(m) != 2 {
		return "", false
	}
	return fmt.Sprintf("%d/%s", int(n), proto), true
}
