// This file holds prefixSet: "is this source region inside one of these
// prefixes" in a few map look-ups, whatever the number of prefixes (a
// blocklist set of thousands), for the evaluator's source conditions and
// the grouping of source regions.

package eval

import (
	"net/netip"
	"slices"
)

// prefixSet is a set of prefixes by their masked form, with the prefix
// lengths it holds.
type prefixSet struct {
	has  map[netip.Prefix]struct{}
	lens []int
}

func newPrefixSet(ps []netip.Prefix) *prefixSet {
	s := &prefixSet{has: make(map[netip.Prefix]struct{}, len(ps))}
	for _, q := range ps {
		if !q.IsValid() {
			continue // contains nothing
		}
		s.has[q.Masked()] = struct{}{}
		if !slices.Contains(s.lens, q.Bits()) {
			s.lens = append(s.lens, q.Bits())
		}
	}
	return s
}

// holds reports whether atom a lies inside a prefix of the set: whether
// a.in(q) for some q of the set.
func (s *prefixSet) holds(a Atom) bool {
	if a.Other {
		return false
	}
	addr, bits := a.Prefix.Addr(), a.Prefix.Bits()
	for _, l := range s.lens {
		if l > bits {
			continue
		}
		// Within the same family only: a prefix of the other family
		// never equals this one.
		if _, ok := s.has[netip.PrefixFrom(addr, l).Masked()]; ok {
			return true
		}
	}
	return false
}
