// This file holds the regions of packets beyond TCP and UDP to the node
// by port in the flip (firewall.ClassesOf: protocols, ICMP and ICMPv6
// types, broadcast, multicast and link-local destinations and their
// ports): the restriction each keeps from the found firewall, the rules
// of table inet adoption that carry it, and the preview's fate of each
// region per source region.

package flip

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/vocab"
)

// ClassAllow is flipwire.ClassAllow.
type ClassAllow = flipwire.ClassAllow

// carryClasses are the regions found lets through now (cut by found's
// rules and the declared regions, firewall.ClassesOf), each with the
// sources it lets them through from, per input interface class where
// found names interfaces (read with nothing known of the node, as the
// ports' restrictions are, by byIface: one ClassAllow per group of
// interfaces that fare alike), merged where they fare alike. A region
// found lets through only under a condition the evaluator cannot decide
// is carried without it: the preview names that a widening. A region
// within one in drop (flip.drop) is not carried; one within widen
// (flip.widen) is carried from every source on every interface. Every
// other protocol (a region "proto other") is never carried: the preview
// names it closing.
func carryClasses(cf *eval.Compiled, drop, widen []string) []ClassAllow {
	// The families are carried beside each other, each by a carrier of
	// its own (a Reacher is one evaluation at a time); their keys name
	// the family, so their groups are apart and joined in order.
	fams := []string{firewall.FamilyIP, firewall.FamilyIP6}
	parts := make([]carriedFamily, len(fams))
	var wg sync.WaitGroup
	for i, fam := range fams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = carryFamily(newCarrier(cf), fam, drop, widen)
		}()
	}
	wg.Wait()
	out := []ClassAllow{}
	for _, p := range parts {
		for _, k := range p.order {
			for _, c := range firewall.MergeClassesOwned(p.groups[k]) {
				out = append(out, ClassAllow{Name: c.Spelling(), Reach: p.reaches[k]})
			}
		}
	}
	return out
}

// carriedFamily are the regions of one family carryClasses carries, by
// restriction (its key), in the order first met.
type carriedFamily struct {
	order   []string
	groups  map[string][]firewall.Class
	reaches map[string]Reach
}

// carryFamily is carryClasses of family fam, read by r.
func carryFamily(r *carrier, fam string, drop, widen []string) carriedFamily {
	classes := r.classes
	if len(classes) == 0 {
		classes = []ifaceClass{{"", r.zero}}
	}
	found := r.zero.Ruleset()
	extra := slices.Concat(drop, widen)
	p := carriedFamily{groups: map[string][]firewall.Class{}, reaches: map[string]Reach{}}
	groups, reaches := p.groups, p.reaches
	cs := eval.ClassesOf(fam, []*firewall.Ruleset{found}, extra)
	cs = slices.DeleteFunc(cs, func(c eval.Class) bool { return c.Other || c.WithinAny(drop) })
	// Each interface class's reacher judges the regions at once
	// (Reacher.Classes: the regions that fare as one judged before
	// are not evaluated again).
	judged := map[*eval.Reacher][]eval.SourceReach{}
	for _, ic := range classes {
		if judged[ic.r] == nil {
			judged[ic.r] = ic.r.Classes(cs)
		}
	}
	// A region every reacher judged as the one before it is carried
	// as that one: its restrictions and their groups' keys are not
	// made again.
	var last struct {
		reach []Reach
		open  bool
		ct    uint32
		keys  []string
	}
	for i, c := range cs {
		if i == 0 || !judgedAlike(judged, i, i-1) {
			last.reach, _, last.open = byIface(classes, []string{c.Family}, func(x *eval.Reacher, _ string) eval.SourceReach { return judged[x][i] })
			last.keys = nil
		}
		if !last.open {
			continue
		}
		reach, keys := last.reach, last.keys
		if c.WithinAny(widen) {
			reach, keys = []Reach{{Family: c.Family}}, nil
		}
		if keys == nil || last.ct != c.CtState() {
			keys = make([]string, len(reach))
			for j, rc := range reach {
				// Regions of one conntrack state only are merged: the
				// derived rule's place depends on it (Derive).
				keys[j] = fmt.Sprintf("%d %+v", c.CtState(), rc)
			}
			if !c.WithinAny(widen) {
				last.keys, last.ct = keys, c.CtState()
			}
		}
		for j, k := range keys {
			if groups[k] == nil {
				p.order = append(p.order, k)
				reaches[k] = reach[j]
			}
			groups[k] = append(groups[k], c)
		}
	}
	return p
}

