// This file holds the model as people and comparisons read it: Render (an
// nft-like listing) and Fingerprint (a hash of the decoded ruleset).

package firewall

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Fingerprint is a sha256 over a canonical form of rs: tables, chains,
// policies, every rule's decoded conditions, verdict and comment in order,
// and set elements; handles are left out (and counters are never in the
// model). Two listings of an unchanged ruleset give the same value; a rule
// added, removed or changed by hand changes it, as far as the decoder sees
// the change (an undecoded part, such as a LOG prefix, is represented by
// its kind only).
func Fingerprint(rs *Ruleset) string {
	if rs == nil {
		rs = &Ruleset{}
	}
	c := Ruleset{Tables: make([]Table, len(rs.Tables))}
	for i, t := range rs.Tables {
		ct := t
		ct.Chains = make([]Chain, len(t.Chains))
		for j, ch := range t.Chains {
			cc := ch
			cc.Rules = make([]Rule, len(ch.Rules))
			for k, r := range ch.Rules {
				r.Handle = 0
				cc.Rules[k] = r
			}
			ct.Chains[j] = cc
		}
		sort.Slice(ct.Chains, func(a, b int) bool { return ct.Chains[a].Name < ct.Chains[b].Name })
		ct.Sets = make([]Set, len(t.Sets))
		for j, s := range t.Sets {
			cs := s
			cs.Elements = append([]SetElement(nil), s.Elements...)
			sort.Slice(cs.Elements, func(a, b int) bool {
				x, _ := json.Marshal(cs.Elements[a])
				y, _ := json.Marshal(cs.Elements[b])
				return string(x) < string(y)
			})
			ct.Sets[j] = cs
		}
		sort.Slice(ct.Sets, func(a, b int) bool { return ct.Sets[a].Name < ct.Sets[b].Name })
		c.Tables[i] = ct
	}
	sort.SliceStable(c.Tables, func(a, b int) bool {
		if c.Tables[a].Family != c.Tables[b].Family {
			return c.Tables[a].Family < c.Tables[b].Family
		}
		return c.Tables[a].Name < c.Tables[b].Name
	})
	b, err := json.Marshal(c)
	if err != nil {
		// The model holds only strings, numbers, slices and prefixes.
		panic(fmt.Sprintf("firewall: marshalling the ruleset model: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Render writes rs in an nft-like text: tables, chains with hook, priority
// and policy, each rule's decoded conditions, verdict, comment and handle,
// and what could not be decoded as a "# not decoded:" note. It is a record
// for people, not input for nft.
func Render(rs *Ruleset) string {
	var b strings.Builder
	for i, t := range rs.Tables {
		if i > 0 {
			b.WriteString("\n")
		}
		RenderTable(&b, &t, nil)
	}
	return b.String()
}

// renderTable writes t; keep, when set, selects the chains to write and,
// per chain, the index of the first rule to write.
func RenderTable(b *strings.Builder, t *Table, keep map[string]int) {
	fmt.Fprintf(b, "table %s %s {\n", t.Family, t.Name)
	for _, u := range t.Unknown {
		fmt.Fprintf(b, "\t# not listed: %s\n", u)
	}
	if keep == nil {
		for _, s := range t.Sets {
			fmt.Fprintf(b, "\tset %s { # %d elements", s.Name, len(s.Elements))
			if s.Anonymous {
				b.WriteString(", anonymous")
			}
			b.WriteString(" }\n")
		}
	}
	for _, ch := range t.Chains {
		from := 0
		if keep != nil {
			f, ok := keep[ch.Name]
			if !ok {
				continue
			}
			from = f
		}
		fmt.Fprintf(b, "\tchain %s {\n", ch.Name)
		if ch.Hook != "" {
			fmt.Fprintf(b, "\t\ttype %s hook %s priority %d; policy %s;\n", orFilter(ch.Type), ch.Hook, ch.Priority, ch.Policy)
		}
		if ch.Unknown != "" {
			fmt.Fprintf(b, "\t\t# not listed: %s\n", ch.Unknown)
		}
		if from > 0 {
			fmt.Fprintf(b, "\t\t# (%d rules before these are not part of this record)\n", from)
		}
		for _, r := range ch.Rules[min(from, len(ch.Rules)):] {
			fmt.Fprintf(b, "\t\t%s\n", RenderRule(&r))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
}

func orFilter(s string) string {
	if s == "" {
		return "filter"
	}
	return s
}

// RenderRule is rule r as Render prints it.
func RenderRule(r *Rule) string {
	var parts []string
	for _, c := range r.Conds {
		if c.Kind == CondUndecidable {
			continue // in r.Unknown
		}
		parts = append(parts, RenderCond(&c))
	}
	if r.VMap != nil {
		var es []string
		for _, e := range r.VMap {
			es = append(es, RenderCond(&e.Cond)+" : "+renderVerdict(e.Verdict))
		}
		parts = append(parts, "vmap { "+strings.Join(es, ", ")+" }")
	} else if r.Verdict.Kind != VerdictContinue {
		parts = append(parts, renderVerdict(r.Verdict))
	}
	if r.Comment != "" {
		parts = append(parts, fmt.Sprintf("comment %q", r.Comment))
	}
	parts = append(parts, fmt.Sprintf("# handle %d", r.Handle))
	if len(r.Unknown) > 0 {
		parts = append(parts, "# not decoded: "+strings.Join(r.Unknown, "; "))
	}
	return strings.Join(parts, " ")
}

func renderVerdict(v Verdict) string {
	if v.Kind == VerdictDNAT && v.NAT != nil {
		t := v.NAT
		to := ViaOf(t.Addr, t.PortMin)
		if t.PortMax != t.PortMin {
			to += fmt.Sprintf("-%d", t.PortMax)
		}
		switch {
		case t.Unknown != "":
			return "dnat # " + t.Unknown
		case t.Local:
			return "redirect to " + to
		}
		return "dnat to " + to
	}
	if v.Target != "" {
		return string(v.Kind) + " " + v.Target
	}
	return string(v.Kind)
}

// RenderCond is condition c as Render prints it.
func RenderCond(c *Cond) string {
	op := " "
	if c.Negate {
		op = " != "
	}
	list := func(xs []string) string {
		if len(xs) == 1 {
			return xs[0]
		}
		return "{ " + strings.Join(xs, ", ") + " }"
	}
	var xs []string
	switch c.Kind {
	case CondNFProto:
		return "meta nfproto" + op + c.Family
	case CondL4Proto:
		for _, p := range c.Protos {
			switch p {
			case unix.IPPROTO_TCP:
				xs = append(xs, "tcp")
			case unix.IPPROTO_UDP:
				xs = append(xs, "udp")
			default:
				xs = append(xs, fmt.Sprint(p))
			}
		}
		return "meta l4proto" + op + list(xs)
	case CondDport, CondSport, CondOrigDport:
		for _, p := range c.Ports {
			if p.From == p.To {
				xs = append(xs, fmt.Sprint(p.From))
			} else {
				xs = append(xs, fmt.Sprintf("%d-%d", p.From, p.To))
			}
		}
		if c.Kind == CondOrigDport {
			return "ct original proto-dst" + op + list(xs)
		}
		return "th " + string(c.Kind) + op + list(xs)
	case CondSaddr, CondDaddr, CondOrigDaddr:
		for _, p := range c.Prefixes {
			xs = append(xs, p.String())
		}
		return string(c.Kind) + op + list(xs)
	case CondIifname, CondOifname:
		for _, n := range c.Names {
			xs = append(xs, fmt.Sprintf("%q", n))
		}
		return string(c.Kind) + op + list(xs)
	case CondCtState:
		return fmt.Sprintf("ct state%s%#x", op, c.Bits)
	case CondCtStatus:
		return fmt.Sprintf("ct status%s%#x", op, c.Bits)
	case CondAddrType:
		return fmt.Sprintf("fib %s type%s%#x", c.Addr, op, c.Bits)
	case CondPktType:
		return fmt.Sprintf("meta pkttype%s%#x", op, c.Bits)
	case CondTCPFlags:
		eq := "=="
		if c.Negate {
			eq = "!="
		}
		return fmt.Sprintf("tcp flags & %#x %s %#x", c.Mask, eq, c.Value)
	case CondICMPType:
		for _, t := range c.Types {
			xs = append(xs, fmt.Sprint(t))
		}
		if len(xs) == 0 {
			xs = append(xs, "any")
		}
		return "icmp type" + op + list(xs)
	case CondHopLimit:
		return fmt.Sprintf("hoplimit mode %d%s%d", c.Mask, op, c.Value)
	case CondNever:
		return "# never: " + c.Reason
	}
	return "# " + string(c.Kind) + ": " + c.Reason
}
