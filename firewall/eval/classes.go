// This file holds the comparison of the header space beyond unicast TCP
// and UDP by port: every region of firewall.ClassesOf (protocols, ICMP
// types, multicast, broadcast and link-local destinations, their ports),
// one synthetic packet per region, judged by source region at the input
// hook, the way OpenPortsOn judges a port. The regions are cut where a rule
// of either ruleset tells packets apart, so one packet stands for all of
// its region.

package eval

import (
	"net/netip"
	"slices"
	"sort"

	"adoption/firewall"
	"adoption/vocab"
)

// Class is one region of new packets from outside to the node
// (firewall.ClassesOf).
type Class = firewall.Class

// ClassesOf are the regions of family fam the rulesets and the declared
// regions extra cut the header space into (firewall.ClassesOf).
func ClassesOf(fam string, rss []*firewall.Ruleset, extra []string) []Class {
	return firewall.ClassesOf(fam, rss, extra)
}

// ClassByName is the region of family fam spelled name.
func ClassByName(fam, name string) (Class, bool) { return vocab.ClassByName(fam, name) }

// classPacket is the region's synthetic packet, its source aside: its
// first protocol, type, destination, source and destination port, in the conntrack state and
// with the hop limit its senders give it.
func classPacket(c Class) Packet {
	p := Packet{Family: c.Family, Proto: c.Num, Cast: c.Cast(), HopLimit: c.HopLimit()}
	if vocab.PortProto(c.Num) {
		p.Port, p.OrigPort = c.Port, c.Port
		// A source port of 0 is any (Packet.Sport): the region's last
		// stands for it.
		p.Sport = c.Sport
		if p.Sport == 0 {
			p.Sport = c.SportEnd
		}
	}
	if c.ICMP() {
		p.ICMPType = c.Type
	}
	if c.Dst.IsValid() {
		p.Dst = c.Dst
		p.Local = p.Cast == firewall.PacketHost // link-local: the node's own
	}
	switch c.CtState() {
	case firewall.CtStateUntracked:
		p.Untracked = true
	case firewall.CtStateInvalid:
		p.Invalid = true
	}
	return p
}

// Class is the region of sources from which a packet of region c reaches
// the node (the input hook).
func (x *Reacher) Class(c Class) SourceReach {
	f := x.family(c.Family)
	x.e.bounds = x.bounds()
	return x.region(f, firewall.HookInput, classPacket(c))
}

// Classes is Class of each region of cs, in order. A region that differs
// from one asked before only in its source ports, or only in its
// destination among those of one cast, fares as that one when its
// evaluation looked at no condition on them (as CompareClassesIn's): it
// is not evaluated again.
func (x *Reacher) Classes(cs []Class) []SourceReach {
	out := make([]SourceReach, len(cs))
	type done struct {
		i      int
		looked uint8
	}
	// Per family: a region's key holds no family.
	bySport, byDst := map[string]map[classKey]done{}, map[string]map[classKey]done{}
	nSport, nDst := shortcutCounts(cs)
	for i, c := range cs {
		if bySport[c.Family] == nil {
			bySport[c.Family], byDst[c.Family] = make(map[classKey]done, nSport), make(map[classKey]done, nDst)
		}
		fs, fd := bySport[c.Family], byDst[c.Family]
		ks, kd := classKeys(c)
		sport, dst := vocab.PortProto(c.Num), c.Dst.IsValid()
		if d, ok := fs[ks]; sport && ok && shortcuts && d.looked&lookSport == 0 {
			out[i] = out[d.i]
			if dst {
				fd[kd] = d
			}
			continue
		}
		if d, ok := fd[kd]; dst && ok && shortcuts && d.looked&lookDst == 0 {
			out[i] = out[d.i]
			if sport {
				fs[ks] = d
			}
			continue
		}
		x.e.looked = 0
		out[i] = x.Class(c)
		d := done{i: i, looked: x.e.looked}
		if _, ok := fs[ks]; sport && !ok {
			fs[ks] = d
		}
		if _, ok := fd[kd]; dst && !ok {
			fd[kd] = d
		}
	}
	return out
}

// ClassOpenings are the regions rs lets through on node, merged where
// they fare alike: one opening with an empty From when any other source
// reaches it (Uncertain when only under a condition the evaluator cannot
// decide), else one per prefix of the region that does. The probe lists
// them beside OpenPortsOn's.
func ClassOpenings(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	return Compile(rs).ClassOpenings(node)
}

