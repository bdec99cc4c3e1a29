// This file holds where a mark goes in a chain, one rule for the input and
// the forward path: after the found firewall's source denies, never before
// them, and what about that could not be decided, which the mark carries
// to status.

package marks

import (
	"fmt"
	"strings"

	"adoption/firewall"
	"adoption/firewall/eval"
)

// connMatch says whether conds could all hold, in family fam (ip or ip6),
// for the connection a mark opens, from some source: any source may be one
// the mesh needs, so a source condition never rules it out.
type connMatch func(fam string, conds []firewall.Cond) bool

// inputMatch is the connection an input mark opens: a new one to the
// node's own port.
func inputMatch(proto string, port uint16) connMatch {
	return func(fam string, conds []firewall.Cond) bool {
		pkt := eval.Packet{Hook: firewall.HookInput, Family: fam, Proto: L4num(proto), Port: port, OrigPort: port, Src: eval.Atom{Other: true}}
		for i := range conds {
			if conds[i].Kind != firewall.CondSaddr && pkt.Cond(&conds[i]) == eval.TriFalse {
				return false
			}
		}
		return true
	}
}

// forwardMatch is the connection a forward mark opens: a new one DNATed
// from host port port. Its destination address, port and output interface
// after the DNAT are whatever Docker gives the container, so conditions on
// them never rule it out either.
func forwardMatch(proto string, port uint16) connMatch {
	return func(fam string, conds []firewall.Cond) bool {
		pkt := eval.Packet{Hook: firewall.HookForward, Family: fam, Proto: L4num(proto), OrigPort: port, Dnat: true, Src: eval.Atom{Other: true}}
		for i := range conds {
			switch conds[i].Kind {
			case firewall.CondSaddr, firewall.CondDport, firewall.CondDaddr, firewall.CondOifname:
				continue
			}
			if pkt.Cond(&conds[i]) == eval.TriFalse {
				return false
			}
		}
		return true
	}
}

// may is m in a table of family: an inet table's rules see both.
func (m connMatch) may(family string, conds []firewall.Cond) bool {
	if family == firewall.FamilyInet {
		return m(firewall.FamilyIP, conds) || m(firewall.FamilyIP6, conds)
	}
	return m(family, conds)
}

// ruleOutcome is one verdict a rule can give and every condition it gives it
// on: a verdict map's entry adds its key's condition to the rule's.
type ruleOutcome struct {
	conds   []firewall.Cond
	verdict firewall.Verdict
}

func ruleOutcomes(r *firewall.Rule) []ruleOutcome {
	if r.VMap == nil {
		return []ruleOutcome{{r.Conds, r.Verdict}}
	}
	out := make([]ruleOutcome, 0, len(r.VMap))
	for _, e := range r.VMap {
		out = append(out, ruleOutcome{append(append([]firewall.Cond(nil), r.Conds...), e.Cond), e.Verdict})
	}
	return out
}

func dropLike(k firewall.VerdictKind) bool {
	switch k {
	case firewall.VerdictDrop, firewall.VerdictReject, firewall.VerdictJump, firewall.VerdictGoto, firewall.VerdictUnknown:
		return true
	}
	return false
}

// couldDrop reports whether r could end the connection with a drop, a
// reject, or a jump, goto or unknown verdict that might lead to one. A rule
// that cannot match it ("ct state invalid drop", "iifname lo ...") does not
// count, so a mark may go after it.
func couldDrop(family string, r *firewall.Rule, m connMatch) bool {
	for _, o := range ruleOutcomes(r) {
		if dropLike(o.verdict.Kind) && m.may(family, o.conds) {
			return true
		}
	}
	return false
}

// sourceDeny reports whether r could be one of the found firewall's source
// denies for the connection: an outcome that could drop it and that
//   - names where it comes from: a source address or prefix ("ufw deny
//     from", a blocklist set looked up on the source decodes so) or an
//     input interface ("ufw deny in on eth1");
//   - or cannot be decided: a condition the decoder cannot decide
//     (iptables' "-m set --match-set bl src", "-m recent", a set whose
//     elements could not be listed) or an unknown verdict;
//   - or jumps or goes to a chain holding such a rule, or whose rules could
//     not be listed.
func sourceDeny(t *firewall.Table, r *firewall.Rule, m connMatch) bool { return denies(t, r, m, nil) }

// denies is sourceDeny, seen holding the chains already looked into (nil
// until a jump is followed).
func denies(t *firewall.Table, r *firewall.Rule, m connMatch, seen map[string]bool) bool {
	for _, o := range ruleOutcomes(r) {
		if !dropLike(o.verdict.Kind) || !m.may(t.Family, o.conds) {
			continue
		}
		if o.verdict.Kind == firewall.VerdictUnknown || namesSource(o.conds) {
			return true
		}
		if k := o.verdict.Kind; k == firewall.VerdictJump || k == firewall.VerdictGoto {
			if seen == nil {
				seen = map[string]bool{}
			}
			if chainDenies(t, o.verdict.Target, m, seen) {
				return true
			}
		}
	}
	return false
}

func chainDenies(t *firewall.Table, name string, m connMatch, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	ch := ChainNamed(t, name)
	if ch == nil || ch.Unknown != "" {
		return true // its rules are not known: any of them could be one
	}
	for i := range ch.Rules {
		if denies(t, &ch.Rules[i], m, seen) {
			return true
		}
	}
	return false
}

