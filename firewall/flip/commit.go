// This file holds the commit of a confirmed flip: the dormant predecessor
// deleted, after its listing was kept.

package flip

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/nftables"

	"adoption/firewall"
	"adoption/firewall/nft"
)

func anyPresent(rs *firewall.Ruleset, refs []ChainRef) bool {
	for _, ref := range refs {
		for _, t := range rs.Tables {
			if t.Family != ref.Family || t.Name != ref.Table {
				continue
			}
			if ref.Chain == "" {
				return true
			}
			for _, ch := range t.Chains {
				if ch.Name == ref.Chain {
					return true
				}
			}
		}
	}
	return false
}

// Commit makes a confirmed flip final: it returns a listing of the
// predecessor's dormant parts (Render of the model; the caller saves it
// under state_dir) and deletes them in one batch: for an iptables-nft
// predecessor its rules in the shared base chains (ufw's jumps) and its
// regular chains (ufw*, ufw6*), with the base chains' drop policies set to
// accept (the accepts that stood in for them go too); for a native
// predecessor its table. Table inet adoption stays; foreign chains and
// tables (Docker's, the nat table, kube-*, ts-*) are not touched. A second
// call finds nothing dormant and returns "".
func (f *Flipper) Commit(p *RevertPlan) (string, error) {
	if p == nil || !validName(p.Node) {
		return "", fmt.Errorf("not committing: the revert plan names no valid node")
	}
	s, err := f.m.Session()
	if err != nil {
		return "", err
	}
	defer s.Close()
	gen, rs, err := s.Snapshot()
	if err != nil {
		return "", err
	}
	base, mesh, neutral := split(rs, p.Node)
	if mesh == nil {
		return "", fmt.Errorf("not committing node %s, nothing was changed: table inet %s is not there (was the flip reverted?)", p.Node, firewall.MeshTable)
	}
	node, err := f.readNode()
	if err != nil {
		return "", fmt.Errorf("not committing node %s, nothing was changed: %w", p.Node, err)
	}
	pred, err := analyse(base, node)
	if err != nil {
		return "", fmt.Errorf("not committing node %s, nothing was changed: %w", p.Node, err)
	}
	if pred.empty() && len(neutral) == 0 {
		return "", nil
	}
	saved := renderDormant(base, pred)
	gone := map[ChainRef]bool{}
	for _, c := range pred.chains {
		gone[c] = true
	}
	for _, c := range pred.nativeBases {
		gone[c] = true
	}
	for _, t := range pred.tables {
		gone[ChainRef{Family: t.Family, Table: t.Name}] = true
	}
	_, err = s.Commit(gen, func(c *nftables.Conn) {
		del := func(family, table, chain string, handle uint64) {
			_ = c.DelRule(&nftables.Rule{Table: &nftables.Table{Family: nft.TableFamily(family), Name: table},
				Chain: &nftables.Chain{Name: chain}, Handle: handle})
		}
		for _, b := range pred.bases {
			for _, h := range b.handles {
				del(b.family, b.table, b.chain, h)
			}
		}
		for _, r := range neutral {
			if !gone[ChainRef{Family: r.Family, Table: r.Table, Chain: r.Chain}] && !gone[ChainRef{Family: r.Family, Table: r.Table}] {
				del(r.Family, r.Table, r.Chain, r.Handle)
			}
		}
		// Flush first: a chain can only go once nothing jumps to it.
		for _, ch := range pred.chains {
			c.FlushChain(&nftables.Chain{Table: &nftables.Table{Family: nft.TableFamily(ch.Family), Name: ch.Table}, Name: ch.Chain})
		}
		for _, ch := range append(append([]ChainRef(nil), pred.chains...), pred.nativeBases...) {
			c.DelChain(&nftables.Chain{Table: &nftables.Table{Family: nft.TableFamily(ch.Family), Name: ch.Table}, Name: ch.Chain})
		}
		accept := nftables.ChainPolicyAccept
		for _, b := range pred.bases {
			if b.policyDrop {
				c.AddChain(&nftables.Chain{Table: &nftables.Table{Family: nft.TableFamily(b.family), Name: b.table}, Name: b.chain, Policy: &accept})
			}
		}
		for _, t := range pred.tables {
			c.DelTable(&nftables.Table{Family: nft.TableFamily(t.Family), Name: t.Name})
		}
	})
	if errors.Is(err, nft.ErrRulesetChanged) {
		return "", fmt.Errorf("not committing node %s: %w; commit again", p.Node, err)
	}
	if err != nil {
		return "", fmt.Errorf("committing the flip of node %s: %w", p.Node, err)
	}
	return saved, nil
}

// renderDormant is the listing of what Commit deletes.
func renderDormant(rs *firewall.Ruleset, pred *predecessor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The predecessor's firewall as it stood dormant after the flip, deleted at commit.\n")
	type key struct{ family, name string }
	keep := map[key]map[string]int{}
	whole := map[key]bool{}
	add := func(family, table, chain string, from int) {
		k := key{family, table}
		if keep[k] == nil {
			keep[k] = map[string]int{}
		}
		keep[k][chain] = from
	}
	for _, bc := range pred.bases {
		add(bc.family, bc.table, bc.chain, bc.from)
	}
	for _, c := range append(append([]ChainRef(nil), pred.chains...), pred.nativeBases...) {
		add(c.Family, c.Table, c.Chain, 0)
	}
	for _, t := range pred.tables {
		whole[key{t.Family, t.Name}] = true
	}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		k := key{t.Family, t.Name}
		switch {
		case whole[k]:
			b.WriteString("\n")
			firewall.RenderTable(&b, t, nil)
		case keep[k] != nil:
			b.WriteString("\n")
			firewall.RenderTable(&b, t, keep[k])
		}
	}
	return b.String()
}
