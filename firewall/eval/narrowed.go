// This file holds the narrowing of a pair: the sources from which a new
// connection reaches a port before a change and not after, the reverse of
// Widened, asked one port interval at a time.

package eval

import (
	"net/netip"

	"adoption/firewall"
)

// Narrower answers Narrowed for one pair and node: each ruleset's Reacher,
// both cut by the source regions of either (the pair's), so that a source
// of one is a source of the other. Not for several goroutines at once.
type Narrower struct {
	before, after *Reacher
}

// Narrower is a Narrower of the pair on node.
func (pr *Pair) Narrower(node firewall.Node) *Narrower {
	shared := func(c *Compiled) *Reacher {
		x := c.Reacher(node)
		for fam, a := range pr.fams {
			x.shared.atoms[fam] = a
		}
		return x
	}
	return &Narrower{before: shared(pr.before), after: shared(pr.after)}
}

// Narrowed are the sources, as the fewest CIDRs, from which a new
// connection of proto to port reaches dir (as SourcesAt asks it) on the
// pair's node before the change and surely does not after. A region the
// evaluator cannot decide counts as reaching, before and after alike: it
// is not named here.
func (n *Narrower) Narrowed(dir, fam, proto string, port uint16) []netip.Prefix {
	reach := func(x *Reacher) (*reachFamily, func(Atom) bool) {
		f := x.family(fam)
		x.e.bounds = x.bounds()
		out, open, closed := x.regionAtoms(f, dir, Packet{Family: fam, Proto: protoNum(proto), Port: port, OrigPort: port})
		// An atom singled out reaches as its list says; any other goes the
		// way of every source the ruleset does not single out (Any).
		named := open
		if out.Any {
			named = closed
		}
		in := make(map[Atom]bool, len(named))
		for _, a := range named {
			in[a] = true
		}
		return f, func(a Atom) bool { return in[a] != out.Any }
	}
	_, was := reach(n.before)
	f, is := reach(n.after)
	var lost []Atom
	for _, a := range f.atoms {
		if !a.Other && was(a) && !is(a) {
			lost = append(lost, a)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return atomPrefixes(lost, f.atoms, f.index)
}