// ClassOpenings is the package's ClassOpenings of the compiled ruleset.
func (c *Compiled) ClassOpenings(node firewall.Node) []firewall.Opening {
	rs, x := c.rs, c.Reacher(node)
	type key struct {
		from   string
		unsure bool
	}
	groups := map[key][]Class{}
	var order []key
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		classes := ClassesOf(fam, []*firewall.Ruleset{rs}, nil)
		for i, r := range x.Classes(classes) {
			c := classes[i]
			var froms []string
			if r.Any {
				froms = []string{""}
			}
			if !r.Any {
				for _, p := range r.Only {
					froms = append(froms, p.String())
				}
			}
			for _, f := range froms {
				k := key{f, r.Unsure}
				if groups[k] == nil {
					order = append(order, k)
				}
				groups[k] = append(groups[k], c)
			}
		}
	}
	out := []firewall.Opening{}
	for _, k := range order {
		for _, c := range firewall.MergeClassesOwned(groups[k]) {
			o := firewall.ClassOpening(c, k.from)
			o.Uncertain = k.unsure
			out = append(out, o)
		}
	}
	return out
}

// Passage is how a region's packet from one source region fares under
// one ruleset: it passes (surely, or only under a condition the evaluator
// cannot decide: Unsure) or not.
type Passage struct {
	Open, Unsure bool
}

// ClassRegion is one region of packets from one source region (From
// empty: any source the rulesets do not single out) and how its packets
// fare before and after.
type ClassRegion struct {
	Class         Class
	From          string
	Before, After Passage
	// In is the container bridge the packets come in on
	// (CompareClassesIn); "": a client from outside.
	In string
}

// CompareClasses judges every region before and after on node
// (CompareClassesIn from outside).
func CompareClasses(before, after *firewall.Ruleset, node firewall.Node, extra []string) []ClassRegion {
	return CompareClassesIn(before, after, node, "", extra)
}

// CompareClasses is the package's CompareClasses of the pair.
func (pr *Pair) CompareClasses(node firewall.Node, extra []string) []ClassRegion {
	return pr.CompareClassesIn(node, "", extra)
}

// CompareClassesIn judges every region of both rulesets (and of the
// declared regions extra, so that each region is within a declared one
// or outside all) before and after on node, for packets coming in on
// input interface iif (a container bridge: a container's ping to the
// host; "" a client from outside), per source region cut by the source
// prefixes of both rulesets: one for any other source, and one per prefix
// of the regions that fare otherwise. A region that passes in neither is
// left out. Regions are not merged (MergeRegions).
func CompareClassesIn(before, after *firewall.Ruleset, node firewall.Node, iif string, extra []string) []ClassRegion {
	return NewPair(Compile(before), Compile(after)).CompareClassesIn(node, iif, extra)
}

// CompareClassesIn is the package's CompareClassesIn of the pair.
func (pr *Pair) CompareClassesIn(node firewall.Node, iif string, extra []string) []ClassRegion {
	before, after := pr.before.rs, pr.after.rs
	eb, ea := pr.evaluators()
	// Only the input hook is asked about (clientPassage).
	eb.only, ea.only = firewall.HookInput, firewall.HookInput
	// Unpruned, the port intervals are the same for every region.
	eb.bounds, ea.bounds = pr.before.anyBounds(), pr.after.anyBounds()
	var out []ClassRegion
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		sb, sa := stagesOf(before, fam), stagesOf(after, fam)
		atoms, groups, index := pr.regions(fam)
		own := node.Own(fam)
		// A region that differs from one evaluated only in its source
		// ports, or only in its destination among those of one cast,
		// fares as that one when its evaluation looked at no condition
		// on them.
		type done struct {
			out    []ClassRegion
			looked uint8
		}
		classes := ClassesOf(fam, []*firewall.Ruleset{before, after}, extra)
		nSport, nDst := shortcutCounts(classes)
		bySport, byDst := make(map[classKey]done, nSport), make(map[classKey]done, nDst)
		// Most regions come from one source region.
		out = slices.Grow(out, len(classes))
		for _, c := range classes {
			ks, kd := classKeys(c)
			sport, dst := vocab.PortProto(c.Num), c.Dst.IsValid()
			if d, ok := bySport[ks]; sport && ok && shortcuts && d.looked&lookSport == 0 {
				out = appendAs(out, d.out, c)
				if dst {
					byDst[kd] = d
				}
				continue
			}
			if d, ok := byDst[kd]; dst && ok && shortcuts && d.looked&lookDst == 0 {
				out = appendAs(out, d.out, c)
				if sport {
					bySport[ks] = d
				}
				continue
			}
			eb.looked, ea.looked = 0, 0
			first := len(out)
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
				k := [2]Passage{eb.clientPassage(&sb, pkt), ea.clientPassage(&sa, pkt)}
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
			d := done{out: out[first:len(out):len(out)], looked: eb.looked | ea.looked}
			if _, ok := bySport[ks]; sport && !ok {
				bySport[ks] = d
			}
			if _, ok := byDst[kd]; dst && !ok {
				byDst[kd] = d
			}
		}
	}
	return out
}

