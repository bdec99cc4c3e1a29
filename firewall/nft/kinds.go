// This file decides the kind of the found firewall: the kinds the product
// speaks (ufw with or without ufw-docker and plain rules, both through
// iptables-nft; native nftables; none), each recognised by its structure,
// and everything else refused by name: iptables-legacy, a table or hook
// the evaluator does not run that can drop or write (passage.go), and the
// managers that rewrite their own rules (firewalld, Shorewall, CSF and the
// others below).

package nft

import (
	"fmt"
	"sort"
	"strings"

	"adoption/firewall"
)

// Kinds of found firewall.
const (
	KindIptablesNft = "iptables-nft"
	KindNftables    = "nftables"
	KindNone        = "none"
)

// managers are firewall managers the product does not speak, recognised by
// the chains (chain) or tables (table) they write, exactly or by prefix.
// Each rewrites its rules on its own reload, so marks put through its
// firewall would vanish and a flip would be undone.
var managers = []struct {
	tool          string
	chain, prefix []string // chain names: exact, and prefixes
	table         []string // table name prefixes (native nftables)
}{
	{tool: "firewalld", chain: []string{"INPUT_direct", "INPUT_ZONES", "FORWARD_direct", "FORWARD_IN_ZONES"}, table: []string{"firewalld"}},
	{tool: "Shorewall", chain: []string{"shorewall", "net2fw", "fw2net", "net-fw", "fw-net", "smurfs"}, table: []string{"shorewall"}},
	{tool: "CSF (ConfigServer Security & Firewall)", chain: []string{"LOCALINPUT", "LOCALOUTPUT", "ALLOWIN", "DENYIN", "LOGDROPIN", "GDENYIN"}},
	{tool: "APF (Advanced Policy Firewall)", chain: []string{"TALLOW", "TDENY", "TGALLOW", "TGDENY"}},
	{tool: "the NixOS firewall", prefix: []string{"nixos-fw"}, table: []string{"nixos-fw"}},
	{tool: "the Proxmox VE firewall", prefix: []string{"PVEFW-"}, table: []string{"proxmox-firewall"}},
	{tool: "OpenWrt's firewall", chain: []string{"delegate_input", "delegate_forward"}, table: []string{"fw4"}},
}

// Manager names the firewall manager the product does not speak that wrote
// chain (in table t), or "".
func Manager(t *firewall.Table, chain string) string {
	for _, m := range managers {
		for _, p := range m.table {
			if t.Name == p || strings.HasPrefix(t.Name, p+"_") || strings.HasPrefix(t.Name, p+"-") {
				return m.tool
			}
		}
		for _, c := range m.chain {
			if chain == c {
				return m.tool
			}
		}
		for _, p := range m.prefix {
			if strings.HasPrefix(chain, p) {
				return m.tool
			}
		}
	}
	return ""
}

// Kind says which kind of firewall the ruleset is: iptables-nft (tables that
// iptables-nft made, as ufw writes them), nftables (a native table filters at
// input or forward) or none. legacyTables are the names the caller read from
// /proc/net/ip_tables_names (and ip6_tables_names) inside the namespace: any
// means iptables-legacy holds rules nftables cannot see, and Kind refuses.
// Anything else the product does not speak (Unspoken) is refused too,
// naming the table, the chain and the reason. Kind only reads; the errors
// say so.
func Kind(rs *firewall.Ruleset, legacyTables []string) (string, error) {
	if len(legacyTables) > 0 {
		names := append([]string(nil), legacyTables...)
		sort.Strings(names)
		return "", fmt.Errorf("found iptables-legacy tables (%s) in /proc/net/ip_tables_names: rules loaded through the legacy "+
			"x_tables interface are invisible to nftables, so this firewall is not supported; nothing was changed "+
			"(convert it with iptables-legacy-save | iptables-nft-restore, or flush the legacy tables)", strings.Join(names, ", "))
	}
	if why := Unspoken(rs); why != "" {
		return "", fmt.Errorf("%s; nothing was changed", why)
	}
	ipt, ufw, native := false, false, false
	for i := range rs.Tables {
		t := &rs.Tables[i]
		if !firewall.IsIPFamily(t.Family) {
			continue
		}
		filters := false
		for _, c := range t.Chains {
			if firewall.IsUfwChain(c.Name) {
				ufw = true
			}
			if (c.Hook == firewall.HookInput || c.Hook == firewall.HookForward) && (c.Type == "" || c.Type == "filter") {
				filters = true
			}
		}
		if !filters {
			continue
		}
		if firewall.IsIptablesTable(t) {
			ipt = true
		} else {
			native = true
		}
	}
	switch {
	case ufw, ipt && !native:
		return KindIptablesNft, nil
	case native:
		return KindNftables, nil
	}
	return KindNone, nil
}

// Unspoken names the first part of the ruleset the product does not speak,
// or "": a chain the evaluator does not run (passage.go) that can do more
// than pass packets on, or a chain or table a firewall manager the product
// does not speak wrote. The mesh's own table is never one.
func Unspoken(rs *firewall.Ruleset) string {
	for i := range rs.Tables {
		t := &rs.Tables[i]
		if t.Family == firewall.FamilyInet && t.Name == firewall.MeshTable {
			continue
		}
		for j := range t.Chains {
			c := &t.Chains[j]
			if why := unevaluatedRefusal(t, c); why != "" {
				return why
			}
			if tool := Manager(t, c.Name); tool != "" {
				return fmt.Sprintf("found table %s %s, chain %s, written by %s: a firewall managed by %s is not supported "+
					"(it rewrites its rules on every reload, so the mesh's marks and flip would be undone); "+
					"the product speaks ufw, plain iptables-nft rules and native nftables",
					t.Family, t.Name, c.Name, tool, tool)
			}
		}
		if tool := Manager(t, ""); tool != "" {
			return fmt.Sprintf("found table %s %s, written by %s: a firewall managed by %s is not supported "+
				"(it rewrites its rules on every reload, so the mesh's marks and flip would be undone); "+
				"the product speaks ufw, plain iptables-nft rules and native nftables", t.Family, t.Name, tool, tool)
		}
	}
	return ""
}
