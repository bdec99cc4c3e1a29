package flip

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/marks"
	"adoption/firewall/nft"
)

// The flip replaces the found firewall with the mesh's derived one without
// rewriting a single rule it decoded (google/nftables cannot re-encode every
// expression): one batch adds table inet adoption and puts a marked accept
// at each entry point of the predecessor. An accept ends only the base chain
// it is in, and the mesh table's policy drop is final, so from then on the
// derived ruleset alone decides, while the predecessor's rules stay in
// place, dormant. Revert deletes what the flip added; Commit deletes the
// dormant predecessor.

// ErrStale is returned (wrapped) when the found firewall changed since the
// preview; nothing was changed.
var ErrStale = errors.New("the found firewall changed since the preview; run the preview again")

// ErrStaleDerived is returned (wrapped) when the mesh's ruleset a flip
// would apply is not the one the preview approved (the plan changed in
// between); nothing was changed.
var ErrStaleDerived = errors.New("the mesh's ruleset to apply is not the one the preview approved; run the preview again")

// ErrNotApplied is wrapped by every Flip error after which the node is
// known to be unchanged. Any other Flip error leaves the outcome unknown,
// and the caller must treat the flip as applied (revert it).
var ErrNotApplied = errors.New("not applied")

// notApplied marks err as known to have changed nothing.
func notApplied(err error) error { return fmt.Errorf("%w (%w)", err, ErrNotApplied) }

// ErrCommitted is returned (wrapped) by Revert after Commit: the predecessor
// is gone, so deleting the mesh table would leave the node unfiltered.
var ErrCommitted = errors.New("the flip was committed: the predecessor's firewall is gone, so there is nothing to revert to")

// neutraliseComment marks the accepts Flip puts at the predecessor's entry
// points. ParseMark rejects it (no port/proto), so Marker never lists or
// removes these rules.
func neutraliseComment(node string) string { return firewall.MarkPrefix + node + ":flip:neutralise" }

func commentData(c string) []byte { return userdata.AppendString(nil, userdata.TypeComment, c) }

// TableRef names a table.
type TableRef struct {
	Family string `json:"family"`
	Name   string `json:"name"`
}

// ChainRef names a chain; an empty Chain means the whole table.
type ChainRef struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain,omitempty"`
}

// RuleRef names one rule where the kernel holds it.
type RuleRef struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Handle  uint64 `json:"handle"`
	Comment string `json:"comment"`
}

// RevertPlan is everything a revert needs, written to disk for the
// watchdog: it needs neither Temporal nor the plan that derived the mesh.
type RevertPlan struct {
	Node string `json:"node"`
	// MeshTable is the table Flip added; a revert deletes it whole.
	MeshTable TableRef `json:"mesh_table"`
	// Neutralised are the accepts Flip put at the predecessor's entry
	// points; a revert deletes them by handle.
	Neutralised []RuleRef `json:"neutralised"`
	// Dormant are the predecessor's chains (or whole tables) that the flip
	// took out of force and Commit deletes.
	Dormant []ChainRef `json:"dormant"`
	// FoundFingerprint is Fingerprint of the ruleset before the flip.
	FoundFingerprint string `json:"found_fingerprint"`
	// Saved is the ruleset before the flip as the model decoded it
	// (Render): a record for people.
	Saved     string    `json:"saved"`
	FlippedAt time.Time `json:"flipped_at"`
	// ShortEchoes counts neutralising accepts the kernel applied but did
	// not echo back (so they are not in Neutralised).
	ShortEchoes int `json:"short_echoes,omitempty"`
}

// Flipper flips, reverts and commits the firewall of one network namespace.
// Each operation lists the ruleset and writes one batch that the kernel
// applies only if the ruleset generation is still the one listed.
type Flipper struct {
	m   *marks.Marker
	now func() time.Time
}

// NewFlipper speaks the firewall of the network namespace at netnsPath (""
// for the caller's own).
func NewFlipper(netnsPath string) *Flipper {
	return &Flipper{m: marks.NewMarker(netnsPath), now: time.Now}
}

