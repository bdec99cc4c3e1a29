// This file holds what the boot file carries over from the found one: a
// native predecessor's /etc/nftables.conf may declare tables the flip keeps
// (a nat table, a table with both filter and nat chains whose filter base
// chains the commit deletes). The boot file must load them too, or the
// node boots without them.

package flip

import (
	"fmt"
	"strings"

	"adoption/firewall"
)

// confItem is one top-level statement of an nft file.
type confItem struct {
	text string // as written, comments included
	line int    // where it starts (1-based)
	head []string
}

// confItems splits an nft file into its top-level statements: a statement
// ends at a newline or ';' outside braces, strings and comments.
func confItems(src string) ([]confItem, error) {
	var items []confItem
	depth, start, line, startLine := 0, 0, 1, 1
	inStr, inComment := false, false
	flush := func(end int) {
		text := src[start:end]
		if f := strings.Fields(stripComments(text)); len(f) > 0 {
			items = append(items, confItem{text: strings.TrimSpace(text), line: startLine, head: f})
		}
		start, startLine = end+1, line
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			inComment = false
			if depth == 0 && !inStr {
				flush(i)
			}
			line++
			if depth == 0 {
				startLine = line
			}
		case inComment:
		case inStr:
			if c == '"' {
				inStr = false
			}
		case c == '#':
			inComment = true
		case c == '"':
			inStr = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("line %d: a '}' closes nothing", line)
			}
		case c == ';' && depth == 0:
			flush(i)
		}
	}
	if depth != 0 || inStr {
		return nil, fmt.Errorf("the file ends inside a block or a string")
	}
	flush(len(src))
	return items, nil
}

// stripComments drops # comments (outside strings) from s.
func stripComments(s string) string {
	var b strings.Builder
	inStr, inComment := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\n':
			inComment = false
		case inComment:
			continue
		case c == '"':
			inStr = !inStr
		case c == '#' && !inStr:
			inComment = true
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// tableOf reads "table [family] name {" from a statement's words.
func tableOf(head []string) (family, name string, ok bool) {
	if len(head) < 2 || head[0] != "table" {
		return "", "", false
	}
	w := strings.TrimSuffix(head[1], "{")
	switch w {
	case "ip", "ip6", "inet", "arp", "bridge", "netdev":
		if len(head) < 3 {
			return "", "", false
		}
		return w, strings.TrimSuffix(head[2], "{"), true
	}
	return "ip", w, true
}

// withoutChains is a table block with the named chains' blocks taken out.
func withoutChains(block string, drop map[string]bool) string {
	if len(drop) == 0 {
		return block
	}
	open := strings.IndexByte(block, '{')
	if open < 0 {
		return block
	}
	body := block[open+1 : strings.LastIndexByte(block, '}')]
	items, err := confItems(body)
	if err != nil {
		return block
	}
	var b strings.Builder
	b.WriteString(block[:open+1] + "\n")
	for _, it := range items {
		if len(it.head) >= 2 && it.head[0] == "chain" && drop[strings.TrimSuffix(it.head[1], "{")] {
			continue
		}
		b.WriteString("\t" + it.text + "\n")
	}
	b.WriteString("}")
	return b.String()
}

// iptablesNames are the tables iptables-nft shares with a native file of
// the same name: Docker's rules live there, so the boot file never deletes
// them.
var iptablesNames = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true}

