// This file holds new connections from a container bridge to the node
// itself (the input hook, the bridge their input interface): a container
// reaching a host service. Each bridge is judged per port interval and
// source region, before and after, the way classes are.

package eval

import (
	"sort"

	"adoption/firewall"
)

// In is a Reacher of the same ruleset and node whose clients come in on
// input interface iif (a container bridge, or a wildcard of them).
func (x *Reacher) In(iif string) *Reacher {
	return &Reacher{rs: x.rs, node: x.node, e: x.e, fams: x.fams, shared: x.shared, iif: iif}
}

// HostBridges are the container bridges whose traffic to the node itself
// is judged: on a node whose interfaces are known, its container bridges
// (Node.Behind); else the bridges the rulesets' input interface conditions
// name (firewall.BridgeTool, wildcards such as "br-*" included).
func HostBridges(node firewall.Node, rss ...*firewall.Ruleset) []string {
	if node.HasInterfaces() {
		return node.Behind()
	}
	seen := map[string]bool{}
	var out []string
	for _, rs := range rss {
		eachCond(rs, func(c *firewall.Cond) {
			if c.Kind != firewall.CondIifname {
				return
			}
			for _, n := range c.Names {
				if n != "*" && firewall.BridgeTool(n) != "" && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		})
	}
	sort.Strings(out)
	return out
}

// BridgeRegion is one port interval of one protocol from one source
// region (From empty: any source the rulesets do not single out) of new
// connections coming in on a container bridge (Opening.In) to the node
// itself, and how they fare before and after.
type BridgeRegion struct {
	Opening       firewall.Opening
	Before, After Passage
}

// CompareBridgeInput judges new TCP and UDP connections from each of
// bridges to the node itself (the input hook) before and after on node,
// per port interval and source region cut by both rulesets. Regions that
// pass in neither are left out.
func CompareBridgeInput(before, after *firewall.Ruleset, node firewall.Node, bridges []string) []BridgeRegion {
	return NewPair(Compile(before), Compile(after)).CompareBridgeInput(node, bridges)
}

// CompareBridgeInput is the package's CompareBridgeInput of the pair.
func (pr *Pair) CompareBridgeInput(node firewall.Node, bridges []string) []BridgeRegion {
	before, after, both := pr.before.rs, pr.after.rs, pr.both
	eb, ea := pr.evaluators()
	// Only the input hook is asked about (clientPassage).
	eb.only, ea.only = firewall.HookInput, firewall.HookInput
	var out []BridgeRegion
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		sb, sa := stagesOf(before, fam), stagesOf(after, fam)
		atoms, groups, index := pr.regions(fam)
		own := node.Own(fam)
		for _, proto := range []string{"tcp", "udp"} {
			bounds := portBounds(both, fam, protoNum(proto), true)
			eb.bounds, ea.bounds = bounds, bounds
			for _, br := range bridges {
				type key struct {
					from string
					b, a Passage
				}
				open := map[key]*span{}
				flush := func(k key, s *span) {
					o := firewall.Opening{Port: uint16(s.start), Proto: proto, Direction: firewall.HookInput, From: k.from, Family: fam, In: br}
					if s.end != s.start {
						o.PortEnd = uint16(s.end)
					}
					out = append(out, BridgeRegion{Opening: o, Before: k.b, After: k.a})
				}
				for bi, start := range bounds {
					end := 65535
					if bi+1 < len(bounds) {
						end = bounds[bi+1] - 1
					}
					var other [2]Passage
					regions := map[[2]Passage][]Atom{}
					for gi, g := range groups {
						if gi == 1 && !eb.sawSource && !ea.sawSource {
							break
						}
						eb.sawSource, ea.sawSource = false, false
						pkt := Packet{Family: fam, Proto: protoNum(proto), Port: uint16(start), OrigPort: uint16(start), Src: g[0], node: &node, own: own, iif: br}
						k := [2]Passage{eb.clientPassage(&sb, pkt), ea.clientPassage(&sa, pkt)}
						if gi == 0 {
							other = k
						} else if k != other {
							regions[k] = append(regions[k], g...)
						}
					}
					here := map[key]bool{}
					if other[0].Open || other[1].Open {
						here[key{"", other[0], other[1]}] = true
					}
					for k, as := range regions {
						if !k[0].Open && !k[1].Open {
							continue
						}
						for _, p := range atomPrefixes(as, atoms, index) {
							here[key{p.String(), k[0], k[1]}] = true
						}
					}
					advance(open, here, start, end, flush)
				}
				for k, s := range open {
					flush(k, s)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Opening, out[j].Opening
		if a.In != b.In {
			return a.In < b.In
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
		return fromLess(a.From, b.From)
	})
	return out
}

// BridgeOpenings are the openings of rs to the node itself from its
// container bridges (HostBridges): per bridge (In), port interval and
// source region, Uncertain where only under a condition the evaluator
// cannot decide. The probe lists them beside OpenPortsOn's.
func BridgeOpenings(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	return Compile(rs).BridgeOpenings(node)
}

// BridgeOpenings is the package's BridgeOpenings of the compiled ruleset.
func (c *Compiled) BridgeOpenings(node firewall.Node) []firewall.Opening {
	out := []firewall.Opening{}
	pr := NewPair(c, Compile(&firewall.Ruleset{}))
	for _, r := range pr.CompareBridgeInput(node, HostBridges(node, c.rs)) {
		if r.Before.Open {
			o := r.Opening
			o.Uncertain = r.Before.Unsure
			out = append(out, o)
		}
	}
	return out
}
