// This file holds the evaluator's entry (OpenPortsOn), the base chains a
// packet meets at each hook, and the port intervals worth evaluating.

package eval

import (
	"net/netip"
	"sort"

	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// OpenPorts is OpenPortsOn for a node the evaluator knows nothing about
// besides its ruleset (the zero Node).
func OpenPorts(rs *firewall.Ruleset) []firewall.Opening { return OpenPortsOn(rs, firewall.Node{}) }

// OpenPortsOn evaluates which (port, proto) a new connection from an
// arbitrary outside address can reach on node, for TCP and UDP, over IPv4
// and IPv6, by the port the client uses: through the nat table's
// prerouting into the input hook, or by a DNAT into the forward hook (Via
// the target). An undecided condition whose branches end differently makes
// the opening Uncertain. Results are per family, sorted by direction
// (input, forward), family, proto, port, from. The synthetic packet and the
// way it is taken are specified in docs/firewall.md ("The evaluator").
func OpenPortsOn(rs *firewall.Ruleset, node firewall.Node) []firewall.Opening {
	return Compile(rs).OpenPortsOn(node)
}

// OpenPortsOn is the package's OpenPortsOn on the compiled ruleset.
func (c *Compiled) OpenPortsOn(node firewall.Node) []firewall.Opening {
	return c.openPorts(node, "")
}

// Routed is the openings of OpenPorts (a node known by its ruleset alone)
// that are routed forwarding (firewall.Opening.Routed: no DNAT, to an
// address beyond the node), evaluated alone: the way a packet takes to the
// node itself or through a DNAT is not followed. (On a node whose own
// addresses are known, OpenPortsOn splits every opening by the address it
// is reached at where any path tells them apart: there the routed ones are
// not a question of their own.)
func (c *Compiled) Routed() []firewall.Opening {
	return c.openPorts(firewall.Node{}, DirRouted)
}

// openPorts is OpenPortsOn of the paths only asks for (wants).
func (c *Compiled) openPorts(node firewall.Node, only string) []firewall.Opening {
	return c.openPortsCut(node, only, c.rs)
}

// OpenPortsOn are the openings before and after on node, the networks
// behind it cut by the destinations either ruleset names (routedDests of
// both): a routed opening of one is to the same region as the other's
// (Opening.Via), so they compare one for one. Each is evaluated beside the
// other.
func (p *Pair) OpenPortsOn(node firewall.Node) (before, after []firewall.Opening) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		before = p.before.openPortsCut(node, "", p.both)
	}()
	after = p.after.openPortsCut(node, "", p.both)
	<-done
	return before, after
}

// openPortsCut is openPorts with the networks behind the node cut by the
// destinations cut names (c's own ruleset, or a pair's both).
func (c *Compiled) openPortsCut(node firewall.Node, only string, cut *firewall.Ruleset) []firewall.Opening {
	var out []firewall.Opening
	rs := c.rs
	keep := keepsPort(rs)
	dstConds := dstPrefixConds(rs)
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		st := stagesOf(rs, fam)
		st.routed = routedDests(cut, &node, fam)
		atoms := sourceAtoms(rs, fam)
		groups, index := groupAtoms(rs, atoms), atomIndex(atoms)
		for _, proto := range []string{"tcp", "udp"} {
			out = append(out, evalPorts(c.prog, only, &node, st, atoms, groups, index, dstConds, portBounds(rs, fam, protoNum(proto), !keep), fam, proto)...)
		}
	}
	dir := func(d string) int {
		if d == firewall.HookInput {
			return 0
		}
		return 1
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if dir(a.Direction) != dir(b.Direction) {
			return dir(a.Direction) < dir(b.Direction)
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Proto < b.Proto
	})
	return out
}

// stages are one family's base chains, by where the packet meets them.
// pre holds the filter-type chains at prerouting (raw at -300, mangle at
// -150, ...) and nat the nat ones, each in priority order.
type stages struct {
	pre, nat, input, forward []ChainRef
	// routed are the destination regions behind the node (routedDests).
	routed []routedDest
}

// RoutedTo evaluates a new connection (TCP SYN or UDP datagram, proto
// "tcp" or "udp") from an arbitrary outside source, arriving on an uplink
// and sent to dst: the way OpenPortsOn takes a client's packet, but to
// that address rather than one of the node's own. For an address beyond
// the node (a container's, reached by routing through the node rather
// than through a published port) the packet goes prerouting, nat, then
// forward out by the interface whose network holds dst. Open: some path
// accepts it; uncertain: it may also be dropped, or the path cannot be
// followed (reason).
func RoutedTo(rs *firewall.Ruleset, node firewall.Node, dst netip.AddrPort, proto string) (open, uncertain bool, reason string) {
	fam := firewall.FamilyIP6
	if dst.Addr().Unmap().Is4() {
		fam = firewall.FamilyIP
	}
	st := stagesOf(rs, fam)
	e := compile(rs).Evaluator()
	e.bounds = portBounds(rs, fam, protoNum(proto), false)
	pkt := Packet{Family: fam, Proto: protoNum(proto), Port: dst.Port(), OrigPort: dst.Port(), Src: Atom{Other: true}, Dst: dst.Addr().Unmap(), node: &node, own: node.Own(fam)}
	for p, r := range e.client(&st, pkt).all() {
		if r.Accept {
			open = true
			uncertain = uncertain || r.drop || p.reason != ""
			if p.reason != "" {
				reason = p.reason
			}
		}
	}
	return open, uncertain, reason
}