// judgedAlike reports whether every reacher judged regions i and j alike.
func judgedAlike(judged map[*eval.Reacher][]eval.SourceReach, i, j int) bool {
	for _, rs := range judged {
		a, b := rs[i], rs[j]
		if a.Any != b.Any || a.Unsure != b.Unsure || !slices.Equal(a.Only, b.Only) || !slices.Equal(a.Except, b.Except) {
			return false
		}
	}
	return true
}

// classRule adds the input rules that keep region c from the sources
// (and on the interfaces) of r, the k-th restriction of its spelling:
// "[iifname I] meta nfproto F [F saddr @S] meta l4proto P [icmp type T]
// [fib daddr type local | F daddr D] [th sport N] [th dport N] accept".
func classRule(rules *[]derivedRule, comment string, c eval.Class, r Reach, k int) []derivedSet {
	var sets []derivedSet
	// A destination range is one rule per prefix of it.
	dsts := []netip.Prefix{{}}
	if c.Dst.IsValid() {
		dsts = vocab.RangeToPrefixes(c.Dst, c.DstEnd)
	}
	for _, cr := range carriedNamed("input_"+classSetName(c), r, k) {
		sets = append(sets, cr.sets...)
		for _, dst := range dsts {
			ex, text := slices.Clone(cr.exprs), cr.text
			ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Num}})
			text += fmt.Sprintf("meta l4proto %d ", c.Num)
			if c.ICMP() && !(c.Type == 0 && c.TypeEnd == 255) {
				ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1})
				ex = append(ex, spanCmp([]byte{c.Type}, []byte{c.TypeEnd})...)
				text += fmt.Sprintf("%s type %s ", c.Proto, spanText(int(c.Type), int(c.TypeEnd)))
			}
			switch {
			case c.Own:
				ex = append(ex, &expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)})
				text += "fib daddr type local "
			case dst.IsValid():
				kw, off := "ip", uint32(16)
				if c.Family == firewall.FamilyIP6 {
					kw, off = "ip6", 24
				}
				ex = append(ex, prefixMatch(off, dst)...)
				text += fmt.Sprintf("%s daddr %s ", kw, dst)
			}
			for _, pt := range []struct {
				kw       string
				off      uint32
				from, to uint16
			}{{"sport", 0, c.Sport, c.SportEnd}, {"dport", 2, c.Port, c.PortEnd}} {
				if !vocab.PortProto(c.Num) || pt.from == 0 && pt.to == 65535 {
					continue
				}
				ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: pt.off, Len: 2})
				ex = append(ex, spanCmp(binaryutil.BigEndian.PutUint16(pt.from), binaryutil.BigEndian.PutUint16(pt.to))...)
				text += fmt.Sprintf("th %s %s ", pt.kw, spanText(int(pt.from), int(pt.to)))
			}
			ex = append(ex, &expr.Verdict{Kind: expr.VerdictAccept})
			*rules = append(*rules, derivedRule{chain: firewall.HookInput, comment: comment, text: text + "accept", exprs: ex})
		}
	}
	return sets
}

// spanCmp compares the register with lo..hi as nft writes it: one
// comparison for one value, two (not a range expression) for a range, so
// that the table the boot file's "nft -f" loads is the flip's.
func spanCmp(lo, hi []byte) []expr.Any {
	if slices.Equal(lo, hi) {
		return []expr.Any{&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: lo}}
	}
	return []expr.Any{&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: lo}, &expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: hi}}
}

