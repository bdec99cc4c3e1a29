// This file holds routed (non-DNAT) forwarding on a node whose interfaces
// are known: the destinations behind the node a client may route a packet
// to (the networks of its container bridges), one per region that the
// ruleset's destination conditions treat alike.

package eval

import (
	"net/netip"
	"slices"
	"sort"

	"adoption/firewall"
)

// routedDest is one destination region behind the node: addr stands for
// every address of it (the destination conditions hold all of them or
// none), via names it in openings (the bridge's network, or the named
// prefix within it).
type routedDest struct {
	addr netip.Addr
	via  string
	// rest is the index of the rest of the network in the list, for a
	// named region (-1 for the rest itself). A named region goes the way
	// of the rest but for the protocols and ports of the rules that name
	// it (ports by protocol; all: any port or protocol).
	rest  int
	all   bool
	ports map[int][]firewall.PortRange
	// iface is the uplink whose network it is (a LAN behind the node on
	// an interface of its own): a client reaches it coming in by another
	// uplink. "" for a container bridge's.
	iface string
}

// routedDests are the destination regions of family fam behind node (the
// networks of the interfaces it calls container bridges, and where the
// node has more than one uplink, each uplink's networks: a LAN or a
// tunnel's network, reached from the others), cut by the destination
// prefixes of conds: for each network, the region of each prefix within
// it (minus the more specific ones) and the rest of it. None for a node
// that does not forward fam or whose interfaces are not known.
func routedDests(rs *firewall.Ruleset, node *firewall.Node, fam string) []routedDest {
	conds := dstPrefixConds(rs)
	if !node.HasInterfaces() || !node.Forwards(fam) {
		return nil
	}
	var named []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, c := range conds {
		for _, q := range c.Prefixes {
			q = q.Masked()
			if q.Addr().Is4() == (fam == firewall.FamilyIP) && !seen[q] {
				seen[q] = true
				named = append(named, q)
			}
		}
	}
	sort.Slice(named, func(i, j int) bool { return named[i].Bits() > named[j].Bits() })
	var out []routedDest
	done := map[netip.Prefix]bool{}
	behind := node.Behind()
	lans := map[string]bool{}
	if ups := node.Uplinks(); len(ups) > 1 {
		for _, u := range ups {
			lans[u] = true
			behind = append(behind, u)
		}
	}
	for _, name := range behind {
		iface := ""
		if lans[name] {
			iface = name
		}
		for _, i := range node.Interfaces {
			if i.Name != name {
				continue
			}
			for _, n := range i.Addrs {
				n = n.Masked()
				if n.Addr().Is4() != (fam == firewall.FamilyIP) || n.Addr().IsLinkLocalUnicast() || n.IsSingleIP() || done[n] {
					continue
				}
				done[n] = true
				var inside []netip.Prefix
				for _, q := range named {
					if q.Bits() > n.Bits() && n.Contains(q.Addr()) {
						inside = append(inside, q)
					}
				}
				// The rest of the network first, then each named prefix.
				a, ok := pickIn(n, inside, node)
				if !ok {
					continue
				}
				rest := len(out)
				out = append(out, routedDest{addr: a, via: n.String(), rest: -1, iface: iface})
				for _, q := range inside {
					if a, ok := pickIn(q, inside, node); ok {
						d := routedDest{addr: a, via: q.String(), rest: rest, ports: map[int][]firewall.PortRange{}, iface: iface}
						naming(rs, fam, n, a, &d)
						out = append(out, d)
					}
				}
			}
		}
	}
	return out
}

// pickIn finds an address of q that no prefix of inside more specific
// than q holds and that is not the node's own: one that stands for q's own
// region. False when there is none among the first and last addresses
// tried (the region is taken as empty).
func pickIn(q netip.Prefix, inside []netip.Prefix, node *firewall.Node) (netip.Addr, bool) {
	ok := func(a netip.Addr) bool {
		if !q.Contains(a) || node.Local(a) {
			return false
		}
		for _, s := range inside {
			if s.Bits() > q.Bits() && s.Contains(a) {
				return false
			}
		}
		return true
	}
	a := q.Addr()
	for range 256 {
		if ok(a) {
			return a, true
		}
		a = a.Next()
	}
	// From the top of q down: the rest may lie past the named prefixes.
	raw := q.Addr().AsSlice()
	for bit := q.Bits(); bit < len(raw)*8; bit++ {
		raw[bit/8] |= 0x80 >> (bit % 8)
	}
	b, _ := netip.AddrFromSlice(raw)
	for range 256 {
		if ok(b) {
			return b, true
		}
		b = b.Prev()
	}
	return netip.Addr{}, false
}

// dstPrefixConds are the destination conditions of rs: the prefixes that
// cut the node's own addresses into groups and the routed destinations
// into regions.
func dstPrefixConds(rs *firewall.Ruleset) []*firewall.Cond {
	var out []*firewall.Cond
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind == firewall.CondDaddr || c.Kind == firewall.CondOrigDaddr {
			out = append(out, c)
		}
	})
	return out
}

