// This file holds forwarded ICMP and ICMPv6 that starts a conversation (an
// echo request and the other query types): what the found firewall
// forwards is carried into the forward chain of table inet adoption
// (MeshSpec.ForwardICMP, read by EffectiveSpec), and the preview judges
// it routed to each network behind the node and from each container
// bridge out (eval.CompareForwardICMP).

package flip

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables/expr"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
)

// ForwardICMP is flipwire.ForwardICMP.
type ForwardICMP = flipwire.ForwardICMP

// foundForwardICMP reads what found (compiled) surely forwards of ICMP
// that starts a conversation (eval.Compiled.ForwardICMP). A type within a
// region of drop (flip.drop) is not carried.
func foundForwardICMP(cf *eval.Compiled, drop []string) []ForwardICMP {
	var out []ForwardICMP
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, c := range cf.ForwardICMP(fam) {
			if (eval.FwdICMP{Family: fam, Type: c.Type}).Class().WithinAny(drop) {
				continue
			}
			out = append(out, ForwardICMP{Family: fam, Type: c.Type, Iif: c.Iif, NotIif: c.NotIif, From: c.From, Except: c.Except})
		}
	}
	return out
}

// forwardICMPRules are the forward chain's rules and sets for spec's
// ForwardICMP: "[iifname I | iifname != N ...] meta nfproto F [F saddr
// @S_from] [F saddr != @S_except] meta l4proto P icmp type T accept".
func forwardICMPRules(spec MeshSpec) ([]derivedRule, []derivedSet) {
	var rules []derivedRule
	var sets []derivedSet
	for k, f := range spec.ForwardICMP {
		c := eval.FwdICMP{Family: f.Family, Type: f.Type}.Class()
		r := Reach{Family: f.Family, From: f.From, Except: f.Except, NotIif: f.NotIif}
		if f.Iif != "" {
			r.Iif = []string{f.Iif}
		}
		for _, cr := range carriedNamed("forward_"+classSetName(c), r, k) {
			sets = append(sets, cr.sets...)
			ex := append(slices.Clone(cr.exprs), &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Num}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.Type}},
				&expr.Verdict{Kind: expr.VerdictAccept})
			rules = append(rules, derivedRule{chain: firewall.HookForward, exprs: ex,
				comment: fmt.Sprintf("%s%s:%s:%s", firewall.MarkPrefix, spec.Node, OwnerRouted, classSetName(c)),
				text:    cr.text + fmt.Sprintf("meta l4proto %d %s type %d accept", c.Num, c.Proto, f.Type)})
		}
	}
	return rules, sets
}

// validForwardICMP checks spec's ForwardICMP.
func validForwardICMP(spec MeshSpec) []error {
	var errs []error
	for _, f := range spec.ForwardICMP {
		if f.Family != firewall.FamilyIP && f.Family != firewall.FamilyIP6 {
			errs = append(errs, fmt.Errorf("forwarded ICMP type %d: family %q is not ip or ip6", f.Type, f.Family))
		}
		for _, n := range append([]string{f.Iif}, f.NotIif...) {
			if err := validIfname(n, true); n != "" && err != nil {
				errs = append(errs, fmt.Errorf("forwarded ICMP type %d: %w", f.Type, err))
			}
		}
		for _, q := range append(slices.Clone(f.From), f.Except...) {
			if !q.IsValid() || q.Addr().Is4() != (f.Family == firewall.FamilyIP) || q.Addr().Is4In6() {
				errs = append(errs, fmt.Errorf("forwarded ICMP type %d: source %s is not a prefix of family %s", f.Type, q, f.Family))
			}
		}
	}
	return errs
}

// forwardICMPFates gives forwarded ICMP that starts a conversation a fate
// per region (routed to a network behind the node, or from a container
// bridge out) and source region: kept, closing, widening or uncertain as
// for regions at the input hook (classFates); a region closed before and
// after has none. Every fate but kept refuses unless declared (a region
// of flip.drop or flip.widen holding it).
func forwardICMPFates(p *Preview, pair *eval.Pair, node firewall.Node, spec MeshSpec) {
	for _, r := range pair.CompareForwardICMP(node) {
		if !r.Before.Open && !r.After.Open {
			continue
		}
		from := "any source"
		if r.From != "" {
			from = r.From
		}
		fate, reason := FateKept, ""
		switch {
		case r.Before.Open && !r.After.Open:
			fate, reason = FateClosing, "is forwarded now from "+from+" and would not be after the flip: the mesh's table does not carry it"
		case r.After.Open && !r.Before.Open:
			fate, reason = FateWidening, "is forwarded after the flip from "+from+", which the found firewall does not forward"
		case r.After.Unsure && !r.Before.Unsure:
			fate, reason = FateUncertain, "is forwarded after the flip only under a condition the evaluator cannot decide"
		case r.Before.Unsure && !r.After.Unsure:
			fate, reason = FateWidening, "is forwarded now only under a condition the evaluator cannot decide, and after the flip without it"
		}
		c := r.Class()
		o := firewall.ClassOpening(c, r.From)
		o.Direction, o.In, o.Via, o.To, o.Uncertain = firewall.HookForward, r.In, r.Via, "", r.Before.Unsure
		f := Fate{Opening: o, Fate: fate, Reason: reason}
		if fate == FateKept {
			f.By = OwnerRouted
		}
		f.Dropped = fate == FateClosing && c.WithinAny(spec.DropClasses)
		f.Declared = fate == FateWidening && c.WithinAny(spec.WidenClasses)
		p.Fates = append(p.Fates, f)
		if fate == FateKept || f.Dropped || f.Declared {
			continue
		}
		spelling := strings.SplitN(c.Spelling(), " to ", 2)[0]
		p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) would be %s: it %s; remove it from the found firewall before the flip, or declare it: %q in flip.drop closes it, in flip.widen lets it pass",
			c.Spelling(), describeOpening(o), fate, reason, spelling))
	}
}
