// This file holds forwarded ICMP and ICMPv6 that starts a conversation (an
// echo request, the other query types conntrack tracks as new): what a
// ruleset forwards from outside, routed to each network behind the node,
// and from each container bridge out by an uplink; both compared before
// and after (CompareForwardICMP), and what a found ruleset forwards read
// without the node, as the mesh's table carries it (ForwardICMP).

package eval

import (
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/vocab"
)

// icmpOf is family fam's ICMP protocol number and name.
func icmpOf(fam string) (uint8, string) {
	if fam == firewall.FamilyIP6 {
		return unix.IPPROTO_ICMPV6, "icmpv6"
	}
	return unix.IPPROTO_ICMP, "icmp"
}

// FwdICMP is one region of forwarded ICMP: a family, a type that starts a
// conversation, and where it goes: routed to network Via behind the node
// (from a client outside), or from bridge In out by an uplink (a
// container's egress); From the source region ("" any other source).
type FwdICMP struct {
	Family        string
	Type          uint8
	Via, In, From string
	Before, After Passage
}

// Class is the region's spelling: its family, protocol and type, and
// for a routed one the network it goes to.
func (f FwdICMP) Class() firewall.Class {
	num, name := icmpOf(f.Family)
	c := firewall.Class{Family: f.Family, Proto: name, Num: num, Type: f.Type, TypeEnd: f.Type}
	if p, err := netip.ParsePrefix(f.Via); err == nil {
		c.Dst, c.DstEnd = p.Masked().Addr(), nft.LastAddr(p)
	}
	return c
}

// beyond is an address beyond the node's networks, as a container's
// egress goes to.
func beyond(fam string) netip.Addr {
	if fam == firewall.FamilyIP6 {
		return netip.MustParseAddr("2001:db8::1")
	}
	return netip.MustParseAddr("192.0.2.1")
}

// CompareForwardICMP judges forwarded ICMP of every type that starts a
// conversation, before and after, on node: routed from outside to each
// container bridge's network, and from each container bridge out by an uplink, per
// source region both rulesets cut (one region per source region that
// fares otherwise than any other). None on a node whose interfaces are not
// known.
func (pr *Pair) CompareForwardICMP(node firewall.Node) []FwdICMP {
	if !node.HasInterfaces() {
		return nil
	}
	eb, ea := pr.evaluators()
	var out []FwdICMP
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		if !node.Forwards(fam) {
			continue
		}
		sb, sa := stagesOf(pr.before.rs, fam), stagesOf(pr.after.rs, fam)
		dests := routedDests(pr.both, &node, fam)
		atoms, groups, index := pr.regions(fam)
		own := node.Own(fam)
		num, _ := icmpOf(fam)
		fare := func(e *Evaluator, st *stages, pkt Packet, routed bool) Passage {
			e.bounds = nil
			if !routed {
				r := e.Hook(st.forward, pkt)
				return Passage{Open: r.Accept, Unsure: r.Accept && r.drop}
			}
			var p Passage
			for path, r := range e.client(st, pkt).all() {
				if path.routed && path.dir == firewall.HookForward {
					p.Open = p.Open || r.Accept
					p.Unsure = p.Unsure || (r.Accept && r.drop)
				}
			}
			return p
		}
		type where struct {
			pkt    Packet
			routed bool
			via    string
			in     string
		}
		var wheres []where
		for _, d := range dests {
			if (d.rest >= 0 && !d.names(num, 0)) || d.iface != "" {
				// ICMP names no port: the network's rest stands for a
				// prefix no rule that may match ICMP names (one that does,
				// a raw table's drop of a container's address, is judged
				// apart). An uplink's network (a LAN behind a second
				// interface) is not judged: the carry, read without the
				// node, cannot tell its destinations apart.
				continue
			}
			wheres = append(wheres, where{pkt: Packet{Dst: d.addr, via: d.via, notIif: d.iface}, routed: true, via: d.via})
		}
		for _, b := range node.Behind() {
			wheres = append(wheres, where{pkt: Packet{Hook: firewall.HookForward, Dst: beyond(fam), iif: b, oif: outside}, in: b})
		}
		for _, t := range vocab.ICMPNewTypes(fam) {
			for _, w := range wheres {
				var base [2]Passage
				for gi, g := range groups {
					pkt := w.pkt
					pkt.Family, pkt.Proto, pkt.ICMPType, pkt.Src, pkt.node, pkt.own = fam, num, uint8(t), g[0], &node, own
					b, a := fare(eb, &sb, pkt, w.routed), fare(ea, &sa, pkt, w.routed)
					r := FwdICMP{Family: fam, Type: uint8(t), Via: w.via, In: w.in, Before: b, After: a}
					if gi == 0 {
						base = [2]Passage{b, a}
						out = append(out, r)
						continue
					}
					if b == base[0] && a == base[1] {
						continue
					}
					for _, pfx := range atomPrefixes(g, atoms, index) {
						r.From = pfx.String()
						out = append(out, r)
					}
				}
			}
		}
	}
	return out
}

