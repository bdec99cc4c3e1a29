// This file holds the traffic classes beyond TCP and UDP by port in the
// flip (eval.Classes: ICMP and ICMPv6 types, other protocols, broadcast
// and multicast services): the restriction each keeps from the found
// firewall, the rules of table inet adoption that carry it, and the
// preview's fate of each class per source region.

package flip

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
)

// ClassAllow is flipwire.ClassAllow.
type ClassAllow = flipwire.ClassAllow

func classNames() string {
	seen := map[string]bool{}
	var out []string
	for _, c := range eval.Classes() {
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c.Name)
		}
	}
	return strings.Join(out, ", ")
}

// carryClasses are the classes found lets through now, each with the
// sources it lets through, per input interface class where found names
// interfaces (read with nothing known of the node, as the ports'
// restrictions are, by byIface: one ClassAllow per group of interfaces
// that fare alike). A class found lets through only under a condition the
// evaluator cannot decide is carried without it: the preview names that a
// widening. A class in drop (flip.drop) is not carried; one in widen
// (flip.widen) is carried from every source on every interface.
func carryClasses(r *carrier, drop, widen []string) []ClassAllow {
	out := []ClassAllow{}
	classes := r.classes
	if len(classes) == 0 {
		classes = []ifaceClass{{"", r.zero}}
	}
	for _, c := range eval.Classes() {
		if slices.Contains(drop, c.Spelling()) {
			continue
		}
		reach, _, open := byIface(classes, []string{c.Family}, func(x *eval.Reacher, _ string) eval.SourceReach { return x.Class(c) })
		if !open {
			continue
		}
		if slices.Contains(widen, c.Spelling()) {
			reach = []Reach{{Family: c.Family}}
		}
		for _, rc := range reach {
			out = append(out, ClassAllow{Name: c.Name, Reach: rc})
		}
	}
	return out
}

// classRule adds the input rules that keep class c from the sources (and
// on the interfaces) of r, the k-th restriction of its name and family:
// "[iifname I] meta nfproto F [F saddr @S] meta l4proto P [icmp type T]
// [F daddr G] [th dport N] accept".
func classRule(rules *[]derivedRule, comment string, c eval.Class, r Reach, k int) []derivedSet {
	var sets []derivedSet
	for _, cr := range carriedNamed("input_"+strings.ReplaceAll(c.Name, "-", "_"), r, k) {
		sets = append(sets, cr.sets...)
		ex, text := cr.exprs, cr.text
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Num}})
		text += fmt.Sprintf("meta l4proto %d ", c.Num)
		if c.ICMP() {
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Type}})
			text += fmt.Sprintf("%s type %d ", c.Proto, c.Type)
		}
		if c.Dst.IsValid() && !c.ICMP() {
			// A service's group or broadcast address (an ICMPv6 message sent to
			// ff02::1 may as well come unicast: not narrowed to it).
			kw, off := "ip", uint32(16)
			if c.Family == firewall.FamilyIP6 {
				kw, off = "ip6", 24
			}
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(c.Dst.BitLen() / 8)},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: c.Dst.AsSlice()})
			text += fmt.Sprintf("%s daddr %s ", kw, c.Dst)
		}
		if c.Port != 0 {
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(c.Port)})
			text += fmt.Sprintf("th dport %d ", c.Port)
		}
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictAccept})
		*rules = append(*rules, derivedRule{chain: firewall.HookInput, comment: comment, text: text + "accept", exprs: ex})
	}
	return sets
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

// classSpec names a class opening: "icmp echo-request", "udp mdns to
// 224.0.0.251 port 5353".
func classSpec(o firewall.Opening) string {
	s := o.Proto + " " + o.Class
	if o.To != "" {
		s += " to " + o.To
	}
	if o.Port != 0 {
		s += fmt.Sprintf(" port %d", o.Port)
	}
	return s
}

// classFates gives each class a fate per source region (eval.CompareClasses
// of found and the ruleset after the flip): kept where it passes surely
// before and after; closing where it passes now and would not; widening
// where it would pass from sources it does not pass from now, or surely
// where it passes now only under a condition the evaluator cannot decide;
// uncertain where it would pass only under such a condition where it passes
// now surely (uncertain alike before and after, as an interface of a node
// with several uplinks, is kept, as a port is). Every fate but
// kept refuses: the mesh carries what the found firewall lets through, so
// any other is a restriction it could not carry, named with the class.
func classFates(p *Preview, pair *eval.Pair, node firewall.Node, spec MeshSpec) {
	found := pair.Before()
	regions := pair.CompareClasses(node)
	for _, b := range eval.HostBridges(node, found, pair.After()) {
		regions = append(regions, pair.CompareClassesIn(node, b)...)
	}
	for _, r := range regions {
		o := firewall.ClassOpening(r.Class, r.From)
		o.Uncertain, o.In = r.Before.Unsure, r.In
		f := Fate{Opening: o, Fate: FateKept, By: OwnerEssentials}
		from := "any source"
		if r.From != "" {
			from = r.From
		}
		switch {
		case r.Before.Open && !r.After.Open:
			f.Fate, f.By = FateClosing, ""
			f.Reason = "passes now from " + from + " and would not after the flip: the mesh's table does not carry it"
		case r.After.Open && !r.Before.Open:
			f.Fate = FateWidening
			f.Reason = "passes after the flip from " + from + ", which the found firewall does not let through"
		case r.After.Open && r.Before.Unsure && !r.After.Unsure:
			f.Fate = FateWidening
			f.Reason = "passes now only under a condition the evaluator cannot decide, and after the flip without it"
			if why := eval.UndecidedClass(found, r.Class); len(why) > 0 {
				f.Reason += " (" + strings.Join(why, "; ") + "): that restriction cannot be carried"
			}
		case r.After.Unsure && !r.Before.Unsure:
			f.Fate = FateUncertain
			f.Reason = "passes after the flip only under a condition the evaluator cannot decide"
		case r.After.Open && r.Before.Unsure && len(notIface(eval.UndecidedClass(found, r.Class))) > 0:
			// Uncertain alike is kept only where what is undecided is the
			// interface (carried): a rate limit is not.
			f.Fate = FateWidening
			f.Reason = "passes now only under a condition the evaluator cannot decide (" + strings.Join(notIface(eval.UndecidedClass(found, r.Class)), "; ") + "), and after the flip without it: that restriction cannot be carried"
		}
		f.Dropped = f.Fate == FateClosing && slices.Contains(spec.DropClasses, r.Class.Spelling())
		f.Declared = f.Fate == FateWidening && slices.Contains(spec.WidenClasses, r.Class.Spelling())
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