// ChainRef is a base chain with the table it is in.
type ChainRef struct {
	table *firewall.Table
	chain *firewall.Chain
}

// BaseChains are the base chains at hook of the tables of family fam (and
// inet) that keep admits, in priority order.
func BaseChains(rs *firewall.Ruleset, hook, fam string, keep func(*firewall.Chain) bool) []ChainRef {
	var out []ChainRef
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != fam && t.Family != firewall.FamilyInet {
			continue
		}
		for ci := range t.Chains {
			if t.Chains[ci].Hook == hook && (keep == nil || keep(&t.Chains[ci])) {
				out = append(out, ChainRef{t, &t.Chains[ci]})
			}
		}
	}
	// Order does not change a filter outcome (accept only ends one base
	// chain, drop anywhere is final) but it does the nat outcome (the first
	// NAT statement wins); kept as the kernel runs them.
	sort.SliceStable(out, func(i, j int) bool { return out[i].chain.Priority < out[j].chain.Priority })
	return out
}

// eachCond calls f for every condition in the ruleset, vmap keys included.
func eachCond(rs *firewall.Ruleset, f func(c *firewall.Cond)) {
	for ti := range rs.Tables {
		for ci := range rs.Tables[ti].Chains {
			for ri := range rs.Tables[ti].Chains[ci].Rules {
				r := &rs.Tables[ti].Chains[ci].Rules[ri]
				for k := range r.Conds {
					f(&r.Conds[k])
				}
				for k := range r.VMap {
					f(&r.VMap[k].Cond)
				}
			}
		}
	}
}

// portBounds returns the sorted starts of the port intervals on which every
// dport condition is constant; the last interval ends at 65535. With prune,
// only the conditions a packet of family fam and protocol proto may meet:
// those of tables of another family, and of rules that never match such a
// packet (another protocol), cannot tell its ports apart, and splitting
// there would only evaluate more intervals to the same end.
//
// Without prune (keepsPort), every condition of the ruleset, as the
// evaluator always split: a DNAT that keeps the port is reported with the
// interval's first port in Via, so where intervals start shows.
func portBounds(rs *firewall.Ruleset, fam string, proto uint8, prune bool) []int {
	set := map[int]bool{0: true}
	add := func(c *firewall.Cond) {
		if c.Kind != firewall.CondDport && c.Kind != firewall.CondOrigDport {
			return
		}
		for _, p := range c.Ports {
			set[int(p.From)] = true
			if p.To < 65535 {
				set[int(p.To)+1] = true
			}
		}
	}
	// A DNAT to a port range translates ports inside the range to
	// themselves and ports outside to its first: its bounds split too.
	natPorts := func(v *firewall.Verdict) {
		if v.Kind != firewall.VerdictDNAT || v.NAT == nil {
			return
		}
		if lo, hi, ok := v.NAT.Ports(); ok {
			set[int(lo)] = true
			if hi < 65535 {
				set[int(hi)+1] = true
			}
		}
	}
	kind := Packet{Family: fam, Proto: proto}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if prune && t.Family != fam && t.Family != firewall.FamilyInet {
			continue
		}
		for ci := range t.Chains {
		rules:
			for ri := range t.Chains[ci].Rules {
				r := &t.Chains[ci].Rules[ri]
				for k := range r.Conds {
					if c := &r.Conds[k]; prune && condRank(c.Kind) == 0 && kind.Cond(c) == TriFalse {
						continue rules
					}
				}
				for k := range r.Conds {
					add(&r.Conds[k])
				}
				natPorts(&r.Verdict)
				for k := range r.VMap {
					add(&r.VMap[k].Cond)
					natPorts(&r.VMap[k].Verdict)
				}
			}
		}
	}
	out := make([]int, 0, len(set))
	for b := range set {
		out = append(out, b)
	}
	sort.Ints(out)
	return out
}

// keepsPort reports whether a DNAT of rs may keep the client's port (no
// port given, or a range that holds it): its openings name the port in Via.
func keepsPort(rs *firewall.Ruleset) bool {
	keeps := func(v *firewall.Verdict) bool {
		t := v.NAT
		if v.Kind != firewall.VerdictDNAT || t == nil || t.Unknown != "" {
			return false
		}
		_, _, isRange := t.Ports()
		return t.PortMin == 0 && t.PortMax == 0 || isRange && !t.RandomPort
	}
	for ti := range rs.Tables {
		for ci := range rs.Tables[ti].Chains {
			for ri := range rs.Tables[ti].Chains[ci].Rules {
				r := &rs.Tables[ti].Chains[ci].Rules[ri]
				if keeps(&r.Verdict) {
					return true
				}
				for k := range r.VMap {
					if keeps(&r.VMap[k].Verdict) {
						return true
					}
				}
			}
		}
	}
	return false
}

func protoNum(proto string) uint8 {
	if proto == "udp" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

// packet is the synthetic packet of one evaluation.