// classKey is a region of one family (ClassesOf's, whose protocol's name
// follows from its number) without its family and protocol's name: a
// map's key hashed without strings.
type classKey struct {
	num             uint8
	other, own      bool
	typ, typeEnd    uint8
	dst, dstEnd     netip.Addr
	port, portEnd   uint16
	sport, sportEnd uint16
}

// shortcutCounts are how many regions of cs have source ports (whose
// siblings by source port a map keeps) and a destination (whose siblings
// by destination one keeps): a region of neither has no sibling.
func shortcutCounts(cs []Class) (sport, dst int) {
	for i := range cs {
		if vocab.PortProto(cs[i].Num) {
			sport++
		}
		if cs[i].Dst.IsValid() {
			dst++
		}
	}
	return sport, dst
}

// classKeys are region c's keys without its source ports and without its
// destination but its cast: a region with the same key fares as c where
// c's evaluation looked at no condition on them.
func classKeys(c Class) (bySport, byDst classKey) {
	k := classKey{num: c.Num, other: c.Other, own: c.Own, typ: c.Type, typeEnd: c.TypeEnd, dst: c.Dst, dstEnd: c.DstEnd,
		port: c.Port, portEnd: c.PortEnd, sport: c.Sport, sportEnd: c.SportEnd}
	bySport, byDst = k, k
	bySport.sport, bySport.sportEnd = 0, 0
	if c.Dst.IsValid() {
		byDst.dst, byDst.dstEnd = vocab.CastAddr(c.Cast()), netip.Addr{}
	}
	return bySport, byDst
}

// appendAs appends the regions of rs to out as regions of class c.
func appendAs(out, rs []ClassRegion, c Class) []ClassRegion {
	for _, r := range rs {
		r.Class = c
		out = append(out, r)
	}
	return out
}

// MergeRegions joins the regions of rs that fare alike, from the same
// sources, in the same way, with the same tag (tag tells apart what the
// caller must not join: a declared region from one that is not), into
// the fewest regions (firewall.MergeClasses), in a stable order.
func MergeRegions(rs []ClassRegion, tag func(ClassRegion) string) []ClassRegion {
	type key struct {
		from, in, tag string
		before, after Passage
	}
	// Each region's group is found first, then the groups' regions laid
	// out in one slice, group after group, in the order of rs.
	index := map[key]int{}
	var order []key
	of := make([]int, len(rs))
	var count []int
	for i, r := range rs {
		k := key{r.From, r.In, tag(r), r.Before, r.After}
		g, ok := index[k]
		if !ok {
			g = len(order)
			index[k] = g
			order = append(order, k)
			count = append(count, 0)
		}
		of[i] = g
		count[g]++
	}
	start := make([]int, len(order)+1)
	for g, n := range count {
		start[g+1] = start[g] + n
	}
	classes := make([]Class, len(rs))
	next := slices.Clone(start[:len(order)])
	for i, r := range rs {
		classes[next[of[i]]] = r.Class
		next[of[i]]++
	}
	var out []ClassRegion
	for g, k := range order {
		for _, c := range firewall.MergeClassesOwned(classes[start[g]:start[g+1]:start[g+1]]) {
			out = append(out, ClassRegion{Class: c, From: k.from, In: k.in, Before: k.before, After: k.after})
		}
	}
	// Each region is spelled once, not at every comparison.
	type spelled struct {
		r        ClassRegion
		spelling string
	}
	sp := make([]spelled, len(out))
	for i, r := range out {
		sp[i] = spelled{r, r.Class.Spelling()}
	}
	sort.SliceStable(sp, func(i, j int) bool {
		a, b := sp[i], sp[j]
		if a.r.Class.Family != b.r.Class.Family || a.spelling != b.spelling {
			return a.r.Class.Family < b.r.Class.Family || a.r.Class.Family == b.r.Class.Family && a.spelling < b.spelling
		}
		return fromLess(a.r.From, b.r.From)
	})
	for i := range sp {
		out[i] = sp[i].r
	}
	return out
}