// namesSource reports whether conds say where a packet comes from, or
// could (an undecidable condition may be a lookup on the source).
func namesSource(conds []firewall.Cond) bool {
	for _, c := range conds {
		switch c.Kind {
		case firewall.CondSaddr, firewall.CondIifname, firewall.CondUndecidable:
			return true
		}
	}
	return false
}

// placeIn says where in chain ch of table t a mark for the connection m
// goes, by the one placement rule of both paths:
//
//   - after the chain's last rule that could be a source deny
//     (sourceDeny), never before it, so a source the found firewall denies
//     stays denied;
//   - in a regular chain (ufw's, DOCKER-USER), right there: at the head
//     when there is none;
//   - in a base chain, before the first rule after it that could drop the
//     connection, or appended when only the policy could; a base chain
//     that never drops it there needs no mark (need is false).
//
// What could not be decided goes into p.notes: a rule before that last
// source deny that could drop the connection whatever its source, so that
// the mark, after both, may not take effect. A base chain with such a note
// gets its mark even when nothing after the denies drops the connection:
// harmless there, it carries the note into status.
func placeIn(t *firewall.Table, ch *firewall.Chain, m connMatch) (p placement, need bool) {
	p = placement{table: t, chain: ch}
	deny := make([]bool, len(ch.Rules))
	last := -1
	for i := range ch.Rules {
		if deny[i] = sourceDeny(t, &ch.Rules[i], m); deny[i] {
			last = i
		}
	}
	p.from = last + 1
	for i := 0; i < last; i++ {
		if r := &ch.Rules[i]; !deny[i] && couldDrop(t.Family, r, m) {
			p.notes = append(p.notes, fmt.Sprintf("%s %s %s rule handle %d (%s) could drop the connection whatever its source and comes before the found firewall's last possible source deny (handle %d): the mark goes after that deny, where it may not take effect",
				t.Family, t.Name, ch.Name, r.Handle, firewall.RenderRule(r), ch.Rules[last].Handle))
		}
	}
	at := -1
	if ch.Hook != "" {
		for i := p.from; i < len(ch.Rules); i++ {
			if couldDrop(t.Family, &ch.Rules[i], m) {
				at = i
				break
			}
		}
		if at < 0 && ch.Policy != "drop" && len(p.notes) == 0 {
			return p, false // this base chain never drops the connection
		}
		if at < 0 && ch.Policy == "drop" {
			p.append = true
			return p, true
		}
	}
	switch {
	case at >= 0:
		p.before = ch.Rules[at].Handle
	case p.from == 0:
		// At the head: before = 0 and not appended.
	case p.from < len(ch.Rules):
		p.before = ch.Rules[p.from].Handle
	default:
		p.append = true
	}
	return p, true
}

// laterDenies notes the found firewall's possible source denies that the
// connection meets after the mark's regular chain ch returns, in the
// listed chains of t that jump to it (the ufw-docker arrangement's
// DOCKER-USER, which jumps to ufw-user-forward before its own rules): the
// mark's accept skips them, so it lets the sources they deny through, and
// no place in ch keeps them.
func laterDenies(t *firewall.Table, ch *firewall.Chain, m connMatch) []string {
	if ch.Hook != "" {
		return nil
	}
	var notes []string
	for ci := range t.Chains {
		caller := &t.Chains[ci]
		for ri := range caller.Rules {
			if r := &caller.Rules[ri]; r.VMap != nil || r.Verdict.Kind != firewall.VerdictJump || r.Verdict.Target != ch.Name {
				continue
			}
			for li := ri + 1; li < len(caller.Rules); li++ {
				r := &caller.Rules[li]
				if sourceDeny(t, r, m) {
					notes = append(notes, fmt.Sprintf("%s %s %s rule handle %d (%s) could deny sources after its jump to %s: the mark in %s lets them through",
						t.Family, t.Name, caller.Name, r.Handle, firewall.RenderRule(r), ch.Name, ch.Name))
				}
				if endsChain(r) {
					break
				}
			}
		}
	}
	return notes
}

// endsChain reports whether r ends its chain for every packet that reaches
// it: a verdict other than a jump or continue, on no condition.
func endsChain(r *firewall.Rule) bool {
	if len(r.Conds) != 0 || r.VMap != nil {
		return false
	}
	switch r.Verdict.Kind {
	case firewall.VerdictAccept, firewall.VerdictDrop, firewall.VerdictReject, firewall.VerdictReturn, firewall.VerdictGoto:
		return true
	}
	return false
}

// placementNote is what a mark's MarkedRule.Placement says: the notes of
// where it goes and, for a mark already there, whether it sits before the
// found firewall's last possible source deny (where an earlier version
// put it), letting the sources it denies through.
func placementNote(p placement, present uint64) string {
	notes := p.notes
	if present != 0 && p.from > 0 {
		for i := 0; i < p.from; i++ {
			if p.chain.Rules[i].Handle == present {
				notes = append(append([]string(nil), notes...), fmt.Sprintf("the mark (handle %d) is before the found firewall's possible source deny at handle %d of %s %s %s and lets the sources it denies through: close the owner's ports and open them again to move it after the deny",
					present, p.chain.Rules[p.from-1].Handle, p.table.Family, p.table.Name, p.chain.Name))
				break
			}
		}
	}
	return strings.Join(notes, "; ")
}
