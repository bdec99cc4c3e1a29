// This file names the rules of the found firewall that decide a packet's
// fate through a part the evaluator could not decode (an expression
// google/nftables drops, an unknown xtables match, a rate limit), and
// refuses a preview whose fates they leave in doubt. It reads the listed
// ruleset only.

package unknowns

import (
	"fmt"
	"strings"

	"adoption/firewall"
	"adoption/firewall/flip"
)

// Undecoded lists every rule of rs outside the mesh's own table whose
// verdict ends or redirects evaluation (not a counter or a log) and that
// holds a condition the evaluator cannot decide, or whose verdict it cannot
// know, in listing order.
func Undecoded(rs *firewall.Ruleset) []flip.Undecoded {
	if rs == nil {
		return nil
	}
	var out []flip.Undecoded
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if firewall.TableOwner(t).Owner == firewall.OwnedByMesh {
			continue
		}
		for _, ch := range t.Chains {
			if silent(t, ch.Name, map[string]bool{}) {
				continue // whatever its rules do, it returns with nothing decided
			}
			for _, r := range ch.Rules {
				if what := undecodedPart(t, r); what != "" {
					out = append(out, flip.Undecoded{Family: t.Family, Table: t.Name, Chain: ch.Name, Handle: r.Handle,
						Verdict: verdictText(r), What: what})
				}
			}
		}
	}
	return out
}

// undecodedPart says what in r (of table t) the evaluator could not
// decode, when r decides anything; "" otherwise.
func undecodedPart(t *firewall.Table, r firewall.Rule) string {
	if len(r.VMap) == 0 && r.Verdict.Kind == firewall.VerdictContinue {
		return "" // a counter, a log: it decides nothing
	}
	if len(r.VMap) == 0 && r.Verdict.Kind == firewall.VerdictJump && silent(t, r.Verdict.Target, map[string]bool{}) {
		return "" // ufw's rate-limited jump to its logging chain: back where it was, whatever the limit says
	}
	var parts []string
	for _, c := range r.Conds {
		if c.Kind == firewall.CondUndecidable {
			parts = append(parts, c.Reason)
		}
	}
	for _, e := range r.VMap {
		if e.Cond.Kind == firewall.CondUndecidable {
			parts = append(parts, e.Cond.Reason)
		}
	}
	if len(r.VMap) == 0 && r.Verdict.Kind == firewall.VerdictUnknown {
		parts = append(parts, "verdict "+firstOf(r.Verdict.Target, "unknown")+" (its outcome cannot be known)")
	}
	return strings.Join(parts, "; ")
}

// silent reports whether a packet that jumps to chain name of t comes back
// with nothing decided: each of its rules only counts or logs, returns, or
// jumps to a chain that is silent too. An unknown or missing chain is not.
func silent(t *firewall.Table, name string, seen map[string]bool) bool {
	if seen[name] {
		return true // a loop decides nothing more than its way round
	}
	seen[name] = true
	for _, ch := range t.Chains {
		if ch.Name != name {
			continue
		}
		if ch.Unknown != "" || ch.Hook != "" {
			return false
		}
		for _, r := range ch.Rules {
			switch {
			case len(r.VMap) > 0:
				return false
			case r.Verdict.Kind == firewall.VerdictContinue, r.Verdict.Kind == firewall.VerdictReturn:
			case r.Verdict.Kind == firewall.VerdictJump && silent(t, r.Verdict.Target, seen):
			default:
				return false
			}
		}
		return true
	}
	return false
}

func verdictText(r firewall.Rule) string {
	if len(r.VMap) > 0 {
		return "verdict map"
	}
	if r.Verdict.Target != "" {
		return string(r.Verdict.Kind) + " " + r.Verdict.Target
	}
	return string(r.Verdict.Kind)
}

func firstOf(s, or string) string {
	if s != "" {
		return s
	}
	return or
}

// undecodedRefusals names, on a preview whose fates the evaluator could
// not decide (an opening uncertain now, a fate widening or uncertain not
// declared), each undecoded rule as a reason to refuse: the operator sees
// the chain, the rule's handle and the part not decoded, never an
// approval by default.
func undecodedRefusals(pv *flip.Preview) []string {
	if len(pv.Undecoded) == 0 {
		return nil
	}
	inDoubt := ""
	for _, f := range pv.Fates {
		switch {
		case f.Dropped:
		case f.Opening.Uncertain, f.Fate == flip.FateUncertain, f.Fate == flip.FateWidening && !f.Declared:
			if inDoubt == "" {
				inDoubt = openingText(f.Opening)
			}
		}
	}
	if inDoubt == "" {
		return nil
	}
	var out []string
	for _, u := range pv.Undecoded {
		out = append(out, fmt.Sprintf("not decoded: %s; the fate of %s and any port it decides cannot be promised: rewrite or remove the rule (or drop the ports it decides in flip.drop), then preview again", u.Text(), inDoubt))
	}
	return out
}
