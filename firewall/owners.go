// This file holds the one ownership model of the node's ruleset: which
// tables, chains and rules are the predecessor's (the found firewall that
// filters), which belong to foreign tools that must be left alone, and
// which are the mesh's. Marking, previewing, flipping, committing, drift and
// the probe report all ask it, so they never disagree.

package firewall

import (
	"net/netip"
	"strings"
)

// Owner is who a table, chain or rule belongs to.
type Owner string

// Owners.
const (
	// OwnedByPredecessor: the found firewall that filters (ufw's chains,
	// a native table of its own, plain iptables rules).
	OwnedByPredecessor Owner = "predecessor"
	// OwnedByForeign: a tool beside the firewall whose rules must be left
	// alone and outlive the flip (Docker, fail2ban, crowdsec, libvirt,
	// Tailscale, kube-proxy, podman).
	OwnedByForeign Owner = "foreign"
	// OwnedByMesh: marked rules and, after a flip, table inet adoption.
	OwnedByMesh Owner = "mesh"
	// OwnedShared: an iptables-nft table or base chain that holds several
	// owners' rules (filter INPUT/FORWARD, nat PREROUTING); its rules are
	// owned one by one.
	OwnedShared Owner = "shared"
)

// Ownership says who owns something and, for a foreign tool, which.
type Ownership struct {
	Owner Owner  `json:"owner"`
	Tool  string `json:"tool,omitempty"`
}

// Text is how an owner is written for people: "predecessor", "foreign
// (docker)", "mesh", "shared". The probe's output and the briefing both
// print it, so they say the same. (Not String: TableSummary and
// ChainSummary embed Ownership, and fmt would then print them as their
// owner alone.)
func (o Ownership) Text() string {
	if o.Tool != "" {
		return string(o.Owner) + " (" + o.Tool + ")"
	}
	return string(o.Owner)
}

// foreignChainPrefixes are the chain name prefixes of foreign tools.
var foreignChainPrefixes = []struct{ prefix, tool string }{
	{"DOCKER", "docker"},
	{"f2b-", "fail2ban"},
	{"crowdsec", "crowdsec"},
	{"CROWDSEC", "crowdsec"},
	{"LIBVIRT_", "libvirt"},
	{"ts-", "tailscale"},
	{"KUBE-", "kube-proxy"},
	{"NETAVARK", "podman"},
	{"CNI-", "podman"},
}

// foreignTablePrefixes are the table name prefixes of foreign tools'
// native tables.
var foreignTablePrefixes = []struct{ prefix, tool string }{
	{"docker", "docker"},
	{"kube-", "kube-proxy"},
	{"kube-proxy", "kube-proxy"},
	{"tailscale", "tailscale"},
	{"crowdsec", "crowdsec"},
	{"f2b-", "fail2ban"},
	{"fail2ban", "fail2ban"},
	{"libvirt", "libvirt"},
	{"netavark", "podman"},
	{"podman", "podman"},
}

// ChainTool names the foreign tool that owns a chain called name, or "".
func ChainTool(name string) string {
	for _, p := range foreignChainPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.tool
		}
	}
	return ""
}

// TableTool names the foreign tool that owns table t, or "".
func TableTool(t *Table) string {
	for _, p := range foreignTablePrefixes {
		if strings.HasPrefix(t.Name, p.prefix) {
			return p.tool
		}
	}
	return ""
}

func isMeshTable(t *Table) bool { return t.Family == FamilyInet && t.Name == MeshTable }

// IsUfwChain reports whether a chain called name is one of ufw's own.
func IsUfwChain(name string) bool {
	return strings.HasPrefix(name, "ufw-") || strings.HasPrefix(name, "ufw6-")
}

// ForeignRule reports whether a rule in a shared base chain of t belongs
// to a tool that must be left alone: a jump to its chains, Docker's direct
// rules on its bridges, or Docker's hairpin masquerades. Which interfaces
// are Docker's bridges is node's answer (Node.BridgeTool: the engine's
// bridges, custom-named ones included); a nil node, or one whose engine
// and links are unknown, answers by Docker's default names.
func ForeignRule(node *Node, t *Table, r *Rule) bool {
	if (r.Verdict.Kind == VerdictJump || r.Verdict.Kind == VerdictGoto) && ChainTool(r.Verdict.Target) != "" {
		return true
	}
	return bridgeRule(node, r) || dockerHairpin(node, t, r)
}

// bridgeRule reports whether r names interfaces, and only Docker's bridges
// ("-s 172.17.0.0/16 ! -o docker0 -j MASQUERADE", "-i docker0 -j ACCEPT").
func bridgeRule(node *Node, r *Rule) bool {
	bridge := false
	for _, c := range r.Conds {
		if c.Kind != CondIifname && c.Kind != CondOifname {
			continue
		}
		for _, n := range c.Names {
			if !strings.HasPrefix(node.BridgeTool(n), "docker") {
				return false
			}
		}
		bridge = true
	}
	return bridge
}

// dockerUserChain is the chain Docker creates for the operator's own
// rules on the forward path, jumped to from FORWARD before Docker's own.
const DockerUserChain = "DOCKER-USER"

// dockerUserPredecessorRule reports whether rule r of DOCKER-USER is the
// found firewall's. Docker creates the chain holding one unconditional
// return and never writes to it again; every other rule there was put by
// the operator (the ufw-docker arrangement's jumps into ufw's routed
// rules, a blocklist), so it is the predecessor's: the flip takes it out
// of force and the commit deletes it. The chain itself stays Docker's.
func DockerUserPredecessorRule(r *Rule) bool {
	return !(r.Verdict.Kind == VerdictReturn && len(r.Conds) == 0 && r.VMap == nil)
}

