// This file holds the comparisons by source region: which sources reach one
// port (what a kept opening's restriction is), and where one ruleset lets
// a new connection through that another did not (a widening).

package eval

import (
	"net/netip"
	"slices"
	"sort"

	"adoption/firewall"
)

// SourceReach is the region of sources from which a new connection reaches
// one port at one hook, for one family.
type SourceReach struct {
	// Any: every source but those in Except reaches the port.
	Any bool
	// Only, when not Any: the sources that reach it, as the fewest CIDRs.
	Only []netip.Prefix
	// Except, when Any: the sources that do not.
	Except []netip.Prefix
	// Unsure: some of the region reaches it only under a condition the
	// evaluator cannot decide (a rate limit, an undecoded match).
	Unsure bool
}

// Open reports whether any source reaches the port.
func (s SourceReach) Open() bool { return s.Any || len(s.Only) > 0 }

// Plain reports whether every source reaches the port, surely.
func (s SourceReach) Plain() bool { return s.Any && len(s.Except) == 0 && !s.Unsure }

// SourcesAt is the region of sources from which a new connection of proto
// to port (the port the client uses) reaches dir ("input", or "forward"
// through a DNAT) on node, for family fam. Regions the evaluator cannot
// decide count as reaching it (as OpenPortsOn counts them open), with
// Unsure set. Routed forwarding (no DNAT) is counted apart: dir DirRouted,
// to any network behind the node.
func SourcesAt(rs *firewall.Ruleset, node firewall.Node, dir, fam, proto string, port uint16) SourceReach {
	return NewReacher(rs, node).At(dir, fam, proto, port)
}

// Reacher answers SourcesAt for one ruleset and node, compiled once.
type Reacher struct {
	rs   *firewall.Ruleset
	node firewall.Node
	e    *Evaluator
	fams map[string]*reachFamily
	// shared is what depends on the ruleset alone, shared by the Reachers
	// of one ruleset on other nodes (On) and interfaces (In).
	shared *reachShared
	// iif is the input interface of the Reacher's clients (In); "": a
	// client from outside, on an uplink.
	iif string
}

// reachShared is what a Reacher reads of its ruleset alone.
type reachShared struct {
	atoms  map[string]*familyAtoms
	bounds []int // port intervals, any family and proto (portBounds unpruned)
}

type familyAtoms struct {
	atoms  []Atom
	groups [][]Atom
	index  map[netip.Prefix]int
}

type reachFamily struct {
	st stages
	*familyAtoms
	own []netip.Addr // the node's own addresses of the family
}

// NewReacher compiles rs for SourcesAt questions on node.
func NewReacher(rs *firewall.Ruleset, node firewall.Node) *Reacher {
	return Compile(rs).Reacher(node)
}

// On is a Reacher of the same ruleset on node, sharing the compiled
// ruleset and what is read of it alone.
func (x *Reacher) On(node firewall.Node) *Reacher {
	return &Reacher{rs: x.rs, node: node, e: x.e, fams: map[string]*reachFamily{}, shared: x.shared}
}

// Ruleset is the Reacher's ruleset.
func (x *Reacher) Ruleset() *firewall.Ruleset { return x.rs }

// bounds are the port intervals of the Reacher's ruleset.
func (x *Reacher) bounds() []int {
	if x.shared.bounds == nil {
		x.shared.bounds = portBounds(x.rs, "", 0, false)
	}
	return x.shared.bounds
}

// At is SourcesAt on the Reacher's ruleset and node.
func (x *Reacher) At(dir, fam, proto string, port uint16) SourceReach {
	f := x.family(fam)
	x.e.bounds = x.bounds()
	return x.region(f, dir, Packet{Family: fam, Proto: protoNum(proto), Port: port, OrigPort: port})
}

func (x *Reacher) family(fam string) *reachFamily {
	f := x.fams[fam]
	if f == nil {
		a := x.shared.atoms[fam]
		if a == nil {
			atoms := sourceAtoms(x.rs, fam)
			a = &familyAtoms{atoms: atoms, groups: groupAtoms(x.rs, atoms), index: atomIndex(atoms)}
			x.shared.atoms[fam] = a
		}
		f = &reachFamily{st: stagesOf(x.rs, fam), familyAtoms: a, own: x.node.Own(fam)}
		f.st.routed = routedDests(x.rs, &x.node, fam)
		x.fams[fam] = f
	}
	return f
}

// region is the region of sources from which pkt (its source aside)
// reaches dir.
func (x *Reacher) region(f *reachFamily, dir string, pkt Packet) SourceReach {
	out, _, _ := x.regionAtoms(f, dir, pkt)
	return out
}