// keptFromBootFile is what the boot file takes over from the found boot file found
// for the flip of p: its defines and every table the flip keeps (not the
// mesh's, not one the commit deletes whole), without the filter base
// chains the commit deletes. A table that iptables-nft may share (ip nat,
// ...) is declared as written; any other is declared, deleted and declared
// again, so a reload replaces it alone. notes names what is not carried.
func keptFromBootFile(found string, p *RevertPlan, inForce *firewall.Ruleset) (text string, notes []string, err error) {
	if strings.TrimSpace(found) == "" {
		return "", nil, nil
	}
	items, err := confItems(found)
	if err != nil {
		return "", nil, fmt.Errorf("the found %s cannot be read: %w", "/etc/nftables.conf", err)
	}
	whole := map[TableRef]bool{}
	chains := map[TableRef]map[string]bool{}
	for _, d := range p.Dormant {
		ref := TableRef{Family: d.Family, Name: d.Table}
		if d.Chain == "" {
			whole[ref] = true
			continue
		}
		if chains[ref] == nil {
			chains[ref] = map[string]bool{}
		}
		chains[ref][d.Chain] = true
	}
	var defines, tables strings.Builder
	for _, it := range items {
		switch it.head[0] {
		case "define", "redefine", "undefine":
			defines.WriteString(it.text + "\n")
			continue
		case "include":
			return "", nil, fmt.Errorf("the found /etc/nftables.conf includes other files (line %d: %s): the commit cannot tell which tables they declare; "+
				"put the tables the node keeps (not its filter tables) into /etc/nftables.conf itself, then commit again", it.line, it.text)
		case "flush":
			if len(it.head) >= 2 && it.head[1] == "ruleset" {
				continue // the boot file never flushes what Docker owns
			}
		}
		fam, name, ok := tableOf(it.head)
		if !ok || !strings.Contains(it.text, "{") {
			notes = append(notes, fmt.Sprintf("line %d of the found /etc/nftables.conf is not carried: %s", it.line, firstLine(it.text)))
			continue
		}
		ref := TableRef{Family: fam, Name: name}
		if whole[ref] || (fam == firewall.FamilyInet && name == firewall.MeshTable) {
			continue
		}
		if inForce != nil && !hasTable(inForce, ref) {
			notes = append(notes, fmt.Sprintf("table %s %s of the found /etc/nftables.conf is not carried: it was not in force, so the flip kept nothing of it", fam, name))
			continue
		}
		block := withoutChains(it.text, chains[ref])
		if !strings.HasPrefix(block, "table "+fam+" ") {
			block = "table " + fam + " " + strings.TrimPrefix(block, "table ")
		}
		fmt.Fprintf(&tables, "\n# Kept by the flip, carried from the found /etc/nftables.conf.\n")
		if !iptablesNames[name] || !firewall.IsIPFamily(fam) || fam == firewall.FamilyInet {
			fmt.Fprintf(&tables, "table %s %s {}\ndelete table %s %s\n", fam, name, fam, name)
		}
		tables.WriteString(block + "\n")
	}
	if tables.Len() == 0 {
		return "", notes, nil
	}
	return defines.String() + tables.String(), notes, nil
}

func hasTable(rs *firewall.Ruleset, ref TableRef) bool {
	for i := range rs.Tables {
		if rs.Tables[i].Family == ref.Family && rs.Tables[i].Name == ref.Name {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Unbooted names what of rs (listed after the flip) the flip keeps in
// force and the boot would not load once the commit is done: the
// predecessor's native tables that the commit does not delete whole, which
// found (the boot file found) does not declare (a boot file written from
// found would leave them out); and, as rules (rendered with their table,
// chain and handle), the predecessor's rules in the tables iptables-nft
// shares with Docker (ip and ip6 nat, raw, mangle, security: the *nat and
// *raw sections of ufw's before.rules, a rules file's), which ufw or
// netfilter-persistent loaded at boot and the commit switches off, unless
// found declares their table. Docker's rules there, and every foreign
// tool's, are recreated by their tool when it starts; the predecessor's
// rules of the filter table go dormant and are deleted at the commit; a
// rule that only counts or logs decides nothing and is not named. What the
// commit would refuse to carry from found (an include) is refused here. on
// tells Docker's bridge rules (nil: by Docker's default names).
func Unbooted(rs *firewall.Ruleset, found string, p *RevertPlan, on *firewall.Node) ([]TableRef, []string, error) {
	if _, _, err := keptFromBootFile(found, p, rs); err != nil {
		return nil, nil, err
	}
	declared := map[TableRef]bool{}
	if strings.TrimSpace(found) != "" {
		items, err := confItems(found)
		if err != nil {
			return nil, nil, fmt.Errorf("the found /etc/nftables.conf cannot be read: %w", err)
		}
		for _, it := range items {
			if fam, name, ok := tableOf(it.head); ok {
				declared[TableRef{Family: fam, Name: name}] = true
			}
		}
	}
	whole := map[TableRef]bool{}
	for _, d := range p.Dormant {
		if d.Chain == "" {
			whole[TableRef{Family: d.Family, Name: d.Table}] = true
		}
	}
	var tables []TableRef
	var rules []string
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		ref := TableRef{Family: t.Family, Name: t.Name}
		if declared[ref] {
			continue
		}
		switch o := firewall.TableOwner(t).Owner; {
		case o == firewall.OwnedByPredecessor && !whole[ref]:
			tables = append(tables, ref)
		case o == firewall.OwnedShared && t.Name != "filter":
			rules = append(rules, sharedUnbooted(t, on)...)
		}
	}
	return tables, rules, nil
}

// sharedUnbooted renders the predecessor's rules of iptables-nft table t
// that decide or change a packet: nothing loads them at boot after the
// commit.
func sharedUnbooted(t *firewall.Table, on *firewall.Node) []string {
	var out []string
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		for ri := range ch.Rules {
			r := &ch.Rules[ri]
			if firewall.RuleOwner(on, t, ch, r).Owner != firewall.OwnedByPredecessor {
				continue
			}
			if r.Verdict.Kind == firewall.VerdictContinue && r.VMap == nil && len(r.Writes) == 0 {
				continue // a counter or a log
			}
			out = append(out, fmt.Sprintf("table %s %s chain %s: %s", t.Family, t.Name, ch.Name, firewall.RenderRule(r)))
		}
	}
	return out
}
