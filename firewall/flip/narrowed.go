// This file holds the preview's check for a port kept from any source that
// would close to some of them: an opening says what any source it does not
// name reaches, never which it leaves out, so "80 from all" now and "80
// from all but X" after are both kept from any. Each such port run's
// sources are compared before and after; a source that loses the port is
// a closing fate of its own.

package flip

import (
	"net/netip"

	"adoption/firewall"
	"adoption/firewall/eval"
)

// narrowings finds, for the fates kept from any source, the sources that
// would lose the port. It asks each (direction, family, protocol, port
// interval) once, however many kept fates share it.
type narrowings struct {
	pair   *eval.Pair
	node   firewall.Node
	n      *eval.Narrower // made on the first question
	starts map[[2]string][]int
	lost   map[narrowKey][]netip.Prefix
	seen   map[firewall.Opening]bool
}

type narrowKey struct {
	dir, fam, proto string
	port            uint16
}

func newNarrowings(pair *eval.Pair, node firewall.Node) *narrowings {
	return &narrowings{pair: pair, node: node, starts: map[[2]string][]int{}, lost: map[narrowKey][]netip.Prefix{}, seen: map[firewall.Opening]bool{}}
}

// closing are the closing fates, one per source region and run of ports,
// of the sources that reach kept's ports now (kept is a sure fate from any
// source) and would not after the flip. Each is said once: a region
// already named by another kept fate is not named again. The regions are
// judged over every address of the node (and, routed, every network
// behind it), so their openings name neither.
func (x *narrowings) closing(kept Fate) []Fate {
	o := kept.Opening
	dir := o.Direction
	if o.Direction == firewall.HookForward && o.Routed() {
		dir = eval.DirRouted
		o.Via = ""
	}
	o.To = ""
	var out []Fate
	at := map[netip.Prefix]int{} // the fate in out of the region, by its source
	start, end := int(o.Port), int(firewall.PortEnd(o))
	runs := x.runs(o.Family, o.Proto, start, end)
	for i, s := range runs {
		e := end
		if i+1 < len(runs) {
			e = runs[i+1] - 1
		}
		for _, pfx := range x.lostAt(dir, o.Family, o.Proto, uint16(s)) {
			if j, ok := at[pfx]; ok && int(firewall.PortEnd(out[j].Opening)) == s-1 {
				out[j].Opening.PortEnd = uint16(e)
				continue
			}
			f := Fate{Opening: o, Fate: FateClosing}
			f.Opening.From, f.Opening.Port, f.Opening.PortEnd = pfx.String(), uint16(s), uint16(e)
			at[pfx] = len(out)
			out = append(out, f)
		}
	}
	fresh := out[:0]
	for _, f := range out {
		if f.Opening.PortEnd == f.Opening.Port {
			f.Opening.PortEnd = 0
		}
		if !x.seen[f.Opening] {
			x.seen[f.Opening] = true
			fresh = append(fresh, f)
		}
	}
	return fresh
}

// runs are the starts of the port intervals within [start, end] that
// neither ruleset tells apart inside.
func (x *narrowings) runs(fam, proto string, start, end int) []int {
	k := [2]string{fam, proto}
	all, ok := x.starts[k]
	if !ok {
		all = eval.PortCuts(fam, proto, []*firewall.Ruleset{x.pair.Before(), x.pair.After()})
		x.starts[k] = all
	}
	out := []int{start}
	for _, s := range all {
		if s > start && s <= end {
			out = append(out, s)
		}
	}
	return out
}

func (x *narrowings) lostAt(dir, fam, proto string, port uint16) []netip.Prefix {
	k := narrowKey{dir, fam, proto, port}
	if l, ok := x.lost[k]; ok {
		return l
	}
	if x.n == nil {
		x.n = x.pair.Narrower(x.node)
	}
	l := x.n.Narrowed(dir, fam, proto, port)
	x.lost[k] = l
	return l
}
