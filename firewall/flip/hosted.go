// This file holds traffic from a container bridge to the node itself (a
// container reaching a host service, the input hook): what the found
// firewall lets through by the bridge's name, carried into the mesh's
// input chain (BridgeIn), and the preview's fate of every port and source
// region of it.

package flip

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/google/nftables/expr"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/firewall/marks"
	"adoption/vocab"
)

// BridgeIn is flipwire.BridgeIn.
type BridgeIn = flipwire.BridgeIn

// foundBridgeIn reads what found lets through from each bridge it names
// to the node itself, by that name: every port interval a new connection
// coming in on the bridge surely reaches from some source, where it fares
// otherwise than one coming in on an interface found does not name (what
// any interface reaches is the plan's: its Input ports, their
// restrictions carried). Read with nothing known of the node, as every
// carried restriction is: zero is a Reacher of found on the zero Node
// (carrier.zero's kind), bridges the bridges found names
// (carrier.bridges).
func foundBridgeIn(found *firewall.Ruleset, zero *eval.Reacher, bridges []string) []BridgeIn {
	var out []BridgeIn
	other := zero.In(otherIface)
	// What an interface found does not name reaches is the same beside
	// every bridge: read once, when asked.
	type at struct {
		fam, proto string
		start      int
	}
	others := map[at]eval.SourceReach{}
	otherAt := func(fam, proto string, start int) eval.SourceReach {
		k := at{fam, proto, start}
		s, ok := others[k]
		if !ok {
			s = other.At(firewall.HookInput, fam, proto, uint16(start))
			others[k] = s
		}
		return s
	}
	starts := map[[2]string][]int{}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, proto := range []string{"tcp", "udp"} {
			starts[[2]string{fam, proto}] = eval.PortStarts(found, fam, proto)
		}
	}
	for _, b := range bridges {
		in := zero.In(b)
		var not []string
		for _, n := range bridges {
			if n != b && covers(b, n) {
				not = append(not, n)
			}
		}
		for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
			for _, proto := range []string{"tcp", "udp"} {
				var last *BridgeIn
				for start, end := range eval.PortRuns(starts[[2]string{fam, proto}]) {
					s := in.At(firewall.HookInput, fam, proto, uint16(start))
					if !s.Open() || s.Unsure || sameRegion(s, otherAt(fam, proto, start)) {
						last = nil
						continue
					}
					if last != nil && reflect.DeepEqual(last.From, s.Only) && reflect.DeepEqual(last.Except, s.Except) && int(last.PortEnd)+1 == start {
						last.PortEnd = uint16(end)
						continue
					}
					out = append(out, BridgeIn{Family: fam, Iif: b, NotIif: not, Proto: proto, Port: uint16(start), PortEnd: uint16(end), From: s.Only, Except: s.Except})
					last = &out[len(out)-1]
				}
			}
		}
	}
	for i := range out {
		if out[i].PortEnd == out[i].Port {
			out[i].PortEnd = 0
		}
	}
	return out
}

// sameRegion reports whether a and b hold the same sources, sure or not
// (an interface found does not name may be unsure where a bridge is not:
// Docker 28's "! -i docker0" drops, decided for the bridge alone).
func sameRegion(a, b eval.SourceReach) bool {
	return a.Any == b.Any && reflect.DeepEqual(a.Only, b.Only) && reflect.DeepEqual(a.Except, b.Except)
}

// bridgeInRules are the input chain's rules for spec's FromBridges:
// "iifname B meta nfproto F [F saddr @S] meta l4proto P [th dport N]
// counter accept".
func bridgeInRules(spec MeshSpec) ([]derivedRule, []derivedSet) {
	var rules []derivedRule
	var sets []derivedSet
	for k, b := range spec.FromBridges {
		dport, dtext, ports := dportMatch(b.Port, b.PortEnd)
		// Sets are named by position: an interface name may hold what a
		// set name may not ('*', '-').
		ex, text, ss := carriedExprs(fmt.Sprintf("bridge%d_%s", k, b.Proto), Reach{Family: b.Family, From: b.From, Except: b.Except}, 0)
		sets = append(sets, ss...)
		iif := marks.Iifname(b.Iif, expr.VerdictAccept)
		pre, ptext := append([]expr.Any(nil), iif[:2]...), fmt.Sprintf("iifname %q ", b.Iif)
		for _, n := range b.NotIif {
			pre = append(pre, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameData(n)})
			ptext += fmt.Sprintf("iifname != %q ", n)
		}
		ex = append(pre, ex...)
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{marks.L4num(b.Proto)}})
		ex = append(append(ex, dport...), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
		rules = append(rules, derivedRule{chain: firewall.HookInput, exprs: ex,
			comment: fmt.Sprintf("%s%s:%s:%s/%s", firewall.MarkPrefix, spec.Node, OwnerContainers, ports, b.Proto),
			text:    ptext + text + fmt.Sprintf("meta l4proto %s %scounter accept", b.Proto, dtext)})
	}
	return rules, sets
}