// ICMPCarry is forwarded ICMP of one type a found ruleset surely
// forwards, read without the node: from input interface Iif, or ("") from
// any input interface but those in NotIif; to any destination on any
// output interface; from the sources From (nil: every one but Except).
type ICMPCarry struct {
	Type         uint8
	Iif          string
	NotIif       []string
	From, Except []netip.Prefix
}

// unnamed stands for an input interface no rule names.
const unnamed = "\x00unnamed"

// ForwardICMP reads, without the node, what the compiled found ruleset
// surely forwards of ICMP that starts a conversation in family fam, to a
// destination and out by an interface it does not know: per type, the
// sources it is forwarded from in by an interface no rule names, and in
// by each interface its rules name where that differs.
func (c *Compiled) ForwardICMP(fam string) []ICMPCarry {
	rs := c.rs
	st := stagesOf(rs, fam)
	e := c.prog.Evaluator()
	num, _ := icmpOf(fam)
	var names []string
	seen := map[string]bool{}
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind != firewall.CondIifname {
			return
		}
		for _, n := range c.Names {
			if n != "lo" && n != "*" && n != "" && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	})
	atoms := sourceAtoms(rs, fam)
	index := atomIndex(atoms)
	// sources are the source regions from which pkt is surely forwarded
	// (ok false: none).
	type srcs struct {
		from, except []netip.Prefix
		ok           bool
	}
	sources := func(pkt Packet) srcs {
		var yes, no []Atom
		other := false
		for _, a := range atoms {
			pkt.Src = a
			if r := e.Hook(st.forward, pkt); r.Accept && !r.drop {
				yes = append(yes, a)
				other = other || a.Other
			} else {
				no = append(no, a)
			}
		}
		switch {
		case len(yes) == 0:
			return srcs{}
		case len(no) == 0:
			return srcs{ok: true}
		case other:
			return srcs{except: atomPrefixes(no, atoms, index), ok: true}
		}
		return srcs{from: atomPrefixes(yes, atoms, index), ok: true}
	}
	same := func(a, b srcs) bool {
		return a.ok == b.ok && slices.Equal(a.from, b.from) && slices.Equal(a.except, b.except)
	}
	var out []ICMPCarry
	for _, t := range vocab.ICMPNewTypes(fam) {
		pkt := Packet{Hook: firewall.HookForward, Family: fam, Proto: num, ICMPType: uint8(t), iif: unnamed}
		base := sources(pkt)
		var not []string
		for _, n := range names {
			q := pkt
			q.iif = n
			r := sources(q)
			if same(r, base) {
				continue
			}
			not = append(not, n)
			if r.ok {
				out = append(out, ICMPCarry{Type: uint8(t), Iif: n, From: r.from, Except: r.except})
			}
		}
		if base.ok {
			out = append(out, ICMPCarry{Type: uint8(t), NotIif: not, From: base.from, Except: base.except})
		}
	}
	return out
}
