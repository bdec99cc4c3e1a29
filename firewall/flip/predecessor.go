// This file holds how the flip finds the predecessor in the found ruleset:
// its tables, its entry points in shared base chains, the chains that go
// dormant, and the ruleset as it stands once flipped (afterFlip).

package flip

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"adoption/firewall"
	"adoption/firewall/nft"
)

// point is where Flip puts one neutralising accept: before the rule with
// handle before, at the top of the chain (before 0), or appended. In a
// regular chain whose caller goes on with a foreign tool's rules after it
// (DOCKER-USER, before Docker's own chains in FORWARD) it is a return
// instead: an accept there would end FORWARD and skip Docker's rules.
type point struct {
	family, table, chain string
	before               uint64
	append               bool
	ret                  bool
}

// verdict is what the neutralising rule at pt says.
func (pt point) verdict() firewall.VerdictKind {
	if pt.ret {
		return firewall.VerdictReturn
	}
	return firewall.VerdictAccept
}

// dormantBase is a shared base chain of an iptables-nft table whose rules
// from index from on are the predecessor's.
type dormantBase struct {
	family, table, chain string
	from                 int
	handles              []uint64
	policyDrop           bool
}

// predecessor is what the flip takes out of force.
type predecessor struct {
	points      []point
	bases       []dormantBase
	chains      []ChainRef     // regular chains of iptables-nft tables
	tables      []TableRef     // whole native tables
	nativeBases []ChainRef     // filter base chains of native tables that also hold other chains
	node        *firewall.Node // whose bridges tell Docker's rules (nil: by name)
}

func (p *predecessor) empty() bool {
	return len(p.bases) == 0 && len(p.chains) == 0 && len(p.tables) == 0 && len(p.nativeBases) == 0
}

// dormant names what Commit deletes whole: regular chains, native base
// chains and tables (the shared base chains stay, so they are not named).
func (p *predecessor) dormant() []ChainRef {
	out := append([]ChainRef{}, p.chains...)
	for _, t := range p.tables {
		out = append(out, ChainRef{Family: t.Family, Table: t.Name})
	}
	return append(out, p.nativeBases...)
}

// closure is every chain of t reachable from roots by jump or goto, through
// the rules follow admits.
func closure(t *firewall.Table, roots []string, follow func(ch *firewall.Chain, r *firewall.Rule) bool) map[string]bool {
	byName := map[string]*firewall.Chain{}
	for i := range t.Chains {
		byName[t.Chains[i].Name] = &t.Chains[i]
	}
	seen := map[string]bool{}
	for len(roots) > 0 {
		n := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		if ch := byName[n]; ch != nil {
			for i := range ch.Rules {
				if follow(ch, &ch.Rules[i]) {
					roots = append(roots, firewall.Targets(&ch.Rules[i])...)
				}
			}
		}
	}
	return seen
}

// notPredecessors admits every rule but the predecessor's in DOCKER-USER:
// what a foreign tool keeps is not what the predecessor's rules there
// reach.
func notPredecessors(ch *firewall.Chain, r *firewall.Rule) bool {
	return ch.Name != firewall.DockerUserChain || !firewall.DockerUserPredecessorRule(r)
}

func everyRule(*firewall.Chain, *firewall.Rule) bool { return true }

// analyse finds the predecessor in rs (a ruleset without the mesh table and
// without the flip's own accepts) and where its entry points are.
//
//   - iptables-nft filter tables (ufw, plain iptables): in each shared base
//     chain, the predecessor's rules are those from the first rule that is
//     not a foreign tool's (Docker's jumps and bridge rules come first, as
//     Docker inserts them). The accept goes at the top of that rule's target
//     when it is an unconditional jump into ufw's chains, else just before
//     it. A foreign rule after a predecessor rule is refused: neutralising
//     the predecessor there would take the foreign rule out of force too.
//     Dormant regular chains are ufw's and those reachable only from the
//     predecessor's rules. DOCKER-USER is Docker's chain, but the rules
//     the operator put there are the predecessor's (the ufw-docker
//     arrangement's routed policy): a marked return at its top takes them
//     out of force, FORWARD going on with Docker's own chains.
//   - native tables (not the mesh's, not a foreign tool's) with a filter
//     base chain: an accept at the top of each filter base chain.
//
// Docker's bridge rules are told by node's bridges (firewall.ForeignRule);
// nil: by Docker's default names.
func analyse(rs *firewall.Ruleset, node *firewall.Node) (*predecessor, error) {
	p := &predecessor{node: node}
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if o := firewall.TableOwner(t).Owner; !firewall.IsIPFamily(t.Family) || o == firewall.OwnedByMesh || o == firewall.OwnedByForeign {
			continue
		}
		if firewall.IsIptablesTable(t) {
			if t.Name != "filter" {
				continue // nat, mangle, raw, security: not where the predecessor filters
			}
			if err := p.iptables(t); err != nil {
				return nil, err
			}
			continue
		}
		var filters []*firewall.Chain
		other := false
		for ci := range t.Chains {
			ch := &t.Chains[ci]
			if ch.Hook == "" {
				continue
			}
			if firewall.IsFilter(ch) && ch.Hook != "ingress" && ch.Hook != "egress" {
				filters = append(filters, ch)
			} else {
				other = true
			}
		}
		if len(filters) == 0 {
			continue
		}
		for _, ch := range filters {
			p.points = append(p.points, point{family: t.Family, table: t.Name, chain: ch.Name})
			if other {
				p.nativeBases = append(p.nativeBases, ChainRef{Family: t.Family, Table: t.Name, Chain: ch.Name})
			}
		}
		if !other {
			p.tables = append(p.tables, TableRef{Family: t.Family, Name: t.Name})
		}
	}
	return p, nil
}

