package cutover

// Conflicts of a module's container with its predecessor's: a variable or
// label the operator gave the predecessor that the module sets to another
// value. The cutover refuses on each, unless the module keeps it (the
// predecessor's value stays) or the operator decided it (Spec.Takes).
// Conflicts name keys ("env:NAME", "label:NAME") and keyed digests, never
// a value.

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"adoption/containers/cutoverwire"
)

// ErrValueConflict: a variable or label of the predecessor's that the
// module sets otherwise, neither kept nor decided.
var ErrValueConflict = errors.New("container value conflict")

// Key prefixes of a conflict and a decision.
const (
	KeyEnv   = cutoverwire.KeyEnv
	KeyLabel = cutoverwire.KeyLabel
)

// Takes of a decision.
const (
	TakeNode = "node" // the predecessor's value stays
	TakeMesh = "mesh" // the module's value
)

// ValueConflict is one conflicting variable or label: its key and the
// node's keyed digests of the two values (empty without a digest key).
type ValueConflict struct {
	Key  string `json:"key"`
	Node string `json:"node,omitempty"` // digest of the predecessor's value
	Mesh string `json:"mesh,omitempty"` // digest of the module's value
}

// Why says what conflicts, for the operator: digests only.
func (c ValueConflict) Why() string {
	why := "the predecessor's container sets it and the module sets another value"
	if c.Node != "" {
		why += fmt.Sprintf(" (predecessor %s, module %s)", c.Node, c.Mesh)
	}
	return why
}

// ValueConflicts is the preflight's refusal on conflicts; it wraps
// ErrValueConflict.
type ValueConflicts struct {
	Container string
	Conflicts []ValueConflict
}

func (e *ValueConflicts) Error() string {
	keys := make([]string, 0, len(e.Conflicts))
	for _, c := range e.Conflicts {
		keys = append(keys, c.Key)
	}
	return fmt.Sprintf("cutover of %s refused: %s set by the predecessor's container to another value than the module's: keep it (container.keep) or decide each (take node or mesh); nothing was changed: %s",
		e.Container, strings.Join(keys, ", "), ErrValueConflict)
}

func (e *ValueConflicts) Unwrap() error { return ErrValueConflict }

// SplitKey is cutoverwire.SplitKey.
func SplitKey(key string) (kind, name string, ok bool) { return cutoverwire.SplitKey(key) }

// checkTakes refuses a decision that is not take node or mesh on a
// variable or label the module sets, naming its key.
func (s Spec) checkTakes() error {
	for _, key := range sortedKeys(s.Takes) {
		kind, name, ok := SplitKey(key)
		if !ok {
			return fmt.Errorf("module %s: decision on %q: not env:NAME or label:NAME: %w", s.Name, key, ErrBadSpec)
		}
		if t := s.Takes[key]; t != TakeNode && t != TakeMesh {
			return fmt.Errorf("module %s: decision on %s: take %q is neither node nor mesh: %w", s.Name, key, t, ErrBadSpec)
		}
		_, inEnv := s.Env[name]
		_, inLabels := s.Labels[name]
		if (kind == "env" && !inEnv) || (kind == "label" && !inLabels) {
			return fmt.Errorf("module %s: decision on %s: the module sets no %s %s, so it has no conflict to decide; nothing was changed: %w", s.Name, key, kind, name, ErrBadSpec)
		}
	}
	return nil
}

// clash is a conflict as carry finds it, with both values: it stays in
// the engine, which names it by digests only (ValueConflicts).
type clash struct{ key, pred, mesh string }

// settle is the value a module's variable or label takes over the
// predecessor's (had: whether the operator gave the predecessor one):
// kept or decided for the node, the predecessor's; a different value
// neither kept nor decided, a conflict (the module's value, which the
// preflight refuses).
func settle(s Spec, keep map[string]bool, key, name, pred, mesh string, had bool) (value string, kept bool, c *clash) {
	switch {
	case !had:
		return mesh, false, nil
	case keep[name] || s.Takes[key] == TakeNode:
		return pred, true, nil
	case pred == mesh || s.Takes[key] == TakeMesh:
		return mesh, false, nil
	}
	return mesh, false, &clash{key: key, pred: pred, mesh: mesh}
}

// conflicts names clashes by key and the engine's keyed digests.
func (e *Engine) conflicts(container string, cs []clash) error {
	if len(cs) == 0 {
		return nil
	}
	out := &ValueConflicts{Container: container}
	for _, c := range cs {
		vc := ValueConflict{Key: c.key}
		if e.digest != nil {
			vc.Node, vc.Mesh = e.digest([]byte(c.pred)), e.digest([]byte(c.mesh))
		}
		out.Conflicts = append(out.Conflicts, vc)
	}
	sort.Slice(out.Conflicts, func(i, j int) bool { return out.Conflicts[i].Key < out.Conflicts[j].Key })
	return out
}

// WithDigest gives the engine the node's keyed digest: conflicts name each
// value by it.
func (e *Engine) WithDigest(d func([]byte) string) *Engine {
	e.digest = d
	return e
}
