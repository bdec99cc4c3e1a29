// This file holds the output chain's policy as the evaluator reads it:
// which rules (and policies) may drop a new packet the node sends out.

package eval

import (
	"fmt"

	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// OutputDrops lists, per family, what in rs may drop a new TCP, UDP or
// ICMP packet the node sends to an outside destination at the output hook:
// a base chain's policy drop, a drop or reject rule whose conditions a new
// packet may meet. Each is named "family table chain: policy drop" or
// "family table chain rule handle H: RULE". A rule the walk cannot pass
// (an accept or a jump out that surely holds) ends its chain, so rules
// behind an unconditional accept are not listed. Destination and interface
// conditions are taken as undecided (any destination, any uplink): empty
// means the node may send anything out, as with no output chain at all.
func OutputDrops(rs *firewall.Ruleset) map[string][]string {
	out := map[string][]string{}
	byName := func(t *firewall.Table, name string) *firewall.Chain {
		for ci := range t.Chains {
			if t.Chains[ci].Name == name {
				return &t.Chains[ci]
			}
		}
		return nil
	}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		seen := map[string]bool{}
		add := func(s string) {
			if !seen[s] {
				seen[s] = true
				out[fam] = append(out[fam], s)
			}
		}
		icmp := uint8(unix.IPPROTO_ICMP)
		if fam == firewall.FamilyIP6 {
			icmp = unix.IPPROTO_ICMPV6
		}
		for _, proto := range []uint8{unix.IPPROTO_TCP, unix.IPPROTO_UDP, icmp} {
			pkt := Packet{Hook: "output", Family: fam, Proto: proto, Port: 1, OrigPort: 1, Src: Atom{Other: true}, ICMPType: 8}
			if fam == firewall.FamilyIP6 {
				pkt.ICMPType = 128
			}
			for _, b := range BaseChains(rs, "output", fam, func(ch *firewall.Chain) bool { return firewall.IsFilter(ch) }) {
				name := fmt.Sprintf("%s %s %s", b.table.Family, b.table.Name, b.chain.Name)
				var walk func(ch *firewall.Chain, name string, depth int) bool
				// walk reports whether the chain may return (fall off its end).
				walk = func(ch *firewall.Chain, name string, depth int) bool {
					if ch == nil || depth > 32 {
						return true
					}
					if ch.Unknown != "" {
						add(fmt.Sprintf("%s: not listed (%s)", name, ch.Unknown))
						return true
					}
					for ri := range ch.Rules {
						r := &ch.Rules[ri]
						m := outputMatch(&pkt, r.Conds)
						if m == TriFalse {
							continue
						}
						v := r.Verdict
						if r.VMap != nil {
							v = firewall.Verdict{Kind: firewall.VerdictUnknown}
						}
						switch v.Kind {
						case firewall.VerdictDrop, firewall.VerdictReject, firewall.VerdictUnknown:
							add(fmt.Sprintf("%s rule handle %d: %s", name, r.Handle, firewall.RenderRule(r)))
						case firewall.VerdictJump, firewall.VerdictGoto:
							ret := walk(byName(b.table, v.Target), fmt.Sprintf("%s %s %s", b.table.Family, b.table.Name, v.Target), depth+1)
							if v.Kind == firewall.VerdictGoto && m == TriTrue {
								return ret
							}
							continue
						case firewall.VerdictContinue:
							continue
						}
						if m == TriTrue && v.Kind != firewall.VerdictContinue {
							return v.Kind == firewall.VerdictReturn
						}
					}
					return true
				}
				if walk(b.chain, name, 0) && b.chain.Policy == "drop" {
					add(name + ": policy drop")
				}
			}
		}
	}
	return out
}

// outputMatch decides a rule's conditions for a new packet the node sends:
// interface and destination conditions are undecided.
func outputMatch(pkt *Packet, conds []firewall.Cond) Tri {
	m := TriTrue
	for i := range conds {
		c := &conds[i]
		t := TriUnknown
		switch c.Kind {
		case firewall.CondIifname, firewall.CondOifname, firewall.CondDaddr, firewall.CondOrigDaddr, firewall.CondAddrType, firewall.CondSaddr:
		default:
			t = pkt.Cond(c)
		}
		if t == TriFalse {
			return TriFalse
		}
		if t == TriUnknown {
			m = TriUnknown
		}
	}
	return m
}

// OutputAsInput is the output hook's filter chains of rs seen as an input
// hook, so that the questions asked of clients (SourcesAt, Widened,
// CompareClasses) ask what the node may send: destination conditions
// become source ones (and back), output interfaces input ones, and every
// other base chain (input, forward, prerouting, nat) is left out, and so
// is every regular chain those output chains cannot reach (it could not
// change an answer, and its conditions would only cut more regions to the
// same end). A "source" region of the answer is a region of destinations;
// a port is the destination port the node sends to.
func OutputAsInput(rs *firewall.Ruleset) *firewall.Ruleset {
	out := &firewall.Ruleset{}
	for _, t := range rs.Tables {
		nt := t
		nt.Chains = nil
		reach := outputReach(&t)
		for _, ch := range t.Chains {
			if !reach[ch.Name] {
				continue
			}
			if ch.Hook != "" {
				ch.Hook = firewall.HookInput
			}
			rules := make([]firewall.Rule, len(ch.Rules))
			for i, r := range ch.Rules {
				conds := make([]firewall.Cond, len(r.Conds))
				for k, c := range r.Conds {
					switch c.Kind {
					case firewall.CondDaddr:
						c.Kind = firewall.CondSaddr
					case firewall.CondSaddr:
						c.Kind = firewall.CondDaddr
					case firewall.CondOifname:
						c.Kind = firewall.CondIifname
					case firewall.CondIifname:
						c.Kind = firewall.CondOifname
					case firewall.CondAddrType:
						switch c.Addr {
						case "daddr":
							c.Addr = "saddr"
						case "saddr":
							c.Addr = "daddr"
						}
					}
					conds[k] = c
				}
				r.Conds = conds
				rules[i] = r
			}
			ch.Rules = rules
			nt.Chains = append(nt.Chains, ch)
		}
		out.Tables = append(out.Tables, nt)
	}
	return out
}

// outputReach names the chains of t an output filter base chain of t may
// run: the base chains, and the chains their rules (and verdict maps) jump
// or go to, transitively.
func outputReach(t *firewall.Table) map[string]bool {
	reach := map[string]bool{}
	var todo []string
	visit := func(name string) {
		if !reach[name] {
			reach[name] = true
			todo = append(todo, name)
		}
	}
	for ci := range t.Chains {
		if ch := &t.Chains[ci]; ch.Hook == "output" && firewall.IsFilter(ch) {
			visit(ch.Name)
		}
	}
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for ci := range t.Chains {
			ch := &t.Chains[ci]
			if ch.Name != name {
				continue
			}
			for ri := range ch.Rules {
				r := &ch.Rules[ri]
				if isJump(r.Verdict.Kind) {
					visit(r.Verdict.Target)
				}
				for k := range r.VMap {
					if isJump(r.VMap[k].Verdict.Kind) {
						visit(r.VMap[k].Verdict.Target)
					}
				}
			}
		}
	}
	return reach
}