// dockerHairpin reports whether r is the masquerade Docker writes in the
// nat table for each published port, so that a container reaching its own
// published port through the host gets the replies back: "-s C/32 -d C/32
// -p tcp --dport P -j MASQUERADE", C the container's address. It names no
// interface, so it is told by its addresses: one address as both source
// and destination, inside a network Docker masquerades in the same table
// (a bridge rule's source) or the address one of Docker's chains DNATs
// to. Recreating a container rewrites it with the new address: it is
// Docker's churn, not the found firewall's.
func dockerHairpin(node *Node, t *Table, r *Rule) bool {
	if !IsIptablesTable(t) || t.Name != "nat" || r.Verdict.Kind != VerdictAccept || r.VMap != nil {
		return false // MASQUERADE decodes as accept
	}
	var src, dst netip.Addr
	for _, c := range r.Conds {
		switch c.Kind {
		case CondSaddr, CondDaddr:
			if c.Negate || len(c.Prefixes) != 1 || !c.Prefixes[0].IsSingleIP() {
				return false
			}
			if c.Kind == CondSaddr {
				src = c.Prefixes[0].Addr()
			} else {
				dst = c.Prefixes[0].Addr()
			}
		case CondNFProto, CondL4Proto, CondDport:
		default:
			return false
		}
	}
	return src.IsValid() && src == dst && dockerAddr(node, t, src)
}

// dockerAddr reports whether a is in a network Docker masquerades in t or
// is where one of Docker's chains in t DNATs to.
func dockerAddr(node *Node, t *Table, a netip.Addr) bool {
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		docker := ChainTool(ch.Name) == "docker"
		for ri := range ch.Rules {
			r := &ch.Rules[ri]
			if docker && r.Verdict.NAT != nil && r.Verdict.NAT.Addr == a {
				return true
			}
			if ch.Hook == "" || !bridgeRule(node, r) {
				continue
			}
			for _, c := range r.Conds {
				if c.Kind != CondSaddr || c.Negate {
					continue
				}
				for _, p := range c.Prefixes {
					if p.Contains(a) {
						return true
					}
				}
			}
		}
	}
	return false
}

// TableOwner says who owns table t.
func TableOwner(t *Table) Ownership {
	switch {
	case isMeshTable(t):
		return Ownership{Owner: OwnedByMesh}
	case TableTool(t) != "":
		return Ownership{Owner: OwnedByForeign, Tool: TableTool(t)}
	case IsIptablesTable(t):
		return Ownership{Owner: OwnedShared}
	}
	return Ownership{Owner: OwnedByPredecessor}
}

// ChainOwner says who owns chain ch of table t. Base chains of iptables-nft
// tables are shared; a chain of a foreign tool is foreign wherever it is;
// any other chain of an iptables-nft table (ufw's, the operator's own) is
// the predecessor's, and so is every chain of a native table that is not
// a foreign tool's or the mesh's.
func ChainOwner(t *Table, ch *Chain) Ownership {
	to := TableOwner(t)
	switch {
	case to.Owner == OwnedByMesh || to.Owner == OwnedByForeign:
		return to
	case ChainTool(ch.Name) != "":
		return Ownership{Owner: OwnedByForeign, Tool: ChainTool(ch.Name)}
	case to.Owner == OwnedShared && ch.Hook != "":
		return Ownership{Owner: OwnedShared}
	}
	return Ownership{Owner: OwnedByPredecessor}
}

// RuleOwner says who owns rule r of chain ch: the mesh for its marks and
// flip accepts, a foreign tool for its jumps and bridge rules in a shared
// base chain (ForeignRule, the bridges node's), else the chain's owner.
func RuleOwner(node *Node, t *Table, ch *Chain, r *Rule) Ownership {
	if strings.HasPrefix(r.Comment, MarkPrefix) {
		return Ownership{Owner: OwnedByMesh}
	}
	co := ChainOwner(t, ch)
	if co.Owner == OwnedShared {
		if ForeignRule(node, t, r) {
			tool := "docker"
			if r.Verdict.Kind == VerdictJump || r.Verdict.Kind == VerdictGoto {
				if x := ChainTool(r.Verdict.Target); x != "" {
					tool = x
				}
			}
			return Ownership{Owner: OwnedByForeign, Tool: tool}
		}
		return Ownership{Owner: OwnedByPredecessor}
	}
	return co
}

// churns reports whether a foreign chain's rules are rewritten by its tool
// as a matter of course (Docker recreating a container rewrites DOCKER and
// the nat table's DNATs), so a change there is not drift of the found
// firewall. DOCKER-USER is Docker's hook for the operator's own rules
// (ufw-docker puts the predecessor's routed policy there): Docker never
// rewrites it, so it counts.
func Churns(t *Table, ch *Chain) bool {
	o := ChainOwner(t, ch)
	return o.Owner == OwnedByForeign && ch.Name != DockerUserChain
}

// markPrefix opens every comment the mesh writes on a rule.
const MarkPrefix = "adoption:"

// MeshTable is the mesh's own table, "table inet adoption", written by Flip.
const MeshTable = "adoption"

var iptablesTables = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true}

var iptablesBuiltins = map[string]bool{"INPUT": true, "FORWARD": true, "OUTPUT": true, "PREROUTING": true, "POSTROUTING": true}

// isIptablesTable reports whether t is a table iptables-nft made: an ip or
// ip6 table named like an iptables table whose base chains carry the
// iptables built-in names.
func IsIptablesTable(t *Table) bool {
	if (t.Family != FamilyIP && t.Family != FamilyIP6) || !iptablesTables[t.Name] {
		return false
	}
	for _, c := range t.Chains {
		if c.Hook != "" && !iptablesBuiltins[c.Name] {
			return false
		}
	}
	return true
}