// NewFlipperWithConn speaks through c (tests).
func NewFlipperWithConn(c *nftables.Conn) *Flipper {
	return &Flipper{m: marks.NewMarkerWithConn(c), now: time.Now}
}

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
	chains      []ChainRef // regular chains of iptables-nft tables
	tables      []TableRef // whole native tables
	nativeBases []ChainRef // filter base chains of native tables that also hold other chains
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
func analyse(rs *firewall.Ruleset) (*predecessor, error) {
	p := &predecessor{}
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
			if !firewall.ForeignRule(t, &ch.Rules[i]) {
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
			if firewall.ForeignRule(t, r) {
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
func afterFlip(found, derived *firewall.Ruleset, node string) (*firewall.Ruleset, error) {
	base, mesh, _ := split(found, node)
	if mesh != nil {
		return nil, fmt.Errorf("table inet %s exists already: the node is flipped (or a flip was left half done); revert or commit it first", firewall.MeshTable)
	}
	pred, err := analyse(base)
	if err != nil {
		return nil, err
	}
	for _, pt := range pred.points {
		for ti := range base.Tables {
			t := &base.Tables[ti]
			if t.Family != pt.family || t.Name != pt.table {
				continue
			}
			for ci := range t.Chains {
				ch := &t.Chains[ci]
				if ch.Name != pt.chain {
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
		}
	}
	base.Tables = append(base.Tables, derived.Tables...)
	return base, nil
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

// Flip puts the mesh's derived ruleset for spec in force and takes the
// found firewall out of force, in one batch applied only if the ruleset is
// still the one listed: table inet adoption with its chains and rules, and
// a marked accept at each of the predecessor's entry points (see analyse).
// Foreign chains and tables are not touched; no predecessor rule is
// rewritten or deleted. It refuses with ErrStale when Fingerprint of the
// ruleset now is not expectFound. A flip already in place for the same
// found ruleset returns its plan again without writing. It refuses with
// ErrStaleDerived when the ruleset derived from spec is not the one the
// preview approved (Fingerprint of Derived.Ruleset, expectDerived).
//
// Every error wraps ErrNotApplied when the node is known to be unchanged;
// one that does not (the kernel's answer lost: ENOBUFS, a timeout) leaves
// the outcome unknown. Fewer echoed rules than sent is not an error: the
// batch is in, and Revert finds the accepts by their comment.
func (f *Flipper) Flip(spec MeshSpec, expectFound, expectDerived string) (*RevertPlan, error) {
	// A spec that cannot be derived is refused before the node is touched.
	if _, err := Derive(spec); err != nil {
		return nil, notApplied(fmt.Errorf("not flipping, nothing was changed: %w", err))
	}
	node := spec.Node
	if expectDerived == "" {
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: %w (no derived fingerprint given)", node, ErrStaleDerived))
	}
	s, err := f.m.Session()
	if err != nil {
		return nil, notApplied(err)
	}
	defer s.Close()
	gen, rs, err := s.Snapshot()
	if err != nil {
		return nil, notApplied(err)
	}
	legacy, err := s.Legacy()
	if err != nil {
		return nil, notApplied(fmt.Errorf("reading the iptables-legacy tables: %w", err))
	}
	if _, err := nft.Kind(rs, legacy); err != nil {
		return nil, notApplied(fmt.Errorf("not flipping node %s: %w", node, err))
	}
	base, mesh, neutral := split(rs, node)
	if mesh != nil {
		if len(neutral) > 0 && firewall.Fingerprint(base) == expectFound {
			// A retried flip that went through the first time.
			pred, err := analyse(base)
			if err != nil {
				return nil, notApplied(err)
			}
			sortRefs(neutral)
			return &RevertPlan{Node: node, MeshTable: TableRef{firewall.FamilyInet, firewall.MeshTable}, Neutralised: neutral,
				Dormant: pred.dormant(), FoundFingerprint: expectFound, Saved: firewall.Render(base), FlippedAt: f.now().UTC()}, nil
		}
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: table inet %s exists already and is not this flip's; revert or commit the flip in place first", node, firewall.MeshTable))
	}
	if fp := firewall.Fingerprint(rs); fp != expectFound {
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: %w (found %s now, the preview saw %s)", node, ErrStale, fp, expectFound))
	}
	// The essentials that depend on the found firewall (DHCP replies), as
	// the preview derived them (DeriveFor).
	d, err := DeriveFor(rs, spec)
	if err != nil {
		return nil, notApplied(fmt.Errorf("not flipping, nothing was changed: %w", err))
	}
	if got := firewall.Fingerprint(d.Ruleset); got != expectDerived {
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: %w (derived %s now, the preview approved %q)", node, ErrStaleDerived, got, expectDerived))
	}
	pred, err := analyse(rs)
	if err != nil {
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: %w", node, err))
	}
	echoes, err := s.Commit(gen, func(c *nftables.Conn) {
		d.queue(c)
		for _, pt := range pred.points {
			if pt.append {
				c.AddRule(neutraliseRule(node, pt))
			} else {
				c.InsertRule(neutraliseRule(node, pt))
			}
		}
	})
	if errors.Is(err, nft.ErrRulesetChanged) {
		return nil, notApplied(fmt.Errorf("not flipping node %s: %w: %w", node, ErrStale, err))
	}
	if err != nil && !errors.Is(err, nft.ErrOutcomeUnknown) {
		return nil, notApplied(fmt.Errorf("flipping node %s: %w", node, err))
	}
	if err != nil {
		return nil, fmt.Errorf("flipping node %s: %w", node, err)
	}
	plan := &RevertPlan{Node: node, MeshTable: TableRef{firewall.FamilyInet, firewall.MeshTable}, Neutralised: []RuleRef{},
		Dormant: pred.dormant(), FoundFingerprint: expectFound, Saved: firewall.Render(rs), FlippedAt: f.now().UTC()}
	for _, e := range echoes {
		if e.Comment == neutraliseComment(node) {
			plan.Neutralised = append(plan.Neutralised, RuleRef{Family: e.Family, Table: e.Table, Chain: e.Chain, Handle: e.Handle, Comment: e.Comment})
		}
	}
	sortRefs(plan.Neutralised)
	// Fewer echoes than neutralising accepts: the batch is in, only the
	// record is short, and Revert finds the accepts by their comment.
	plan.ShortEchoes = len(pred.points) - len(plan.Neutralised)
	return plan, nil
}

// DerivedFingerprint is the fingerprint of the mesh's ruleset for spec on
// the found ruleset found, as the preview reports it
// (Preview.DerivedFingerprint) and Flip checks it (DeriveFor: the
// essentials depend on what the found firewall accepts).
func DerivedFingerprint(found *firewall.Ruleset, spec MeshSpec) (string, error) {
	d, err := DeriveFor(found, spec)
	if err != nil {
		return "", err
	}
	return firewall.Fingerprint(d.Ruleset), nil
}

// RevertPlanFor is the revert plan known before the batch: the node's name
// is enough for Revert, which finds the mesh's table by name and the
// neutralising accepts by their comment. A flip whose outcome is unknown is
// reverted with it.
func RevertPlanFor(node string) *RevertPlan {
	return &RevertPlan{Node: node, MeshTable: TableRef{firewall.FamilyInet, firewall.MeshTable}, Neutralised: []RuleRef{}}
}

// Revert deletes what Flip added, in one batch: the neutralising accepts
// (by handle; any other rule carrying the node's neutralising comment too)
// and table inet adoption. Afterwards the ruleset is the one before Flip. A
// second call finds nothing and does nothing. After Commit it refuses with
// ErrCommitted.
func (f *Flipper) Revert(p *RevertPlan) error {
	if p == nil || !validName(p.Node) {
		return fmt.Errorf("not reverting: the revert plan names no valid node")
	}
	s, err := f.m.Session()
	if err != nil {
		return err
	}
	defer s.Close()
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		gen, rs, err := s.Snapshot()
		if err != nil {
			return err
		}
		_, mesh, neutral := split(rs, p.Node)
		if mesh == nil && len(neutral) == 0 {
			return nil
		}
		if mesh != nil && len(neutral) == 0 && len(p.Neutralised) > 0 && !anyPresent(rs, p.Dormant) {
			return fmt.Errorf("not reverting node %s: %w", p.Node, ErrCommitted)
		}
		_, err = s.Commit(gen, func(c *nftables.Conn) {
			for _, r := range neutral {
				_ = c.DelRule(&nftables.Rule{Table: &nftables.Table{Family: nft.TableFamily(r.Family), Name: r.Table},
					Chain: &nftables.Chain{Name: r.Chain}, Handle: r.Handle})
			}
			if mesh != nil {
				c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: firewall.MeshTable})
			}
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, nft.ErrRulesetChanged) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("reverting the flip of node %s: %w", p.Node, err)
		}
		last = err
	}
	return fmt.Errorf("reverting the flip of node %s: the ruleset kept changing, tried twice: %w", p.Node, last)
}

func sortRefs(rs []RuleRef) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Handle < b.Handle
	})
}

func validName(s string) bool { return marks.ValidNames(s, "") == nil }

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
	pred, err := analyse(base)
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
