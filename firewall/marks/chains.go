// This file holds where a mark may go, on the input and the forward path
// alike: one picker, parameterised by the hook.

package marks

import (
	"adoption/firewall"
)

// preferred are, per hook, the chains in which the found firewall keeps its
// own per-port accepts, most preferred first.
var preferred = map[string][]string{
	firewall.HookInput:   {"ufw-user-input", "ufw6-user-input"},
	firewall.HookForward: {"ufw-user-forward", "ufw6-user-forward", "DOCKER-USER"},
}

// markChains are the chains of t where a mark at hook (input or forward)
// may go: the first preferred chain an iptables-nft filter table holds,
// else every filter base chain at hook that is not a foreign tool's. None
// in a table that is not an IP family's, a foreign tool's or the mesh's,
// nor in an iptables-nft table other than filter (raw, mangle, security:
// not where iptables filters).
func markChains(t *firewall.Table, hook string) []*firewall.Chain {
	if o := firewall.TableOwner(t).Owner; !firewall.IsIPFamily(t.Family) || o == firewall.OwnedByForeign || o == firewall.OwnedByMesh {
		return nil
	}
	if firewall.IsIptablesTable(t) {
		if t.Name != "filter" {
			return nil
		}
		for _, name := range preferred[hook] {
			if ch := ChainNamed(t, name); ch != nil {
				return []*firewall.Chain{ch}
			}
		}
	}
	var chains []*firewall.Chain
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		if ch.Hook == hook && firewall.IsFilter(ch) && firewall.ChainOwner(t, ch).Owner != firewall.OwnedByForeign {
			chains = append(chains, ch)
		}
	}
	return chains
}

// ChainNamed is the chain of t called name, or nil.
func ChainNamed(t *firewall.Table, name string) *firewall.Chain {
	for ci := range t.Chains {
		if t.Chains[ci].Name == name {
			return &t.Chains[ci]
		}
	}
	return nil
}