func spanText(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

// prefixMatch matches the network header's address at off against p as
// nft writes it: the prefix's whole bytes alone when it ends on a byte,
// else the address masked.
func prefixMatch(off uint32, p netip.Prefix) []expr.Any {
	b := p.Masked().Addr().AsSlice()
	if p.Bits()%8 == 0 {
		n := p.Bits() / 8
		return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(n)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:n]}}
	}
	mask := make([]byte, len(b))
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(b))},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(b)), Mask: mask, Xor: make([]byte, len(b))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

// portsIn reports whether every destination port of region c is one of
// ports (flip.drop's or flip.widen's ports), of its protocol: a port
// declared is declared to whatever address it is sent.
func portsIn(c eval.Class, ports []vocab.Port) bool {
	if c.Proto != "tcp" && c.Proto != "udp" {
		return false
	}
	for n := int(c.Port); n <= int(c.PortEnd); n++ {
		if !slices.Contains(ports, vocab.Port{Num: uint16(n), Proto: c.Proto}) {
			return false
		}
	}
	return true
}

// classOwner is who keeps region c: the owner of the input port that is
// its one destination port (a module's UDP port to a multicast group),
// else the essentials.
func classOwner(c eval.Class, spec MeshSpec) string {
	for _, a := range spec.Input {
		if a.Port.Proto == c.Proto && a.Port.Num == c.Port && c.Port == c.PortEnd {
			return a.Owner
		}
	}
	return OwnerEssentials
}

// regionError says why s is not a region of packets of the family asked
// for.
func regionError(s string) error {
	_, err := vocab.ParseClass(s)
	if err == nil {
		return fmt.Errorf("%q names no region of that family", s)
	}
	return err
}

// classSetName is a set name's part for region c: letters, digits and
// '_' only ("ip_icmp_type_8").
func classSetName(c eval.Class) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, c.Spelling())
}

// legacyICMP adds the ICMP and ICMPv6 types a spec without classes
// (ClassesFound unset) accepts from any source: echo requests, errors,
// neighbour discovery, router adverts and MLD.
func legacyICMP(rules *[]derivedRule, base func(string) string) {
	for _, ic := range []struct {
		nfproto, l4 byte
		name        string
		types       []string
		nums        []byte
	}{
		{unix.NFPROTO_IPV4, unix.IPPROTO_ICMP, "icmp",
			[]string{"echo-request", "destination-unreachable", "time-exceeded", "parameter-problem"},
			[]byte{8, 3, 11, 12}},
		{unix.NFPROTO_IPV6, unix.IPPROTO_ICMPV6, "icmpv6",
			[]string{"echo-request", "destination-unreachable", "packet-too-big", "time-exceeded", "parameter-problem",
				"nd-router-advert", "nd-neighbor-solicit", "nd-neighbor-advert",
				"mld-listener-query", "mld-listener-report", "mld-listener-done", "mld2-listener-report"},
			[]byte{128, 1, 2, 3, 4, 134, 135, 136, 130, 131, 132, 143}},
	} {
		for i, typ := range ic.types {
			*rules = append(*rules, derivedRule{chain: firewall.HookInput, comment: base(ic.name), text: ic.name + " type " + typ + " accept",
				exprs: []expr.Any{
					&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.nfproto}},
					&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.l4}},
					&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ic.nums[i]}},
					&expr.Verdict{Kind: expr.VerdictAccept},
				}})
		}
	}
}

// classSpec names a region opening: its spelling.
func classSpec(o firewall.Opening) string { return o.Class }

