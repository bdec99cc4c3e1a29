// This file holds the evaluator's compiled form of a ruleset: chains by
// pointer, jump and goto targets resolved once, a memo slot per rule, each
// rule's conditions in the order that rejects a packet soonest, and large
// source prefix lists as sets.

package eval

import (
	"adoption/firewall"
)

// program is a ruleset compiled for the evaluator. It only points into the
// ruleset, which must not change while the program is used.
type program struct {
	byChain map[*firewall.Chain]*cchain
	// slots is the number of rules in all chains: one memo slot each.
	slots int
	// sources holds a prefixSet for each source condition with more
	// prefixes than a scan decides as fast (a blocklist set).
	sources map[*firewall.Cond]*prefixSet
}

// scanPrefixes is how many prefixes a source condition may have and still
// be decided by a scan.
const scanPrefixes = 8

// cchain is one chain of the program; base is the memo slot of its rule 0.
type cchain struct {
	ch    *firewall.Chain
	base  int
	rules []crule
	// ports indexes the rules by destination port (portindex.go); nil:
	// the chain is scanned.
	ports *portIndex
}

// crule is one rule: conds are the rule's conditions in evaluation order,
// target the chain its verdict jumps or goes to, vtargets the same for
// each verdict map entry (nil: no chain of that name in the table).
type crule struct {
	rule     *firewall.Rule
	conds    []*firewall.Cond
	target   *cchain
	vtargets []*cchain
}

// compile builds the program of rs. A jump names a chain of its own table;
// where two chains of a table share a name the later one is the target, as
// the evaluator always resolved it.
func compile(rs *firewall.Ruleset) *program {
	p := &program{byChain: map[*firewall.Chain]*cchain{}, sources: map[*firewall.Cond]*prefixSet{}}
	eachCond(rs, func(c *firewall.Cond) {
		if c.Kind == firewall.CondSaddr && len(c.Prefixes) > scanPrefixes {
			p.sources[c] = newPrefixSet(c.Prefixes)
		}
	})
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		byName := map[string]*cchain{}
		cs := make([]cchain, len(t.Chains))
		for ci := range t.Chains {
			ch := &t.Chains[ci]
			cs[ci] = cchain{ch: ch, base: p.slots, rules: make([]crule, len(ch.Rules))}
			p.slots += len(ch.Rules)
			p.byChain[ch] = &cs[ci]
			byName[ch.Name] = &cs[ci]
		}
		for ci := range cs {
			for ri := range cs[ci].rules {
				r := &t.Chains[ci].Rules[ri]
				cr := &cs[ci].rules[ri]
				cr.rule, cr.conds = r, condOrder(r.Conds)
				if isJump(r.Verdict.Kind) {
					cr.target = byName[r.Verdict.Target]
				}
				if r.VMap != nil {
					cr.vtargets = make([]*cchain, len(r.VMap))
					for k, en := range r.VMap {
						if isJump(en.Verdict.Kind) {
							cr.vtargets[k] = byName[en.Verdict.Target]
						}
					}
				}
			}
			if shortcuts {
				cs[ci].ports = newPortIndex(cs[ci].rules)
			}
		}
	}
	return p
}

func isJump(k firewall.VerdictKind) bool {
	return k == firewall.VerdictJump || k == firewall.VerdictGoto
}

// chain is ch's compiled chain.
func (p *program) chain(ch *firewall.Chain) *cchain { return p.byChain[ch] }

// condOrder orders a rule's conditions for evaluation: family and protocol
// first, then ports, then the rest, source addresses last. A rule's match
// does not depend on the order (any false condition makes it false, else
// any undecidable one makes it undecidable), and deciding a condition has
// no effect; but most rules fail on their protocol or port, and a source
// condition looked at only when all else holds lets every source region but
// one share an evaluation (evaluator.sawSource).
func condOrder(conds []firewall.Cond) []*firewall.Cond {
	out := make([]*firewall.Cond, 0, len(conds))
	for rank := range 4 {
		for i := range conds {
			if condRank(conds[i].Kind) == rank {
				out = append(out, &conds[i])
			}
		}
	}
	return out
}

func condRank(k firewall.CondKind) int {
	switch k {
	case firewall.CondNFProto, firewall.CondL4Proto, firewall.CondNever:
		return 0
	case firewall.CondDport, firewall.CondOrigDport:
		return 1
	case firewall.CondSaddr:
		return 3
	}
	return 2
}
