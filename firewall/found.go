// This file holds the fingerprint of the found firewall's own rules, which
// drift is measured against.

package firewall

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
)

// FoundFingerprint fingerprints the found firewall's own rules: the
// ruleset without the mesh's marked rules, without the mesh's own table, and
// without handles, so a reconcile that puts a mark back, or a reload by the
// firewall's owner that recreates the same rules, is not drift, while a rule
// someone added, removed or changed by hand is.
func FoundFingerprint(rs *Ruleset) string {
	type rule struct {
		Comment string      `json:"c,omitempty"`
		Conds   []Cond      `json:"k,omitempty"`
		Verdict Verdict     `json:"v"`
		VMap    []VMapEntry `json:"m,omitempty"`
		Unknown []string    `json:"u,omitempty"`
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
		Sets         []Set
	}
	var out []table
	for _, t := range rs.Tables {
		if t.Name == meshTableName {
			continue
		}
		ft := table{Family: t.Family, Name: t.Name, Sets: t.Sets}
		for _, c := range t.Chains {
			fc := chain{Name: c.Name, Hook: c.Hook, Policy: c.Policy, Type: c.Type, Priority: c.Priority, Unknown: c.Unknown}
			for _, r := range c.Rules {
				if strings.HasPrefix(r.Comment, "adoption:") {
					continue // the mesh's own: marks and the flip's rules
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

// meshTableName is the mesh's own table after a flip (table inet adoption).
const meshTableName = "adoption"