// validateBridgeIn checks spec's FromBridges.
func validateBridgeIn(spec MeshSpec) []error {
	var errs []error
	for _, b := range spec.FromBridges {
		where := fmt.Sprintf("from bridge %q %d/%s", b.Iif, b.Port, b.Proto)
		for _, n := range append([]string{b.Iif}, b.NotIif...) {
			if err := validIfname(n, true); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		if b.Proto != "tcp" && b.Proto != "udp" {
			errs = append(errs, fmt.Errorf("%s: protocol %q is not tcp or udp", where, b.Proto))
		}
		if b.PortEnd != 0 && b.PortEnd < b.Port {
			errs = append(errs, fmt.Errorf("%s: port range ends at %d, before it starts", where, b.PortEnd))
		}
		errs = append(errs, checkReach(where, Reach{Family: b.Family, From: b.From, Except: b.Except})...)
	}
	return errs
}

// bridgeFates gives every port interval and source region of new
// connections from a container bridge to the node itself a fate
// (eval.CompareBridgeInput of found and the ruleset after the flip): kept
// where it passes before and after alike; closing where it passes now and
// would not (approved when every port of it is in spec.Drop); widening
// where it would pass from sources it does not pass from now, or surely
// where it passes now only under a condition the evaluator cannot decide
// (approved when every port is in spec.Widen); uncertain where it would
// pass only under such a condition where it passes now surely.
func bridgeFates(p *Preview, pair *eval.Pair, derived *firewall.Ruleset, node firewall.Node, spec MeshSpec) {
	found := pair.Before()
	in := func(l []vocab.Port, o firewall.Opening) bool {
		for x := int(o.Port); x <= int(firewall.PortEnd(o)); x++ {
			if !slices.Contains(l, vocab.Port{Num: uint16(x), Proto: o.Proto}) {
				return false
			}
		}
		return true
	}
	for _, r := range pair.CompareBridgeInput(node, eval.HostBridges(node, found, pair.After())) {
		o := r.Opening
		o.Uncertain = r.Before.Unsure
		f := Fate{Opening: o, Fate: FateKept, By: keeper(derived, o, o.Port)}
		if f.By == "" {
			f.By = OwnerContainers
		}
		from := "any source"
		if o.From != "" {
			from = o.From
		}
		if r.After.Unsure && !r.Before.Open {
			// Passes after only perhaps where it does not now: as Widened,
			// not named (the mesh's DHCP replies, by source port).
			continue
		}
		switch {
		case r.Before.Open && !r.After.Open:
			f.Fate, f.By = FateClosing, ""
			f.Reason = "passes now from " + from + " on " + o.In + " and would not after the flip"
			f.Dropped = in(spec.Drop, o)
		case r.After.Open && !r.Before.Open:
			f.Fate = FateWidening
			f.Reason = "passes after the flip from " + from + " on " + o.In + ", which the found firewall does not let through"
			f.Declared = in(spec.Widen, o)
		case r.After.Open && r.Before.Unsure && !r.After.Unsure:
			f.Fate = FateWidening
			f.Reason = "passes now only under a condition the evaluator cannot decide, and after the flip without it"
			if why := eval.Undecided(found, firewall.HookInput, o.Family, o.Proto, o.Port); len(why) > 0 {
				f.Reason += " (" + strings.Join(why, "; ") + "): that restriction cannot be carried"
			}
			f.Declared = in(spec.Widen, o)
		case r.After.Unsure && !r.Before.Unsure:
			f.Fate = FateUncertain
			f.Reason = "passes after the flip only under a condition the evaluator cannot decide"
		}
		p.Fates = append(p.Fates, f)
		if f.Fate == FateKept || f.Dropped || f.Declared {
			continue
		}
		fix := "declare the port in a module, or add it to flip.drop"
		if f.Fate != FateClosing {
			fix = "make the found firewall's rule one the evaluator decides, or declare the port in flip.widen"
		}
		p.Reasons = append(p.Reasons, fmt.Sprintf("%s from container bridge %s (%s) would be %s: %s; %s", portSpec(o), o.In, describeOpening(o), f.Fate, f.Reason, fix))
	}
}

// bridgesNamed are the container bridges found's input interface
// conditions name (firewall.BridgeTool), wildcards included, sorted.
func bridgesNamed(found *firewall.Ruleset) []string {
	out := eval.HostBridges(firewall.Node{}, found)
	sort.Strings(out)
	return out
}