// routedClient follows a client's packet routed through the node to each
// destination region behind it (st.routed), as client does a packet to one
// of the node's own addresses; each path names the region (Via).
func (e *Evaluator) routedClient(st *stages, pkt Packet, add func(path, Result)) {
	rest := map[int]paths{}
	for i, d := range st.routed {
		if d.iface != "" && pkt.iif == d.iface {
			continue // its own network: not routed through the node
		}
		if d.rest >= 0 && !d.names(pkt.Proto, pkt.Port) {
			// No rule naming it can match: it goes the way of the rest.
			for p, r := range rest[d.rest].all() {
				if p.routed {
					p.via = d.via
				}
				add(p, r)
			}
			continue
		}
		q := pkt
		q.Dst, q.via, q.notIif = d.addr, d.via, d.iface
		res := e.client(st, q)
		if d.rest < 0 {
			rest[i] = res
		}
		for p, r := range res.all() {
			add(p, r)
		}
	}
}

// names reports whether a rule naming d may match a packet of proto to
// port.
func (d *routedDest) names(proto uint8, port uint16) bool {
	return d.all || inPorts(d.ports[int(proto)], port)
}

// naming records in d the protocols and ports of the rules of family fam
// whose destination conditions name a prefix inside network n holding a
// (d's region): where d may go otherwise than the rest of n.
func naming(rs *firewall.Ruleset, fam string, n netip.Prefix, a netip.Addr, d *routedDest) {
	names := func(c *firewall.Cond) bool {
		if c.Kind != firewall.CondDaddr && c.Kind != firewall.CondOrigDaddr {
			return false
		}
		for _, x := range c.Prefixes {
			if x.Bits() > n.Bits() && n.Contains(x.Addr()) && x.Contains(a) {
				return true
			}
		}
		return false
	}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != fam && t.Family != firewall.FamilyInet {
			continue
		}
		for ci := range t.Chains {
			for ri := range t.Chains[ci].Rules {
				r := &t.Chains[ci].Rules[ri]
				if len(r.VMap) > 0 {
					d.all = true // a verdict map's keys are not read here
					return
				}
				if !slices.ContainsFunc(r.Conds, func(c firewall.Cond) bool { return names(&c) }) {
					continue
				}
				protos := []int{6, 17}
				var ports []firewall.PortRange
				for k := range r.Conds {
					switch c := &r.Conds[k]; {
					case c.Kind == firewall.CondL4Proto && !c.Negate:
						protos = c.Protos
					case c.Kind == firewall.CondDport && !c.Negate && ports == nil:
						ports = c.Ports
					}
				}
				if ports == nil {
					d.all = true
					return
				}
				for _, p := range protos {
					d.ports[p] = append(d.ports[p], ports...)
				}
			}
		}
	}
}

// outside stands for an output interface that no rule names but by "*":
// an uplink, as a container's egress leaves by.
const outside = "\x00uplink"

// EgressFrom lists the input interfaces from which rs surely forwards a
// new connection (TCP and UDP, every port) in family fam to a destination
// beyond the node, out by an uplink: the bridges whose egress the found
// firewall lets through (Docker's "-i docker0 ! -o docker0 -j ACCEPT",
// libvirt's "-s 192.168.122.0/24 -i virbr0 -j ACCEPT"). The candidates
// are the container bridges rs's rules name as input interfaces
// (firewall.BridgeTool, wildcards included; an uplink is none); one passes
// when some source region passes from it, as a bridge's own network does.
func EgressFrom(rs *firewall.Ruleset, fam string) []string {
	return Compile(rs).EgressFrom(fam)
}

// EgressFrom is the package's EgressFrom on the compiled ruleset.
func (c *Compiled) EgressFrom(fam string) []string {
	rs := c.rs
	seen := map[string]bool{}
	var names []string
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind != firewall.CondIifname || c.Negate {
			return
		}
		for _, n := range c.Names {
			// Only a container network's bridge has egress to carry: an
			// uplink a rule names ("-i eth0 -o docker0") forwards to the
			// networks behind the node too, which its accept would open.
			if firewall.BridgeTool(n) != "" && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	})
	sort.Strings(names)
	st := stagesOf(rs, fam)
	atoms := sourceAtoms(rs, fam)
	e := c.prog.Evaluator()
	dst := netip.MustParseAddr("192.0.2.1")
	if fam == firewall.FamilyIP6 {
		dst = netip.MustParseAddr("2001:db8::1")
	}
	protos := []string{"tcp", "udp"}
	var bounds [2][]int
	for i, proto := range protos {
		bounds[i] = portBounds(rs, fam, protoNum(proto), true)
	}
	var out []string
	for _, n := range names {
		pass := false
		for _, a := range atoms {
			all := true
			for i, proto := range protos {
				bounds := bounds[i]
				e.bounds = bounds
				for _, start := range bounds {
					r := e.Hook(st.forward, Packet{Hook: firewall.HookForward, Family: fam, Proto: protoNum(proto), Port: uint16(start), OrigPort: uint16(start),
						Src: a, Dst: dst, iif: n, oif: outside})
					if !r.Accept || r.drop {
						all = false
						break
					}
				}
				if !all {
					break
				}
			}
			if all {
				pass = true
				break
			}
		}
		if pass {
			out = append(out, n)
		}
	}
	return out
}
