// The fleet's waves: after the control node, which is always alone, the
// fleet file's `waves:` are the sizes of the groups of nodes started
// together (a count, or a percentage of the nodes after the control node),
// and `max_failed:` how many failures a wave may have before the fleet
// halts (a count, or a percentage of the wave). Decided here, once: the CLI
// resolves them to counts and the Fleet workflow checks the counts it gets.
package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Waves are a fleet's waves after its control node, resolved to counts:
// Sizes[k] nodes start together once wave k-1 has migrated, and wave k
// halts the fleet when more than Budgets[k] of its nodes fail.
type Waves struct {
	Sizes   []int `json:"sizes"`
	Budgets []int `json:"budgets"`
}

// ResolveWaves turns the fleet file's waves and max_failed into counts for
// a fleet of members nodes after the control node. A percentage of waves
// is of members, rounded up; the last wave may be cut to what is left, but
// every wave must get a node and the waves must cover every member. A
// percentage of max_failed is of each wave, rounded down. No waves: nil
// (one node at a time, as without waves), and then max_failed is refused.
func ResolveWaves(waves []any, maxFailed any, members int) (*Waves, []string) {
	var problems []string
	if len(waves) == 0 {
		if maxFailed != nil {
			problems = append(problems, fmt.Sprintf("max_failed: %v is a budget per wave, and the fleet has no waves: add waves: (e.g. [1, \"10%%\", \"100%%\"]) or remove max_failed", maxFailed))
		}
		return nil, problems
	}
	w := &Waves{}
	left := members
	for i, v := range waves {
		key := fmt.Sprintf("waves[%d]", i)
		n, pct, err := amount(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v: %v", key, v, err))
			continue
		}
		size := n
		if pct {
			size = int(math.Ceil(float64(n) * float64(members) / 100))
		}
		switch {
		case size == 0:
			problems = append(problems, fmt.Sprintf("%s: %v is a wave of no node: every wave needs at least one node", key, v))
			continue
		case left == 0:
			problems = append(problems, fmt.Sprintf("%s: %v: the waves before it already cover the fleet's %d node(s) after the control node: remove it", key, v, members))
			continue
		}
		size = min(size, left)
		left -= size
		w.Sizes = append(w.Sizes, size)
	}
	if left > 0 && len(problems) == 0 {
		problems = append(problems, fmt.Sprintf("waves: %v cover %d of the fleet's %d node(s) after the control node: make the last wave \"100%%\" to take the rest", waves, members-left, members))
	}
	budget, pct, err := 0, false, error(nil)
	if maxFailed != nil {
		if budget, pct, err = amount(maxFailed); err != nil {
			problems = append(problems, fmt.Sprintf("max_failed: %v: %v", maxFailed, err))
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	for _, size := range w.Sizes {
		b := budget
		if pct {
			b = budget * size / 100
		}
		w.Budgets = append(w.Budgets, min(b, size))
	}
	return w, nil
}

// amount reads a count (a whole number, 0 or more) or a percentage ("10%",
// at most 100).
func amount(v any) (n int, pct bool, err error) {
	switch x := v.(type) {
	case int:
		n = x
	case int64:
		n = int(x)
	case float64:
		if x != math.Trunc(x) {
			return 0, false, fmt.Errorf("not a whole number: give a count (3) or a percentage (\"10%%\")")
		}
		n = int(x)
	case string:
		s := strings.TrimSpace(x)
		if p, ok := strings.CutSuffix(s, "%"); ok {
			pct, s = true, strings.TrimSpace(p)
		}
		if n, err = strconv.Atoi(s); err != nil {
			return 0, false, fmt.Errorf("not a count or a percentage: give a count (3) or a percentage (\"10%%\")")
		}
	default:
		return 0, false, fmt.Errorf("not a count or a percentage: give a count (3) or a percentage (\"10%%\")")
	}
	switch {
	case n < 0:
		return 0, false, fmt.Errorf("negative: give 0 or more")
	case pct && n > 100:
		return 0, false, fmt.Errorf("a percentage over 100")
	}
	return n, pct, nil
}

// CheckWaves checks resolved waves for a fleet of members nodes after its
// control node: a size and a budget for each wave, every size at least 1
// and together members, every budget from 0 to its wave's size.
func CheckWaves(w Waves, members int) error {
	if len(w.Sizes) != len(w.Budgets) {
		return fmt.Errorf("waves: %d sizes but %d budgets", len(w.Sizes), len(w.Budgets))
	}
	sum := 0
	for k, s := range w.Sizes {
		if s < 1 {
			return fmt.Errorf("waves[%d]: size %d: every wave needs at least one node", k, s)
		}
		if b := w.Budgets[k]; b < 0 || b > s {
			return fmt.Errorf("waves[%d]: budget %d: it must be from 0 to the wave's %d node(s)", k, b, s)
		}
		sum += s
	}
	if sum != members {
		return fmt.Errorf("waves: %v cover %d node(s), the fleet has %d after its control node", w.Sizes, sum, members)
	}
	return nil
}
