// This file holds what keeps an opening or a region uncertain (Undecided):
// the reasons of the undecidable conditions and input interfaces of the
// rules its packets may meet. The rules that carry a reason are found once
// per ruleset (reasonRules; Compiled keeps them), so that asking of many
// openings and regions reads those rules only, not the whole ruleset.

package eval

import (
	"slices"
	"strings"

	"adoption/firewall"
)

// Undecided lists the reasons of the undecidable conditions of rules a new
// connection of proto to port (at dir, family fam) may meet: what keeps an
// opening uncertain, in the words of the decoder ("limit rate 3/60s", "xt
// match recent rev 0"), and the input interfaces rules name ("input
// interface eth1"), which a node with several uplinks cannot decide. Base
// chains of other hooks are left out. Each reason once, in ruleset order.
func Undecided(rs *firewall.Ruleset, dir, fam, proto string, port uint16) []string {
	return undecidedIn(reasonRules(rs), portPacket(dir, fam, proto, port))
}

// UndecidedClass is Undecided for a packet of class c at the input hook.
func UndecidedClass(rs *firewall.Ruleset, c Class) []string {
	return undecidedIn(reasonRules(rs), classInputPacket(c))
}

// Undecided is the package's Undecided of the compiled ruleset.
func (c *Compiled) Undecided(dir, fam, proto string, port uint16) []string {
	return undecidedIn(c.reasonRules(), portPacket(dir, fam, proto, port))
}

// UndecidedClass is the package's UndecidedClass of the compiled ruleset.
func (c *Compiled) UndecidedClass(cl Class) []string {
	return undecidedIn(c.reasonRules(), classInputPacket(cl))
}

// reasonRules are the rules of the compiled ruleset that carry a reason,
// found once.
func (c *Compiled) reasonRules() []reasonRule {
	c.reasonsOnce.Do(func() { c.reasons = reasonRules(c.rs) })
	return c.reasons
}

func portPacket(dir, fam, proto string, port uint16) Packet {
	return Packet{Hook: dir, Family: fam, Proto: protoNum(proto), Port: port, OrigPort: port, Src: Atom{Other: true}}
}

func classInputPacket(c Class) Packet {
	pkt := classPacket(c)
	pkt.Hook, pkt.Src = firewall.HookInput, Atom{Other: true}
	return pkt
}

// reasonRule is a rule that may decide a packet's fate (not inert, in a
// chain that may not only return) and has reasons: its undecidable
// conditions and the input interfaces it names, in order, and the other
// conditions, which a packet must not fail for the reasons to count. A
// source address is left out of both: some source or interface may match.
type reasonRule struct {
	family, hook string // the table's family, the chain's hook
	reasons      []string
	checks       []*firewall.Cond
}

// reasonRules are the rules of rs that carry a reason, in ruleset order.
func reasonRules(rs *firewall.Ruleset) []reasonRule {
	var out []reasonRule
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		for ci := range t.Chains {
			ch := &t.Chains[ci]
			if returnsOnly(t, ch, 0) {
				continue // whatever it matches, the packet comes back
			}
			for ri := range ch.Rules {
				r := &ch.Rules[ri]
				var reasons []string
				var checks []*firewall.Cond
				for k := range r.Conds {
					c := &r.Conds[k]
					switch {
					case c.Kind == firewall.CondUndecidable:
						reasons = append(reasons, c.Reason)
					case c.Kind == firewall.CondIifname:
						if !c.Negate && !slices.Contains(c.Names, "lo") {
							reasons = append(reasons, "input interface "+strings.Join(c.Names, ", "))
						}
					case c.Kind == firewall.CondSaddr:
						// Some source or interface may match.
					default:
						checks = append(checks, c)
					}
				}
				if len(reasons) == 0 || inert(t, r, 0) {
					continue // no reason; or matched or not, the packet goes on alike
				}
				out = append(out, reasonRule{family: t.Family, hook: ch.Hook, reasons: reasons, checks: checks})
			}
		}
	}
	return out
}

// undecidedIn are the reasons of the rules of rules that pkt may meet,
// each once, in order.
func undecidedIn(rules []reasonRule, pkt Packet) []string {
	dir, fam := pkt.Hook, pkt.Family
	seen := map[string]bool{}
	var out []string
	for i := range rules {
		r := &rules[i]
		if r.family != fam && r.family != firewall.FamilyInet {
			continue
		}
		if r.hook != "" && r.hook != dir && r.hook != firewall.HookPrerouting {
			continue
		}
		may := true
		for _, c := range r.checks {
			if pkt.Cond(c) == TriFalse {
				may = false
				break
			}
		}
		if !may {
			continue
		}
		for _, why := range r.reasons {
			if !seen[why] {
				seen[why] = true
				out = append(out, why)
			}
		}
	}
	return out
}
