// This file decides which base chains the evaluator does not run (every
// chain of a bridge, arp or netdev table; an ingress or egress hook in any
// family) and whether such a chain only lets packets pass: one that can
// drop, reject, queue or write is refused by name, one that only accepts,
// continues, counts or logs changes nothing the evaluator decides.

package nft

import (
	"fmt"
	"strings"

	"adoption/firewall"
)

// evaluated reports whether the evaluator runs base chain c of table t:
// the IP families' hooks, not the bridge, arp and netdev families nor the
// hooks on a device (ingress, egress).
func evaluated(t *firewall.Table, c *firewall.Chain) bool {
	return firewall.IsIPFamily(t.Family) && c.Hook != "ingress" && c.Hook != "egress"
}

// passage names what chain c of table t, or a chain it jumps or goes to
// (seen: the chains already read), can do to a packet beyond letting it
// pass ("its policy is drop", "rule handle 4 drops", "rule handle 6 writes
// (meta mark set)"), or "" when it only accepts, continues, returns, counts
// or logs.
func passage(t *firewall.Table, c *firewall.Chain, seen map[string]bool) string {
	if seen[c.Name] {
		return ""
	}
	seen[c.Name] = true
	if c.Unknown != "" {
		return "its rules could not be listed (" + c.Unknown + ")"
	}
	if c.Policy == "drop" {
		return "its policy is drop"
	}
	for i := range c.Rules {
		r := &c.Rules[i]
		if len(r.Writes) > 0 {
			return fmt.Sprintf("rule handle %d writes (%s)", r.Handle, strings.Join(r.Writes, ", "))
		}
		vs := []firewall.Verdict{r.Verdict}
		if r.VMap != nil {
			vs = vs[:0]
			for _, e := range r.VMap {
				vs = append(vs, e.Verdict)
			}
		}
		for _, v := range vs {
			switch v.Kind {
			case firewall.VerdictAccept, firewall.VerdictContinue, firewall.VerdictReturn:
			case firewall.VerdictJump, firewall.VerdictGoto:
				next := chainNamed(t, v.Target)
				if next == nil {
					return fmt.Sprintf("rule handle %d goes to chain %s, which was not listed", r.Handle, v.Target)
				}
				if why := passage(t, next, seen); why != "" {
					return why
				}
			case firewall.VerdictDrop:
				return fmt.Sprintf("rule handle %d drops", r.Handle)
			case firewall.VerdictReject:
				return fmt.Sprintf("rule handle %d rejects", r.Handle)
			case firewall.VerdictDNAT:
				return fmt.Sprintf("rule handle %d translates the destination", r.Handle)
			default:
				return fmt.Sprintf("rule handle %d ends in %s, whose outcome is not known", r.Handle, v.Target)
			}
		}
	}
	return ""
}

func chainNamed(t *firewall.Table, name string) *firewall.Chain {
	for i := range t.Chains {
		if t.Chains[i].Name == name {
			return &t.Chains[i]
		}
	}
	return nil
}

// unevaluatedRefusal is the refusal of base chain c of table t, or "": a
// chain the evaluator does not run that can do more than let packets pass.
func unevaluatedRefusal(t *firewall.Table, c *firewall.Chain) string {
	if c.Hook == "" || evaluated(t, c) {
		return ""
	}
	why := passage(t, c, map[string]bool{})
	if why == "" {
		return ""
	}
	var where, fix string
	switch {
	case t.Family == "bridge":
		where = "a bridge table filters frames crossing a bridge (container to container, container to the node) " +
			"before or beside the IP hooks the product evaluates, so what it drops would read as open"
	case t.Family == "arp":
		where = "an arp table filters ARP, which the product does not evaluate, so an address it cuts off " +
			"would read as reachable"
	case c.Hook == "egress":
		where = "an egress chain filters packets leaving a device after the IP hooks the product evaluates, " +
			"so a drop there would read as an open port"
	case t.Family == "netdev":
		where = "a netdev table filters packets on a device before (or after) the IP hooks the product evaluates, " +
			"so a drop there would read as an open port"
	default:
		where = "an ingress chain filters packets before the IP hooks the product evaluates, " +
			"so a drop there would read as an open port"
	}
	if firewall.IsIPFamily(t.Family) {
		fix = fmt.Sprintf("move its rules into the table's input or forward chain, or delete the chain: nft delete chain %s %s %s", t.Family, t.Name, c.Name)
	} else {
		fix = fmt.Sprintf("move the rules into an ip, ip6 or inet table's input or forward chain, or delete the table: nft delete table %s %s", t.Family, t.Name)
	}
	return fmt.Sprintf("found table %s %s, chain %s hooked at %s: %s; %s; this firewall is not supported "+
		"(%s; a table there that only accepts, counts or logs is taken)", t.Family, t.Name, c.Name, c.Hook, why, where, fix)
}