// regionAtoms is region with the atoms singled out: those that reach dir
// (open, when not Any) and those that do not (closed, when Any). An atom
// in neither goes the way of any other source.
func (x *Reacher) regionAtoms(f *reachFamily, dir string, pkt Packet) (out SourceReach, open, closed []Atom) {
	st, atoms, groups, index, e := f.st, f.atoms, f.groups, f.index, x.e
	pkt.node, pkt.own, pkt.iif = &x.node, f.own, x.iif
	// Only dir's paths are asked about (reachesDir): the others are not
	// evaluated.
	e.only = dir
	defer func() { e.only = "" }()
	seen := 0
	for gi, g := range groups {
		if gi == 1 {
			if !e.sawSource {
				break
			}
			seen = len(e.sources)
		}
		if gi == 0 {
			e.startSources()
		} else if e.likeOther(g[0], seen) {
			// It goes the way of any other: open when any other is
			// (Only is then not asked), closed when not (Except is not).
			continue
		}
		e.sawSource = false
		pkt.Src = g[0]
		r := e.clientReach(&st, pkt, dir)
		if r.drop && r.Accept {
			out.Unsure = true
		}
		if gi == 0 {
			out.Any = r.Accept
			continue
		}
		if r.Accept {
			open = append(open, g...)
		} else {
			closed = append(closed, g...)
		}
	}
	if out.Any {
		if len(closed) > 0 {
			out.Except = atomPrefixes(closed, atoms, index)
		}
	} else if len(open) > 0 {
		out.Only = atomPrefixes(open, atoms, index)
	}
	return out, open, closed
}

// DirRouted asks SourcesAt for routed forwarding (no DNAT), to any
// network behind the node.
const DirRouted = "routed"

// reachesDir reports whether path p is one of dir's, whose results a
// client's reach to dir joins: "forward" through a DNAT, routed forwarding
// (DirRouted) apart.
func reachesDir(p path, dir string) bool {
	if dir == DirRouted {
		return p.routed
	}
	return p.dir == dir && !p.routed
}

func stagesOf(rs *firewall.Ruleset, fam string) stages {
	return stages{
		pre:     BaseChains(rs, firewall.HookPrerouting, fam, func(ch *firewall.Chain) bool { return ch.Type != "nat" }),
		nat:     BaseChains(rs, firewall.HookPrerouting, fam, func(ch *firewall.Chain) bool { return ch.Type == "nat" }),
		input:   BaseChains(rs, firewall.HookInput, fam, nil),
		forward: BaseChains(rs, firewall.HookForward, fam, nil),
	}
}

// sportBounds are the source ports where a source port condition of rs
// changes its value: 1 (a client's lowest) and each range's ends.
func sportBounds(rs *firewall.Ruleset) []uint16 {
	set := map[int]bool{1: true}
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind != firewall.CondSport {
			return
		}
		for _, p := range c.Ports {
			set[max(int(p.From), 1)] = true
			if p.To < 65535 {
				set[int(p.To)+1] = true
			}
		}
	})
	out := make([]uint16, 0, len(set))
	for p := range set {
		out = append(out, uint16(p))
	}
	slices.Sort(out)
	return out
}

// Widening is a region where after lets a new connection through that
// before does not. Opening says where (From empty: any source the rulesets
// do not single out); Surer means before let it through only under a
// condition the evaluator cannot decide, and after surely does.
type Widening struct {
	Opening firewall.Opening
	Surer   bool
}

// Widened lists where after surely lets a new connection from outside
// through, by direction, family, proto, port interval and source region,
// that before does not let through at all, or only under an undecided
// condition (Surer). Routed forwarding (no DNAT) is compared per network
// behind the node (Via), on a node whose interfaces are known. Both
// rulesets are cut by the source prefixes and port conditions of either.
func Widened(before, after *firewall.Ruleset, node firewall.Node) []Widening {
	return NewPair(Compile(before), Compile(after)).Widened(node)
}

