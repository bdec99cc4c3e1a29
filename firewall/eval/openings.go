// This file holds the evaluation per port interval and source region, and
// the openings it reports, merged and sorted.

package eval

import (
	"net/netip"
	"sort"

	"adoption/firewall"
)

type openKey struct {
	from      string
	uncertain bool
	path      path
}

func evalPorts(prog *program, node *firewall.Node, st stages, atoms []Atom, groups [][]Atom, index map[netip.Prefix]int, bounds []int, fam, proto string) []firewall.Opening {
	pnum := protoNum(proto)
	e := prog.Evaluator()
	open := map[openKey]*span{}
	var out []firewall.Opening
	flush := func(k openKey, s *span) {
		o := firewall.Opening{Port: uint16(s.start), Proto: proto, Direction: k.path.dir, From: k.from, Uncertain: k.uncertain,
			Family: fam, Via: k.path.via, Reason: k.path.reason}
		if s.end != s.start {
			o.PortEnd = uint16(s.end)
		}
		out = append(out, o)
	}
	for bi, start := range bounds {
		end := 65535
		if bi+1 < len(bounds) {
			end = bounds[bi+1] - 1
		}
		here := map[openKey]bool{}
		var other map[path]Result
		sure, unsure := map[path][]Atom{}, map[path][]Atom{} // open prefix atoms worth naming
		for ai, g := range groups {
			if ai == 1 && !e.sawSource {
				// Any other source went its way without a source
				// condition looked at: every source goes the same way,
				// and a source that goes the way of any other is not
				// worth naming.
				break
			}
			e.sawSource = false
			res := e.client(&st, Packet{Family: fam, Proto: pnum, Port: uint16(start), OrigPort: uint16(start), Src: g[0], node: node})
			if ai == 0 {
				other = res
				for p, r := range res {
					if r.Accept {
						here[openKey{"", r.drop || p.reason != "", p}] = true
					}
				}
				continue
			}
			for p, r := range res {
				if !r.Accept {
					continue
				}
				o := other[p]
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
					here[openKey{pfx.String(), group.uncertain || p.reason != "", p}] = true
				}
			}
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