// classFates gives each region of packets a fate per source region
// (eval.CompareClasses of found and the ruleset after the flip, over the
// regions both rulesets and the declared ones cut, merged where they fare
// alike): kept where it passes surely before and after; closing where it
// passes now and would not; widening where it would pass from sources it
// does not pass from now, or surely where it passes now only under a
// condition the evaluator cannot decide; uncertain where it would pass
// only under such a condition where it passes now surely (uncertain alike
// before and after, as an interface of a node with several uplinks, is
// kept, as a port is). Every fate but kept refuses unless declared: a
// closing region within one of flip.drop, a widening one within one of
// flip.widen; each refusal names the region to declare.
func classFates(p *Preview, pair *eval.Pair, node firewall.Node, spec MeshSpec) {
	found := pair.Before()
	extra := slices.Concat(spec.DropClasses, spec.WidenClasses)
	regions := pair.CompareClasses(node, extra)
	for _, b := range eval.HostBridges(node, found, pair.After()) {
		regions = append(regions, pair.CompareClassesIn(node, b, extra)...)
	}
	type judged struct {
		fate, reason string
	}
	// What keeps a region uncertain now is read off the few rules of found
	// that carry a reason (Compiled.UndecidedClass).
	cf, _ := pair.Compiled()
	undecided := cf.UndecidedClass
	judge := func(r eval.ClassRegion) judged {
		from := "any source"
		if r.From != "" {
			from = r.From
		}
		switch {
		case r.Before.Open && !r.After.Open:
			return judged{FateClosing, "passes now from " + from + " and would not after the flip: the mesh's table does not carry it"}
		case r.After.Open && !r.Before.Open:
			return judged{FateWidening, "passes after the flip from " + from + ", which the found firewall does not let through"}
		case r.After.Open && r.Before.Unsure && !r.After.Unsure:
			why := "passes now only under a condition the evaluator cannot decide, and after the flip without it"
			if w := undecided(r.Class); len(w) > 0 {
				why += " (" + strings.Join(w, "; ") + "): that restriction cannot be carried"
			}
			return judged{FateWidening, why}
		case r.After.Unsure && !r.Before.Unsure:
			return judged{FateUncertain, "passes after the flip only under a condition the evaluator cannot decide"}
		case r.After.Open && r.Before.Unsure && len(notIface(undecided(r.Class))) > 0:
			// Uncertain alike is kept only where what is undecided is the
			// interface (carried): a rate limit is not.
			return judged{FateWidening, "passes now only under a condition the evaluator cannot decide (" + strings.Join(notIface(undecided(r.Class)), "; ") + "), and after the flip without it: that restriction cannot be carried"}
		}
		return judged{FateKept, ""}
	}
	declared := func(r eval.ClassRegion, j judged) (dropped, widened bool) {
		return j.fate == FateClosing && (r.Class.WithinAny(spec.DropClasses) || portsIn(r.Class, spec.Drop)),
			j.fate == FateWidening && (r.Class.WithinAny(spec.WidenClasses) || portsIn(r.Class, spec.Widen))
	}
	regions = eval.MergeRegions(regions, func(r eval.ClassRegion) string {
		j := judge(r)
		d, w := declared(r, j)
		return j.fate + "|" + j.reason + "|" + strconv.FormatBool(d) + "|" + strconv.FormatBool(w)
	})
	for _, r := range regions {
		j := judge(r)
		o := firewall.ClassOpening(r.Class, r.From)
		o.Uncertain, o.In = r.Before.Unsure, r.In
		f := Fate{Opening: o, Fate: j.fate, Reason: j.reason}
		if f.Fate == FateKept {
			f.By = classOwner(r.Class, spec)
		}
		f.Dropped, f.Declared = declared(r, j)
		p.Fates = append(p.Fates, f)
		if f.Fate == FateKept || f.Dropped || f.Declared {
			continue
		}
		p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) would be %s: %s; make the found firewall's rule for it one the evaluator decides (a source or interface match), remove it from the found firewall before the flip, or declare it: %q in flip.drop closes it, in flip.widen lets it pass from every source",
			classSpec(o), describeOpening(o), f.Fate, f.Reason, r.Class.Spelling()))
	}
}

// notIface are the reasons of why (eval.Undecided's) that are not an input
// interface, which the mesh's table carries.
func notIface(why []string) []string {
	var out []string
	for _, w := range why {
		if !strings.HasPrefix(w, "input interface ") {
			out = append(out, w)
		}
	}
	return out
}
