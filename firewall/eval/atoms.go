// This file holds the address algebra of sources: the regions ("atoms") the
// ruleset's source prefixes cut the address space into, their grouping,
// and the fewest CIDRs that cover a set of them.

package eval

import (
	"math/big"
	"net/netip"
	"sort"

	"adoption/firewall"
	"adoption/firewall/nft"
)

// atom is a region of source addresses on which every saddr condition is
// constant: prefix minus the more specific named prefixes; other is the rest.
type Atom struct {
	Prefix netip.Prefix
	Other  bool
}

func (a Atom) in(q netip.Prefix) bool {
	if a.Other || a.Prefix.Addr().Is4() != q.Addr().Is4() {
		return false
	}
	return q.Bits() <= a.Prefix.Bits() && q.Contains(a.Prefix.Addr())
}

var notOutside = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("ff00::/8"),
}

func sourceAtoms(rs *firewall.Ruleset, fam string) []Atom {
	seen := map[netip.Prefix]bool{}
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind != firewall.CondSaddr {
			return
		}
		for _, p := range c.Prefixes {
			if p.Addr().Is4() == (fam == firewall.FamilyIP) {
				seen[p.Masked()] = true
			}
		}
	})
	var ps []netip.Prefix
	for p := range seen {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	atoms := []Atom{{Other: true}}
outer:
	for i, p := range ps {
		for _, x := range notOutside {
			if x.Bits() <= p.Bits() && x.Contains(p.Addr()) {
				continue outer
			}
		}
		if nonEmptyAtom(ps, i) {
			atoms = append(atoms, Atom{Prefix: p})
		}
	}
	return atoms
}

// nonEmptyAtom reports whether ps[i] is not entirely covered by the more
// specific prefixes in ps, which are sorted by address, then length, and
// masked. The more specific prefixes inside ps[i] are the ones right after
// it that start within it (prefixes are nested or disjoint); of those, the
// maximal ones are those that do not start within the last maximal one.
func nonEmptyAtom(ps []netip.Prefix, i int) bool {
	p := ps[i]
	if !p.IsValid() {
		return true // contains nothing, so nothing covers it
	}
	end := nft.LastAddr(p)
	var total *big.Int
	var cover netip.Addr // last address of the last maximal one
	for _, q := range ps[i+1:] {
		if end.Less(q.Addr()) {
			break
		}
		if cover.IsValid() && !cover.Less(q.Addr()) {
			continue
		}
		if total == nil {
			total = new(big.Int)
		}
		total.Add(total, new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-q.Bits())))
		cover = nft.LastAddr(q)
	}
	if total == nil {
		return true
	}
	size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	return total.Cmp(size) < 0
}

// groupAtoms groups source atoms that every saddr condition treats alike, so
// each group is evaluated once (a blocklist of thousands of prefixes in one
// set is one group). The first group is the "any other source" atom alone;
// prefix atoms that behave like it are left out: they are never worth naming.
func groupAtoms(rs *firewall.Ruleset, atoms []Atom) [][]Atom {
	var conds []*firewall.Cond
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind == firewall.CondSaddr {
			conds = append(conds, c)
		}
	})
	sets := make([]*prefixSet, len(conds))
	for i, c := range conds {
		sets[i] = newPrefixSet(c.Prefixes)
	}
	sig := func(a Atom) string {
		b := make([]byte, len(conds))
		for i := range conds {
			b[i] = '0'
			if sets[i].holds(a) {
				b[i] = '1'
			}
		}
		return string(b)
	}
	otherSig := sig(atoms[0])
	groups := [][]Atom{{atoms[0]}}
	index := map[string]int{}
	for _, a := range atoms[1:] {
		s := sig(a)
		if s == otherSig {
			continue
		}
		i, ok := index[s]
		if !ok {
			i = len(groups)
			index[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], a)
	}
	return groups
}

// atomPrefixes returns the fewest prefixes that cover exactly the union of the
// regions of the atoms open (each atom's prefix minus the more specific
// prefixes of all atoms).
func atomPrefixes(open, all []Atom, index map[netip.Prefix]int) []netip.Prefix {
	var rs []addrRange
	for _, a := range open {
		rs = append(rs, atomRanges(a.Prefix, all, index)...)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo.Less(rs[j].lo) })
	var merged []addrRange
	for _, r := range rs {
		if n := len(merged); n > 0 && (!merged[n-1].hi.IsValid() || !merged[n-1].hi.Next().Less(r.lo)) {
			if merged[n-1].hi.Less(r.hi) {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	var out []netip.Prefix
	for _, r := range merged {
		ps, ok := nft.RangePrefixes(r.lo.AsSlice(), r.hi.AsSlice())
		if ok {
			out = append(out, ps...)
		}
	}
	return out
}

type addrRange struct{ lo, hi netip.Addr }

// atomIndex is where each prefix atom is in atoms.
func atomIndex(atoms []Atom) map[netip.Prefix]int {
	index := make(map[netip.Prefix]int, len(atoms))
	for i, a := range atoms {
		if !a.Other {
			index[a.Prefix] = i
		}
	}
	return index
}

// atomRanges is p minus the maximal more specific prefixes of other atoms.
// all is sourceAtoms' list (the prefix atoms sorted by address, then
// length) and index where p is in it: the atoms inside p are the ones right
// after it that start within it, in the order they are cut out.
func atomRanges(p netip.Prefix, all []Atom, index map[netip.Prefix]int) []addrRange {
	var kids []netip.Prefix
	end := nft.LastAddr(p)
	if i, ok := index[p]; ok && p.IsValid() {
		for _, a := range all[i+1:] {
			if end.Less(a.Prefix.Addr()) {
				break
			}
			kids = append(kids, a.Prefix)
		}
	}
	var out []addrRange
	cur := p.Addr()
	done := false
	for _, k := range kids {
		if done || k.Addr().Less(cur) {
			continue // nested in a kid already cut out
		}
		if cur.Less(k.Addr()) {
			out = append(out, addrRange{cur, k.Addr().Prev()})
		}
		last := nft.LastAddr(k)
		if last == end {
			done = true
			continue
		}
		cur = last.Next()
	}
	if !done {
		out = append(out, addrRange{cur, end})
	}
	return out
}
