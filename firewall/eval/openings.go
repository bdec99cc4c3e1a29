// This file holds the evaluation per port interval and source region, and
// the openings it reports, merged and sorted.

package eval

import (
	"maps"
	"net/netip"
	"slices"
	"sort"

	"adoption/firewall"
)

type openKey struct {
	from, to  string
	uncertain bool
	path      path
}

// evalPorts evaluates the port intervals of bounds of proto in family
// fam for every source region, on the paths only asks for (wants: "" all).
func evalPorts(prog *program, only string, node *firewall.Node, st stages, atoms []Atom, groups [][]Atom, index map[netip.Prefix]int, conds []*firewall.Cond, bounds []int, fam, proto string) []firewall.Opening {
	pnum := protoNum(proto)
	e := prog.Evaluator()
	e.bounds = bounds
	e.only = only
	own := node.Own(fam)
	dsts := destGroups(conds, own)
	hereBuf, perDst := map[openKey]bool{}, make([]map[openKey]bool, len(dsts))
	for i := range perDst {
		perDst[i] = map[openKey]bool{}
	}
	open := map[openKey]*span{}
	var out []firewall.Opening
	flush := func(k openKey, s *span) {
		o := firewall.Opening{Port: uint16(s.start), Proto: proto, Direction: k.path.dir, From: k.from, To: k.to, Uncertain: k.uncertain,
			Family: fam, Via: k.path.via, Reason: k.path.reason}
		if s.end != s.start {
			o.PortEnd = uint16(s.end)
		}
		out = append(out, o)
	}
	// reach fills here with the openings of the port interval at start
	// for a packet to own (the node's own addresses it may be sent to).
	// Its maps are reused from one interval to the next.
	sure, unsure := map[path][]Atom{}, map[path][]Atom{} // open prefix atoms worth naming
	reach := func(start int, own []netip.Addr, here map[openKey]bool) map[openKey]bool {
		clear(here)
		clear(sure)
		clear(unsure)
		var other paths
		seen := 0
		for ai, g := range groups {
			if ai == 1 {
				if !e.sawSource {
					// Any other source went its way without a source
					// condition looked at: every source goes the same
					// way, and a source that goes the way of any other
					// is not worth naming.
					break
				}
				seen = len(e.sources)
			}
			if ai == 0 {
				e.startSources()
			} else if e.likeOther(g[0], seen) {
				continue // it goes the way of any other: nothing to name
			}
			e.sawSource = false
			res := e.client(&st, Packet{Family: fam, Proto: pnum, Port: uint16(start), OrigPort: uint16(start), Src: g[0], node: node, own: own})
			if only != "" {
				res = slices.DeleteFunc(res, func(o pathResult) bool { return !wants(only, o.p) })
			}
			if ai == 0 {
				other = res
				for p, r := range res.all() {
					if r.Accept {
						here[openKey{from: "", uncertain: r.drop || p.reason != "", path: p}] = true
					}
				}
				continue
			}
			for p, r := range res.all() {
				if !r.Accept {
					continue
				}
				o, _ := other.get(p)
				// A prefix is worth naming when the rest of the world does
				// not reach the port, or reaches it only uncertainly while
				// this prefix surely does.
				switch {
				case !o.Accept && r.drop:
					unsure[p] = append(unsure[p], g...)
				case !o.Accept || (o.drop && !r.drop):
					sure[p] = append(sure[p], g...)
				}
			}
		}
		for _, group := range []struct {
			atoms     map[path][]Atom
			uncertain bool
		}{{sure, false}, {unsure, true}} {
			for p, as := range group.atoms {
				for _, pfx := range atomPrefixes(as, atoms, index) {
					here[openKey{from: pfx.String(), uncertain: group.uncertain || p.reason != "", path: p}] = true
				}
			}
		}
		return here
	}
	for bi, start := range bounds {
		end := 65535
		if bi+1 < len(bounds) {
			end = bounds[bi+1] - 1
		}
		var here map[openKey]bool
		if len(dsts) > 1 {
			// The first group's evaluation says whether any destination
			// condition was looked at for one of the node's own
			// addresses: if none was, every group goes the same way.
			e.sawOwnDst = false
			here = reach(start, dsts[0], perDst[0])
			if e.sawOwnDst {
				for i := 1; i < len(dsts); i++ {
					reach(start, dsts[i], perDst[i])
				}
				here = byDestination(dsts, perDst)
			}
		} else {
			here = reach(start, own, hereBuf)
		}
		advance(open, here, start, end, flush)
	}
	for k, s := range open {
		flush(k, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.From != b.From {
			return fromLess(a.From, b.From)
		}
		if a.To != b.To {
			return a.To < b.To
		}
		if a.Uncertain != b.Uncertain {
			return !a.Uncertain
		}
		if a.Direction != b.Direction {
			return a.Direction == firewall.HookInput
		}
		return a.Via < b.Via
	})
	return out
}

// span is a port interval over which one opening holds.
type span struct{ start, end int }

// advance moves the open spans on to the port interval [start, end]: a
// span whose key is not here ends (flush), one that is grows, a new key
// starts one.
func advance[K comparable](open map[K]*span, here map[K]bool, start, end int, flush func(K, *span)) {
	for k, s := range open {
		if !here[k] {
			flush(k, s)
			delete(open, k)
		}
	}
	for k := range here {
		if s, ok := open[k]; ok {
			s.end = end
		} else {
			open[k] = &span{start, end}
		}
	}
}

// fromLess orders "" (any source) first, then prefixes by address.
func fromLess(a, b string) bool {
	pa, errA := netip.ParsePrefix(a)
	pb, errB := netip.ParsePrefix(b)
	if a == "" || b == "" || errA != nil || errB != nil {
		return a < b
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c < 0
	}
	return pa.Bits() < pb.Bits()
}

// destGroups splits the node's own addresses own into groups that every
// destination condition of conds treats alike: a client's choice among the
// addresses of one group makes no difference. One group (or none, the
// node's addresses not known) when no condition tells them apart.
func destGroups(conds []*firewall.Cond, own []netip.Addr) [][]netip.Addr {
	index := map[string]int{}
	var out [][]netip.Addr
	for _, a := range own {
		sig := make([]byte, len(conds))
		for i, c := range conds {
			sig[i] = '0'
			if inPrefixes(c.Prefixes, a) {
				sig[i] = '1'
			}
		}
		k, ok := index[string(sig)]
		if !ok {
			k = len(out)
			index[string(sig)] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], a)
	}
	return out
}

// byDestination joins the openings of a port interval evaluated per
// group of the node's own addresses (per, in the order of dsts). Where
// every group ends alike the openings are theirs, for any address; else
// each opening names the one address it is reached at (To), for each
// address of the groups it holds for.
func byDestination(dsts [][]netip.Addr, per []map[openKey]bool) map[openKey]bool {
	same := true
	for _, m := range per[1:] {
		same = same && maps.Equal(m, per[0])
	}
	if same {
		return per[0]
	}
	out := map[openKey]bool{}
	for i, g := range dsts {
		for k := range per[i] {
			for _, a := range g {
				k.to = a.String()
				out[k] = true
			}
		}
	}
	return out
}
