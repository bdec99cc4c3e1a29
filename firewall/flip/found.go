// This file holds the fingerprint of the found firewall's own rules, which
// drift is measured against.

package flip

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"adoption/firewall"
)

// FoundFingerprint fingerprints the found firewall's own rules: the
// ruleset without the mesh's marked rules, without the mesh's own table,
// without what foreign tools own and rewrite as they go (Docker's chains
// and its rules in the shared base chains, see owners.go), and without
// handles, so a reconcile that puts a mark back, or a reload by the
// firewall's owner that recreates the same rules, is not drift, while a rule
// someone added, removed or changed by hand is. Docker's bridge rules are
// told by Docker's default names here, not by the node's engine: the
// fingerprint must not change with whether the engine answered.
func FoundFingerprint(rs *firewall.Ruleset) string {
	type rule struct {
		Comment string               `json:"c,omitempty"`
		Conds   []firewall.Cond      `json:"k,omitempty"`
		Verdict firewall.Verdict     `json:"v"`
		VMap    []firewall.VMapEntry `json:"m,omitempty"`
		Unknown []string             `json:"u,omitempty"`
	}
	type chain struct {
		Name, Hook, Policy, Type string
		Priority                 int
		Unknown                  string
		Rules                    []rule
	}
	type table struct {
		Family, Name string
		Chains       []chain
		Sets         []firewall.Set
	}
	var out []table
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if o := firewall.TableOwner(t); o.Owner == firewall.OwnedByMesh || o.Owner == firewall.OwnedByForeign {
			continue // the mesh's own table; a foreign tool's (its churn is not drift)
		}
		ft := table{Family: t.Family, Name: t.Name, Sets: t.Sets}
		for ci := range t.Chains {
			c := &t.Chains[ci]
			if firewall.Churns(t, c) {
				// Docker rewrites its chains (and the nat table's DNATs
				// in them) whenever a container is recreated.
				ft.Chains = append(ft.Chains, chain{Name: c.Name})
				continue
			}
			fc := chain{Name: c.Name, Hook: c.Hook, Policy: c.Policy, Type: c.Type, Priority: c.Priority, Unknown: c.Unknown}
			for ri := range c.Rules {
				r := &c.Rules[ri]
				if o := firewall.RuleOwner(nil, t, c, r); o.Owner == firewall.OwnedByMesh || o.Owner == firewall.OwnedByForeign {
					continue // marks and the flip's rules; a foreign tool's jumps and bridge rules
				}
				fc.Rules = append(fc.Rules, rule{Comment: r.Comment, Conds: r.Conds, Verdict: r.Verdict, VMap: r.VMap, Unknown: r.Unknown})
			}
			ft.Chains = append(ft.Chains, fc)
		}
		out = append(out, ft)
	}
	// A table recreated by a reload lists last: order must not matter.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Family != out[j].Family {
			return out[i].Family < out[j].Family
		}
		return out[i].Name < out[j].Name
	})
	b, _ := json.Marshal(out)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
