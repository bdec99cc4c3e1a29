// This file holds the traffic classes beyond unicast TCP and UDP by port:
// ICMP and ICMPv6 by type, other protocols by number, broadcast and
// multicast services. Each is one synthetic packet per family, judged by
// source region at the input hook, the way OpenPortsOn judges a port.

package eval

import (
	"sort"

	"adoption/firewall"
	"adoption/vocab"
)

// Class is one kind of new packet from outside to the node
// (vocab.Classes).
type Class = vocab.Class

// Classes are the traffic classes the evaluator judges besides TCP and UDP
// by port (vocab.Classes).
func Classes() []Class { return vocab.Classes() }

// ClassByName is the class of family fam called name.
func ClassByName(fam, name string) (Class, bool) { return vocab.ClassByName(fam, name) }

// classPacket is the class's synthetic packet, its source aside.
func classPacket(c Class) Packet {
	return Packet{Family: c.Family, Proto: c.Num, Port: c.Port, OrigPort: c.Port, ICMPType: c.Type, Dst: c.Dst, Cast: c.Cast,
		HopLimit: c.HopLimit, Untracked: c.Untracked}
}

// Class is the region of sources from which a packet of class c reaches
// the node (the input hook).
func (x *Reacher) Class(c Class) SourceReach {
	f := x.family(c.Family)
	x.e.bounds = x.bounds()
	return x.region(f, firewall.HookInput, classPacket(c))
}

// ClassOpenings are the openings of every class on node: one with an
// empty From when any other source reaches it (Uncertain when only under a
// condition the evaluator cannot decide), else one per prefix of the
// region that does. The probe lists them beside OpenPortsOn's.
func ClassOpenings(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	x := NewReacher(rs, node)
	out := []firewall.Opening{}
	for _, c := range Classes() {
		r := x.Class(c)
		if r.Any {
			o := firewall.ClassOpening(c, "")
			o.Uncertain = r.Unsure
			out = append(out, o)
			continue
		}
		for _, p := range r.Only {
			o := firewall.ClassOpening(c, p.String())
			o.Uncertain = r.Unsure
			out = append(out, o)
		}
	}
	return out
}

// Passage is how a class's packet from one source region fares under one
// ruleset: it passes (surely, or only under a condition the evaluator
// cannot decide: Unsure) or not.
type Passage struct {
	Open, Unsure bool
}

// ClassRegion is one source region of a class (From empty: any source the
// rulesets do not single out) and how its packets fare before and after.
type ClassRegion struct {
	Class         Class
	From          string
	Before, After Passage
	// In is the container bridge the packets come in on
	// (CompareClassesIn); "": a client from outside.
	In string
}

// CompareClasses judges every class before and after on node, per source
// region cut by the source prefixes of both rulesets: one region for any
// other source, and one per prefix of the regions that fare otherwise. A
// class that passes in neither is left out.
func CompareClasses(before, after *firewall.Ruleset, node firewall.Node) []ClassRegion {
	return CompareClassesIn(before, after, node, "")
}

// CompareClasses is the package's CompareClasses of the pair.
func (pr *Pair) CompareClasses(node firewall.Node) []ClassRegion {
	return pr.CompareClassesIn(node, "")
}

// CompareClassesIn is CompareClasses for packets coming in on input
// interface iif (a container bridge: a container's ping to the host); ""
// a client from outside.
func CompareClassesIn(before, after *firewall.Ruleset, node firewall.Node, iif string) []ClassRegion {
	return NewPair(Compile(before), Compile(after)).CompareClassesIn(node, iif)
}

// CompareClassesIn is the package's CompareClassesIn of the pair.
func (pr *Pair) CompareClassesIn(node firewall.Node, iif string) []ClassRegion {
	before, after := pr.before.rs, pr.after.rs
	eb, ea := pr.evaluators()
	// Only the input hook is asked about (passageOf).
	eb.only, ea.only = firewall.HookInput, firewall.HookInput
	// Unpruned, the port intervals are the same for every class.
	eb.bounds, ea.bounds = pr.before.anyBounds(), pr.after.anyBounds()
	var out []ClassRegion
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		sb, sa := stagesOf(before, fam), stagesOf(after, fam)
		atoms, groups, index := pr.regions(fam)
		own := node.Own(fam)
		for _, c := range Classes() {
			if c.Family != fam {
				continue
			}
			var other [2]Passage
			regions := map[[2]Passage][]Atom{}
			var order [][2]Passage
			seenB, seenA := 0, 0
			for gi, g := range groups {
				if gi == 1 {
					if !eb.sawSource && !ea.sawSource {
						break
					}
					seenB, seenA = len(eb.sources), len(ea.sources)
				}
				if gi == 0 {
					eb.startSources()
					ea.startSources()
				} else if eb.likeOther(g[0], seenB) && ea.likeOther(g[0], seenA) {
					continue // it fares as any other does
				}
				eb.sawSource, ea.sawSource = false, false
				pkt := classPacket(c)
				pkt.Src, pkt.node, pkt.own, pkt.iif = g[0], &node, own, iif
				k := [2]Passage{passageOf(eb.client(&sb, pkt)), passageOf(ea.client(&sa, pkt))}
				if gi == 0 {
					other = k
					continue
				}
				if k == other {
					continue
				}
				if regions[k] == nil {
					order = append(order, k)
				}
				regions[k] = append(regions[k], g...)
			}
			if other[0].Open || other[1].Open {
				out = append(out, ClassRegion{Class: c, Before: other[0], After: other[1], In: iif})
			}
			for _, k := range order {
				if !k[0].Open && !k[1].Open {
					continue
				}
				for _, p := range atomPrefixes(regions[k], atoms, index) {
					out = append(out, ClassRegion{Class: c, From: p.String(), Before: k[0], After: k[1], In: iif})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Class.Family != b.Class.Family || a.Class.Name != b.Class.Name {
			return false
		}
		return fromLess(a.From, b.From)
	})
	return out
}