func (p *predecessor) iptables(t *firewall.Table) error {
	type cut struct {
		ch   *firewall.Chain
		from int
	}
	var cuts []cut
	var keptRoots, dormantRoots []string
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		if ch.Hook == "" {
			if ch.Name == firewall.DockerUserChain {
				if err := p.dockerUser(t, ch, &dormantRoots); err != nil {
					return err
				}
			}
			if firewall.ChainOwner(t, ch).Owner == firewall.OwnedByForeign {
				keptRoots = append(keptRoots, ch.Name)
			}
			continue
		}
		if ch.Unknown != "" {
			return fmt.Errorf("chain %s %s %s could not be listed (%s): cannot tell where the predecessor's rules start", t.Family, t.Name, ch.Name, ch.Unknown)
		}
		from := -1
		for i := range ch.Rules {
			if !firewall.ForeignRule(p.node, t, &ch.Rules[i]) {
				from = i
				break
			}
		}
		if from < 0 {
			for i := range ch.Rules {
				keptRoots = append(keptRoots, firewall.Targets(&ch.Rules[i])...)
			}
			// A drop policy with rules that are all a foreign tool's is that
			// tool's (Docker sets FORWARD to drop); with no rules at all it is
			// the predecessor's.
			if ch.Policy != "drop" || len(ch.Rules) > 0 {
				continue
			}
			from = 0
		}
		for i := range ch.Rules {
			r := &ch.Rules[i]
			if i < from {
				keptRoots = append(keptRoots, firewall.Targets(r)...)
				continue
			}
			if firewall.ForeignRule(p.node, t, r) {
				return fmt.Errorf("chain %s %s %s: rule handle %d (%s) belongs to another tool and comes after the predecessor's rule handle %d: "+
					"neutralising the predecessor there would take it out of force too; have that tool put its rules first (Docker does when it restarts) and preview again",
					t.Family, t.Name, ch.Name, r.Handle, firewall.RenderRule(r), ch.Rules[from].Handle)
			}
			dormantRoots = append(dormantRoots, firewall.Targets(r)...)
		}
		cuts = append(cuts, cut{ch, from})
	}
	kept := closure(t, keptRoots, notPredecessors)
	dormant := closure(t, dormantRoots, everyRule)
	for _, c := range cuts {
		ch := c.ch
		b := dormantBase{family: t.Family, table: t.Name, chain: ch.Name, from: c.from, policyDrop: ch.Policy == "drop"}
		for _, r := range ch.Rules[c.from:] {
			b.handles = append(b.handles, r.Handle)
		}
		p.bases = append(p.bases, b)
		pt := point{family: t.Family, table: t.Name, chain: ch.Name}
		switch {
		case c.from == len(ch.Rules):
			pt.append = true
		default:
			r := &ch.Rules[c.from]
			if r.Verdict.Kind == firewall.VerdictJump && len(r.Conds) == 0 && r.VMap == nil && firewall.IsUfwChain(r.Verdict.Target) && !kept[r.Verdict.Target] {
				pt.chain = r.Verdict.Target // the top of ufw's entry chain
			} else {
				pt.before = r.Handle
			}
		}
		dup := false
		for _, q := range p.points {
			dup = dup || q == pt
		}
		if !dup {
			p.points = append(p.points, pt)
		}
	}
	for ci := range t.Chains {
		ch := &t.Chains[ci]
		if ch.Hook != "" || kept[ch.Name] || firewall.ChainOwner(t, ch).Owner == firewall.OwnedByForeign {
			continue
		}
		if dormant[ch.Name] || firewall.IsUfwChain(ch.Name) {
			p.chains = append(p.chains, ChainRef{Family: t.Family, Table: t.Name, Chain: ch.Name})
		}
	}
	return nil
}

