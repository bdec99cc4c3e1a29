// This file holds a compiled chain's port index: for a packet that has
// ports, the rules whose destination port condition cannot hold for it are
// passed over without being looked at, so a chain of many per-port rules
// costs a packet the rules of its port and the rules without one, not all.

package eval

import (
	"slices"

	"adoption/firewall"
)

// portIndex indexes the rules of one chain by their destination port
// condition (indexed rules); the others are always looked at.
type portIndex struct {
	// next[i] is the first rule at or after i that is not indexed
	// (len(rules) when none is).
	next []int32
	// starts are the sorted starts of the port segments (the first is 0);
	// on segment k, from starts[k] to the next start less one, every
	// indexed rule's port condition is constant, and holds for the rules
	// of bySeg[k] (ascending).
	starts []int
	bySeg  [][]int32
}

const (
	// indexMinRules is how many indexed rules a chain needs for an index:
	// a shorter chain is scanned as fast.
	indexMinRules = 8
	// indexMaxSegments is how many segments an indexed rule's ports may
	// span; a rule spanning more (a wide range among many small ones) is
	// always looked at, so the index stays linear in the rules.
	indexMaxSegments = 16
)

// indexKey is the condition r is indexed by: a destination port
// condition that holds only for the ports it lists. Rejecting a packet
// by it is what evaluating r does: the conditions ordered before it
// (condOrder: family and protocol) decide without effect, and a false one
// ends the rule.
func indexKey(r *crule) *firewall.Cond {
	for _, c := range r.conds {
		if c.Kind == firewall.CondDport && !c.Negate && len(c.Ports) > 0 {
			return c
		}
	}
	return nil
}

// newPortIndex indexes rules, or returns nil when too few have a port
// condition to index by.
func newPortIndex(rules []crule) *portIndex {
	keys := make([]*firewall.Cond, len(rules))
	n := 0
	set := map[int]bool{0: true}
	for i := range rules {
		if keys[i] = indexKey(&rules[i]); keys[i] != nil {
			n++
			for _, p := range keys[i].Ports {
				set[int(p.From)] = true
				if p.To < 65535 {
					set[int(p.To)+1] = true
				}
			}
		}
	}
	if n < indexMinRules {
		return nil
	}
	x := &portIndex{next: make([]int32, len(rules)+1), starts: make([]int, 0, len(set))}
	for s := range set {
		x.starts = append(x.starts, s)
	}
	slices.Sort(x.starts)
	for i, k := range keys {
		if k == nil {
			continue
		}
		span := 0
		for _, p := range k.Ports {
			span += x.segment(p.To) - x.segment(p.From) + 1
		}
		if span > indexMaxSegments {
			keys[i] = nil
			n--
		}
	}
	if n < indexMinRules {
		return nil
	}
	x.bySeg = make([][]int32, len(x.starts))
	for i, k := range keys {
		if k == nil {
			continue
		}
		for _, p := range k.Ports {
			for s := x.segment(p.From); s <= x.segment(p.To); s++ {
				if l := x.bySeg[s]; len(l) == 0 || l[len(l)-1] != int32(i) {
					x.bySeg[s] = append(x.bySeg[s], int32(i))
				}
			}
		}
	}
	x.next[len(rules)] = int32(len(rules))
	for i := len(rules) - 1; i >= 0; i-- {
		if keys[i] == nil {
			x.next[i] = int32(i)
		} else {
			x.next[i] = x.next[i+1]
		}
	}
	return x
}

// segment is the index of the segment holding port.
func (x *portIndex) segment(port uint16) int {
	k, found := slices.BinarySearch(x.starts, int(port))
	if !found {
		k--
	}
	return k
}

// live is the first rule at or after i that a packet to port may match
// as far as the index tells: not indexed, or indexed by a condition that
// holds for port.
func (x *portIndex) live(i int, port uint16) int {
	j := int(x.next[i])
	seg := x.bySeg[x.segment(port)]
	if k, _ := slices.BinarySearch(seg, int32(i)); k < len(seg) && int(seg[k]) < j {
		j = int(seg[k])
	}
	return j
}