// Widened is the package's Widened of the pair.
func (pr *Pair) Widened(node firewall.Node) []Widening {
	before, after, both := pr.before.rs, pr.after.rs, pr.both
	eb, ea := pr.evaluators()
	keep := pr.keep
	var out []Widening
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		sb, sa := stagesOf(before, fam), stagesOf(after, fam)
		sb.routed = routedDests(both, &node, fam)
		sa.routed = sb.routed
		atoms, groups, index := pr.regions(fam)
		for _, proto := range []string{"tcp", "udp"} {
			bounds := portBounds(both, fam, protoNum(proto), !keep)
			eb.bounds, ea.bounds = bounds, bounds
			own := node.Own(fam)
			type key struct {
				dir, via, from string
				surer          bool
			}
			open := map[key]*span{}
			flush := func(k key, s *span) {
				o := firewall.Opening{Port: uint16(s.start), Proto: proto, Direction: k.dir, From: k.from, Family: fam, Via: k.via}
				if s.end != s.start {
					o.PortEnd = uint16(s.end)
				}
				out = append(out, Widening{Opening: o, Surer: k.surer})
			}
			for bi, start := range bounds {
				end := 65535
				if bi+1 < len(bounds) {
					end = bounds[bi+1] - 1
				}
				here := map[key]bool{}
				wide := map[key][]Atom{}
				var otherKeys []key
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
						// It goes the way of any other: it widens where any
						// other does.
						for _, k := range otherKeys {
							wide[k] = append(wide[k], g...)
						}
						continue
					}
					eb.sawSource, ea.sawSource = false, false
					pkt := Packet{Family: fam, Proto: protoNum(proto), Port: uint16(start), OrigPort: uint16(start), Src: g[0], node: &node, own: own}
					// A client's source port is any; where a rule of either
					// looks at it, each source port region is compared
					// apart, and the port widens where any of them does.
					eb.looked, ea.looked = 0, 0
					sports := []uint16{0}
					added := map[key]bool{}
					for si := 0; si < len(sports); si++ {
						pkt.Sport = sports[si]
						rb := eb.client(&sb, pkt)
						ra := ea.client(&sa, pkt)
						if si == 0 && (eb.looked|ea.looked)&lookSport != 0 {
							sports = append(sports, sportBounds(both)...)
							continue
						}
						for p, r := range ra.all() {
							if !r.Accept || r.drop || (p.routed && p.via == "") {
								continue
							}
							b := Result{}
							for q, x := range rb.all() {
								if q.dir == p.dir && q.via == p.via && q.routed == p.routed {
									b.Accept, b.drop = b.Accept || x.Accept, b.drop || x.drop
								}
							}
							if b.Accept && !b.drop {
								continue
							}
							k := key{dir: p.dir, via: p.via, surer: b.Accept}
							if gi == 0 {
								if !here[k] {
									otherKeys = append(otherKeys, k)
								}
								here[k] = true
							} else if !added[k] {
								added[k] = true
								wide[k] = append(wide[k], g...)
							}
						}
					}
				}
				for k, as := range wide {
					for _, pfx := range atomPrefixes(as, atoms, index) {
						k.from = pfx.String()
						here[k] = true
					}
				}
				advance(open, here, start, end, flush)
			}
			for k, s := range open {
				flush(k, s)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Opening, out[j].Opening
		if a.Direction != b.Direction {
			return a.Direction == firewall.HookInput
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.From != b.From {
			return fromLess(a.From, b.From)
		}
		// The rest in a fixed order too: they were flushed from a map.
		if a.Via != b.Via {
			return a.Via < b.Via
		}
		if a.PortEnd != b.PortEnd {
			return a.PortEnd < b.PortEnd
		}
		return !out[i].Surer && out[j].Surer
	})
	return out
}

// inert reports whether rule r of table t sends a packet on to the next
// rule whether or not it matches: no verdict (a log, a counter), or a jump
// to a chain that can only return (ufw's rate-limited logging). Its
// conditions cannot decide the packet's fate.
func inert(t *firewall.Table, r *firewall.Rule, depth int) bool {
	switch {
	case r.VMap != nil:
		return false
	case r.Verdict.Kind == firewall.VerdictContinue:
		return true
	case r.Verdict.Kind != firewall.VerdictJump || depth > 16:
		return false
	}
	for ci := range t.Chains {
		if ch := &t.Chains[ci]; ch.Name == r.Verdict.Target {
			return returnsOnly(t, ch, depth+1)
		}
	}
	return false // a chain not listed: anything may happen there
}

// returnsOnly reports whether regular chain ch of t can only return to its
// caller, whatever its rules match: every rule returns or is inert.
func returnsOnly(t *firewall.Table, ch *firewall.Chain, depth int) bool {
	if ch.Hook != "" || ch.Unknown != "" {
		return false
	}
	for ri := range ch.Rules {
		if r := &ch.Rules[ri]; r.VMap != nil || r.Verdict.Kind != firewall.VerdictReturn && !inert(t, r, depth) {
			return false
		}
	}
	return true
}