// dockerUser takes the predecessor's rules of DOCKER-USER (chain ch of
// iptables-nft table t) out of force: a marked return at the chain's top,
// the rules deleted at commit (the unconditional returns Docker writes
// stay), and what they jump to added to dormantRoots.
func (p *predecessor) dockerUser(t *firewall.Table, ch *firewall.Chain, dormantRoots *[]string) error {
	if ch.Unknown != "" {
		return fmt.Errorf("chain %s %s %s could not be listed (%s): cannot tell which of its rules are the predecessor's", t.Family, t.Name, ch.Name, ch.Unknown)
	}
	b := dormantBase{family: t.Family, table: t.Name, chain: ch.Name, from: -1}
	for i := range ch.Rules {
		r := &ch.Rules[i]
		if !firewall.DockerUserPredecessorRule(r) {
			continue
		}
		if b.from < 0 {
			b.from = i
		}
		b.handles = append(b.handles, r.Handle)
		*dormantRoots = append(*dormantRoots, firewall.Targets(r)...)
	}
	if b.from < 0 {
		return nil // Docker's return alone: nothing of the predecessor's
	}
	p.bases = append(p.bases, b)
	p.points = append(p.points, point{family: t.Family, table: t.Name, chain: ch.Name, ret: true})
	return nil
}

// split separates what a flip added from the rest of rs: the mesh table
// and the node's neutralising accepts. base is a copy of rs without them.
func split(rs *firewall.Ruleset, node string) (base *firewall.Ruleset, mesh *firewall.Table, neutral []RuleRef) {
	comment := neutraliseComment(node)
	base = &firewall.Ruleset{}
	for ti := range rs.Tables {
		t := rs.Tables[ti]
		if firewall.TableOwner(&t).Owner == firewall.OwnedByMesh {
			mesh = &rs.Tables[ti]
			continue
		}
		t.Chains = make([]firewall.Chain, len(rs.Tables[ti].Chains))
		for ci, ch := range rs.Tables[ti].Chains {
			rules := make([]firewall.Rule, 0, len(ch.Rules))
			for _, r := range ch.Rules {
				if r.Comment == comment {
					neutral = append(neutral, RuleRef{Family: t.Family, Table: t.Name, Chain: ch.Name, Handle: r.Handle, Comment: r.Comment})
					continue
				}
				rules = append(rules, r)
			}
			ch.Rules = rules
			t.Chains[ci] = ch
		}
		base.Tables = append(base.Tables, t)
	}
	return base, mesh, neutral
}

// afterFlip is the model of the ruleset as Flip would leave it: found with
// the predecessor's entry points neutralised and the derived tables added.
func afterFlip(found, derived *firewall.Ruleset, node string, on *firewall.Node) (*firewall.Ruleset, error) {
	base, mesh, _ := split(found, node)
	if mesh != nil {
		return nil, fmt.Errorf("table inet %s exists already: the node is flipped (or a flip was left half done); revert or commit it first", firewall.MeshTable)
	}
	pred, err := analyse(base, on)
	if err != nil {
		return nil, err
	}
	for _, pt := range pred.points {
		_, ch := pt.find(base)
		if ch == nil {
			continue
		}
		r := firewall.Rule{Comment: neutraliseComment(node), Verdict: firewall.Verdict{Kind: pt.verdict()}}
		at := 0
		switch {
		case pt.append:
			at = len(ch.Rules)
		case pt.before != 0:
			for i := range ch.Rules {
				if ch.Rules[i].Handle == pt.before {
					at = i
				}
			}
		}
		ch.Rules = append(ch.Rules[:at], append([]firewall.Rule{r}, ch.Rules[at:]...)...)
	}
	base.Tables = append(base.Tables, derived.Tables...)
	return base, nil
}

// find is the chain of rs where pt is, with its table; nil when rs has no
// such chain.
func (pt point) find(rs *firewall.Ruleset) (*firewall.Table, *firewall.Chain) {
	for ti := range rs.Tables {
		t := &rs.Tables[ti]
		if t.Family != pt.family || t.Name != pt.table {
			continue
		}
		for ci := range t.Chains {
			if t.Chains[ci].Name == pt.chain {
				return t, &t.Chains[ci]
			}
		}
	}
	return nil, nil
}

func neutraliseRule(node string, pt point) *nftables.Rule {
	v := expr.VerdictAccept
	if pt.ret {
		v = expr.VerdictReturn
	}
	return &nftables.Rule{
		Table:    &nftables.Table{Family: nft.TableFamily(pt.family), Name: pt.table},
		Chain:    &nftables.Chain{Name: pt.chain},
		Position: pt.before,
		Exprs:    []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: v}},
		UserData: commentData(neutraliseComment(node)),
	}
}
