// This file holds the port intervals a ruleset cannot tell apart inside,
// and the walk over them that the flip's readings of found share.

package eval

import (
	"iter"
	"maps"
	"slices"

	"adoption/firewall"
)

// PortStarts are the starts of the port intervals of proto in family fam
// that rs cannot tell apart inside: every port of one interval fares alike.
func PortStarts(rs *firewall.Ruleset, fam, proto string) []int {
	return portBounds(rs, fam, protoNum(proto), true)
}

// PortCuts are the starts of the port intervals of proto in family fam
// that none of rss tells apart inside, cut also at each of more (a port
// outside 0-65535 is left out), in order.
func PortCuts(fam, proto string, rss []*firewall.Ruleset, more ...int) []int {
	cuts := map[int]bool{}
	for _, rs := range rss {
		for _, s := range PortStarts(rs, fam, proto) {
			cuts[s] = true
		}
	}
	for _, s := range more {
		if s >= 0 && s <= 65535 {
			cuts[s] = true
		}
	}
	return slices.Sorted(maps.Keys(cuts))
}

// PortRuns are the intervals [start, end] that starts (in order) cut the
// ports from starts[0] to 65535 into.
func PortRuns(starts []int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for i, start := range starts {
			end := 65535
			if i+1 < len(starts) {
				end = starts[i+1] - 1
			}
			if !yield(start, end) {
				return
			}
		}
	}
}
