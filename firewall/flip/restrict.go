// This file holds the restrictions the mesh's table carries from the found
// firewall (Allow.Carried): reading them (carry, carrier) and the rules and
// sets of table inet adoption that keep them.

package flip

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/nft"
	"adoption/vocab"
)

type carried struct {
	exprs []expr.Any
	text  string
	sets  []derivedSet
}

// carriedRules are the conditions that keep restriction r (the k-th of its
// port) at hook, one rule's worth per input interface it holds on:
// "[iifname I [iifname != N ...] | iifname != N ...] meta nfproto F [F
// saddr @S_from] [F saddr != @S_except] ", with the sets they look up
// (made once). Under a wildcard I, only the NotIif names I covers are
// excluded (a concrete I excludes none).
func carriedRules(hook string, port vocab.Port, r Reach, k int) []carried {
	return carriedNamed(fmt.Sprintf("%s_%d_%s", hook, port.Num, port.Proto), r, k)
}

// carriedNamed is carriedRules with the sets named from base.
func carriedNamed(base string, r Reach, k int) []carried {
	ex, text, sets := carriedExprs(base, r, k)
	not := func(in string) ([]expr.Any, string) {
		var pre []expr.Any
		ptext := ""
		for _, n := range r.NotIif {
			if in != "" && !covers(in, n) {
				continue
			}
			pre = append(pre, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameData(n)})
			ptext += fmt.Sprintf("iifname != %q ", n)
		}
		return pre, ptext
	}
	if len(r.Iif) == 0 {
		pre, ptext := not("")
		return []carried{{exprs: append(pre, ex...), text: ptext + text, sets: sets}}
	}
	var out []carried
	for i, n := range r.Iif {
		pre, ptext := not(n)
		c := carried{exprs: append(append([]expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameData(n)}}, pre...), ex...),
			text: fmt.Sprintf("iifname %q ", n) + ptext + text}
		if i == 0 {
			c.sets = sets
		}
		out = append(out, c)
	}
	return out
}

// ifnameData is an interface name as meta iifname and oifname compare it:
// padded to IFNAMSIZ; a wildcard ("br-*") its prefix alone, unpadded, as
// nft writes it.
func ifnameData(n string) []byte {
	if p, ok := strings.CutSuffix(n, "*"); ok {
		return []byte(p)
	}
	return append([]byte(n), make([]byte, unix.IFNAMSIZ-len(n))...)
}

// covers reports whether interface pattern pat (a trailing '*' a
// wildcard) matches every interface pattern n matches: n is pat, or pat
// is a wildcard whose prefix n starts with.
func covers(pat, n string) bool {
	if pat == n {
		return true
	}
	p, ok := strings.CutSuffix(pat, "*")
	return ok && strings.HasPrefix(n, p)
}

// ifaceClass is one interface class of the found firewall: an interface
// or wildcard it names, or ("") any other, and the Reacher that reads it.
// A wildcard class stands for the interfaces it matches that no other
// class names.
type ifaceClass struct {
	name string
	r    *eval.Reacher
}

// namedIfaces are the interface names and wildcards found's conditions of
// kind (iifname, oifname) name, but "lo" and "*" (loopback passes the
// mesh's tables by a rule of its own), sorted.
func namedIfaces(found *firewall.Ruleset, kind firewall.CondKind) []string {
	seen := map[string]bool{}
	for ti := range found.Tables {
		for ci := range found.Tables[ti].Chains {
			for _, r := range found.Tables[ti].Chains[ci].Rules {
				for _, cd := range r.Conds {
					if cd.Kind != kind {
						continue
					}
					for _, n := range cd.Names {
						if n != "lo" && n != "*" {
							seen[n] = true
						}
					}
				}
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ifaceClasses are the classes of x's clients by input interface: with
// names, any other interface ("", read as one no name matches) and each
// name, a concrete one read on a node holding that interface, a wildcard
// read as an interface of that very name (which it and any wider
// wildcard match, and no concrete name); without, one class, x itself.
func ifaceClasses(x *eval.Reacher, names []string) []ifaceClass {
	if len(names) == 0 {
		return []ifaceClass{{"", x}}
	}
	out := []ifaceClass{{"", x.On(firewall.Node{Interfaces: []firewall.Interface{{Name: otherIface}}})}}
	for _, n := range names {
		if strings.HasSuffix(n, "*") {
			out = append(out, ifaceClass{n, x.In(n)})
		} else {
			out = append(out, ifaceClass{n, x.On(firewall.Node{Interfaces: []firewall.Interface{{Name: n}}})})
		}
	}
	return out
}

// carriedExprs are the family and source conditions of restriction r:
// "meta nfproto F [F saddr @S_from] [F saddr != @S_except] ", with the sets
// they look up (named base_F_from, base_F_except).
func carriedExprs(base string, r Reach, k int) ([]expr.Any, string, []derivedSet) {
	nfproto, kw, off, n := byte(unix.NFPROTO_IPV4), "ip", uint32(12), uint32(4)
	fam := "ipv4"
	if r.Family == firewall.FamilyIP6 {
		nfproto, kw, off, n, fam = unix.NFPROTO_IPV6, "ip6", 8, 16, "ipv6"
	}
	ex := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}},
	}
	text := "meta nfproto " + fam + " "
	var sets []derivedSet
	for _, l := range []struct {
		what   string
		ps     []netip.Prefix
		invert bool
	}{{"from", r.From, false}, {"except", r.Except, true}} {
		if len(l.ps) == 0 {
			continue
		}
		name := fmt.Sprintf("%s_%s_%s", base, r.Family, l.what)
		if k > 0 {
			name += fmt.Sprint(k)
		}
		s := derivedSet{name: name, family: r.Family, ranges: prefixRanges(l.ps)}
		sets = append(sets, s)
		ex = append(ex,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Lookup{SourceRegister: 1, SetName: s.name, Invert: l.invert})
		op := ""
		if l.invert {
			op = "!= "
		}
		text += fmt.Sprintf("%s saddr %s@%s ", kw, op, s.name)
	}
	return ex, text, sets
}

// prefixRanges merges prefixes into the fewest address ranges (adjacent
// and overlapping ones joined), sorted: an interval set holds no two
// ranges that touch.
func prefixRanges(ps []netip.Prefix) []addrRange {
	rs := make([]addrRange, 0, len(ps))
	for _, p := range ps {
		rs = append(rs, addrRange{p.Masked().Addr(), nft.LastAddr(p)})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo.Less(rs[j].lo) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			next := last.hi.Next()
			if !next.IsValid() || !next.Less(r.lo) {
				if last.hi.Less(r.hi) {
					last.hi = r.hi
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// elements are the set's elements as the kernel holds them: a start
// element per range, and an interval end one past its last address
// (none for a range that ends the address space). As nft writes an
// interval set, an interval end at the zero address leads when the first
// range starts later, so the set listed is the same whether the flip wrote
// it or the boot file's "nft -f" did.
func (s derivedSet) elements() []firewall.SetElement {
	var out []firewall.SetElement
	if len(s.ranges) > 0 && !s.ranges[0].lo.IsUnspecified() {
		out = append(out, firewall.SetElement{Key: make([]byte, s.ranges[0].lo.BitLen()/8), IntervalEnd: true})
	}
	for _, r := range s.ranges {
		out = append(out, firewall.SetElement{Key: r.lo.AsSlice()})
		if end := r.hi.Next(); end.IsValid() {
			out = append(out, firewall.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// text is the set's declaration in nft syntax.
func (s derivedSet) text() string {
	typ := "ipv4_addr"
	if s.family == firewall.FamilyIP6 {
		typ = "ipv6_addr"
	}
	var els []string
	for _, r := range s.ranges {
		ps, _ := nft.RangePrefixes(r.lo.AsSlice(), r.hi.AsSlice())
		if len(ps) == 1 {
			els = append(els, ps[0].String())
		} else {
			els = append(els, r.lo.String()+"-"+r.hi.String())
		}
	}
	return fmt.Sprintf("\tset %s {\n\t\ttype %s\n\t\tflags interval\n\t\telements = { %s }\n\t}\n", s.name, typ, strings.Join(els, ", "))
}

// carry fills a's Carried from found: the sources from which found lets a
// new connection to the port through at hook, per family and, at the input
// hook, per input interface class (each interface the found firewall
// names, and any other). A port found open to every source on every
// interface in every family, or open in none (a port the plan opens anew),
// and a port in widen carries nothing.
func carry(rs *carrier, hook string, a Allow, widen map[vocab.Port]bool) Allow {
	a.Carried = nil
	if widen[a.Port] {
		return a
	}
	classes := rs.classes
	switch {
	case hook != firewall.HookInput:
		// Forwarded traffic: one class, clients coming in on an interface
		// the found firewall does not name (not a container bridge: a
		// rule such as ufw-docker's "-i docker0 -o docker0 -j ACCEPT" is
		// traffic between containers, not a client's); nothing else known
		// of the node (its DNAT targets are on no interface here).
		classes = []ifaceClass{{"", rs.uplink}}
	case len(classes) == 0:
		// One class, read with nothing known of the node.
		classes = []ifaceClass{{"", rs.zero}}
	}
	reach, plain, open := byIface(classes, []string{firewall.FamilyIP, firewall.FamilyIP6}, func(x *eval.Reacher, fam string) eval.SourceReach {
		return x.At(hook, fam, a.Port.Proto, a.Port.Num)
	})
	if plain || !open {
		return a
	}
	a.Carried = reach
	return a
}

// byIface reads what reach gives per interface class and family and
// returns the restrictions that carry it: one per family and group of
// classes that fare alike, with the interfaces it holds on (Iif) or, for
// the group of any other interface, those it does not (NotIif) where the
// groups differ; a group of wildcards does not hold on the named
// interfaces of other groups its wildcards cover (NotIif). plain: every
// class reaches every source surely in every family; open: some class
// reaches some source.
func byIface(classes []ifaceClass, fams []string, reach func(x *eval.Reacher, fam string) eval.SourceReach) (out []Reach, plain, open bool) {
	type class struct {
		names []string
		reach []eval.SourceReach
	}
	var groups []class
	plain = true
	for _, c := range classes {
		rr := make([]eval.SourceReach, len(fams))
		for i, fam := range fams {
			rr[i] = reach(c.r, fam)
			plain = plain && rr[i].Plain()
			open = open || rr[i].Open()
		}
		found := false
		for gi := range groups {
			if reflect.DeepEqual(groups[gi].reach, rr) {
				groups[gi].names = append(groups[gi].names, c.name)
				found = true
				break
			}
		}
		if !found {
			groups = append(groups, class{names: []string{c.name}, reach: rr})
		}
	}
	var named []string
	for _, c := range classes {
		if c.name != "" {
			named = append(named, c.name)
		}
	}
	for _, g := range groups {
		for i, fam := range fams {
			s := g.reach[i]
			if !s.Open() {
				continue
			}
			r := Reach{Family: fam, From: s.Only, Except: s.Except}
			if len(groups) == 1 {
				out = append(out, r)
				continue
			}
			// holding is r on the interfaces in, but the named ones of
			// other groups that a wildcard in covers.
			holding := func(in []string) Reach {
				h := r
				h.Iif = in
				for _, n := range named {
					if slices.Contains(g.names, n) {
						continue
					}
					for _, w := range in {
						if covers(w, n) {
							h.NotIif = append(h.NotIif, n)
							break
						}
					}
				}
				return h
			}
			if g.names[0] != "" {
				out = append(out, holding(g.names))
				continue
			}
			// Any other interface: none of the named ones but those that
			// go with it; those of them a left-out wildcard covers hold
			// by their own names.
			var own []string
			for _, n := range named {
				if !slices.Contains(g.names, n) {
					r.NotIif = append(r.NotIif, n)
				}
			}
			for _, n := range g.names[1:] {
				for _, x := range r.NotIif {
					if covers(x, n) {
						own = append(own, n)
						break
					}
				}
			}
			out = append(out, r)
			if len(own) > 0 {
				out = append(out, holding(own))
			}
		}
	}
	return out, plain, open
}

// carrier reads the found firewall's restrictions: one Reacher per input
// interface class, the first (name "") any interface the found firewall
// does not name, read with nothing known of the node.
type carrier struct {
	zero *eval.Reacher
	// uplink reads forwarded traffic coming in on an interface the found
	// firewall does not name.
	uplink  *eval.Reacher
	classes []ifaceClass
	// bridges are the container bridges found's input interface
	// conditions name, wildcards included (foundBridgeIn).
	bridges []string
}

// otherIface is a name no interface has and no pattern of the found
// firewall matches but "*": it stands for any interface it does not name.
const otherIface = "-"

func newCarrier(cf *eval.Compiled) *carrier {
	found := cf.Ruleset()
	zero := cf.Reacher(firewall.Node{})
	c := &carrier{zero: zero, uplink: zero.On(firewall.Node{Interfaces: []firewall.Interface{{Name: otherIface}}}), bridges: bridgesNamed(found)}
	// Every interface and wildcard found names is a class of its own, a
	// container bridge too: what its containers reach on the node is also
	// carried apart (foundBridgeIn), and what any interface reaches must
	// not reach them where found keeps them out.
	if names := namedIfaces(found, firewall.CondIifname); len(names) > 0 {
		c.classes = ifaceClasses(zero, names)
	}
	return c
}
