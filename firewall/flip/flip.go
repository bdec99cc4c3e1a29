// This file holds the flip's operations on the node (Flip, Revert) and the
// plan it leaves for a revert. The flip adds table inet
// adoption and a marked accept at each of the predecessor's entry points in
// one batch, rewriting no rule it decoded; docs/firewall.md says why.

package flip

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/marks"
	"adoption/firewall/nft"
)

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
	// FoundOwn is FoundFingerprint of the ruleset before the flip: the
	// found firewall's own rules, without what Docker rewrites as it goes.
	// A confirmation checks it (InForce).
	FoundOwn string `json:"found_own,omitempty"`
	// MeshFingerprint is Fingerprint of table inet adoption as the kernel
	// listed it right after the flip ("" when that listing failed): what
	// a confirmation expects to find.
	MeshFingerprint string `json:"mesh_fingerprint,omitempty"`
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
	// node reads the node whose bridges tell Docker's rules from the
	// predecessor's (WithNode); nil: by Docker's default names.
	node func() (firewall.Node, error)
}

// NewFlipper speaks the firewall of the network namespace at netnsPath (""
// for the caller's own).
func NewFlipper(netnsPath string) *Flipper {
	return &Flipper{m: marks.NewMarker(netnsPath), now: time.Now}
}

// WithNode makes f tell Docker's bridge rules by the node read (the
// preview's NodeReader, eval.Inspector.Node: the engine's bridges,
// custom-named ones included), as the preview does, so both find the
// predecessor's rules alike. It returns f.
func (f *Flipper) WithNode(read func() (firewall.Node, error)) *Flipper {
	f.node = read
	return f
}

// readNode is the node Docker's bridge rules are told by: nil when f has
// no reader.
func (f *Flipper) readNode() (*firewall.Node, error) {
	if f.node == nil {
		return nil, nil
	}
	n, err := f.node()
	if err != nil {
		return nil, fmt.Errorf("reading the node's interfaces and container bridges: %w", err)
	}
	return &n, nil
}

// NewFlipperWithConn speaks through c (tests).
func NewFlipperWithConn(c *nftables.Conn) *Flipper {
	return &Flipper{m: marks.NewMarkerWithConn(c), now: time.Now}
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
	on, err := f.readNode()
	if err != nil {
		return nil, notApplied(fmt.Errorf("not flipping node %s, nothing was changed: %w", node, err))
	}
	base, mesh, neutral := split(rs, node)
	if mesh != nil {
		if len(neutral) > 0 && firewall.Fingerprint(base) == expectFound {
			// A retried flip that went through the first time.
			pred, err := analyse(base, on)
			if err != nil {
				return nil, notApplied(err)
			}
			sortRefs(neutral)
			return &RevertPlan{Node: node, MeshTable: TableRef{firewall.FamilyInet, firewall.MeshTable}, Neutralised: neutral,
				Dormant: pred.dormant(), FoundFingerprint: expectFound, FoundOwn: FoundFingerprint(base), MeshFingerprint: meshFingerprint(mesh),
				Saved: firewall.Render(base), FlippedAt: f.now().UTC()}, nil
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
	pred, err := analyse(rs, on)
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
		Dormant: pred.dormant(), FoundFingerprint: expectFound, FoundOwn: FoundFingerprint(rs), Saved: firewall.Render(rs), FlippedAt: f.now().UTC()}
	for _, e := range echoes {
		if e.Comment == neutraliseComment(node) {
			plan.Neutralised = append(plan.Neutralised, RuleRef{Family: e.Family, Table: e.Table, Chain: e.Chain, Handle: e.Handle, Comment: e.Comment})
		}
	}
	sortRefs(plan.Neutralised)
	if _, after, err := s.Snapshot(); err == nil {
		if _, mesh, _ := split(after, node); mesh != nil {
			plan.MeshFingerprint = meshFingerprint(mesh)
		}
	}
	// Fewer echoes than neutralising accepts: the batch is in, only the
	// record is short, and Revert finds the accepts by their comment.
	plan.ShortEchoes = len(pred.points) - len(plan.Neutralised)
	return plan, nil
}

// meshFingerprint is Fingerprint of the mesh's table alone.
func meshFingerprint(mesh *firewall.Table) string {
	return firewall.Fingerprint(&firewall.Ruleset{Tables: []firewall.Table{*mesh}})
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

// PlannedRevert is the revert plan a flip of found on node would record, as
// far as it is known before the batch: what its commit deletes (Dormant).
// The preview checks the boot path with it, as the commit will with the
// plan recorded (bootpath.Node.Check). on tells Docker's bridge rules, as
// for Flip.
func PlannedRevert(found *firewall.Ruleset, on *firewall.Node, node string) (*RevertPlan, error) {
	base, _, _ := split(found, node)
	pred, err := analyse(base, on)
	if err != nil {
		return nil, err
	}
	p := RevertPlanFor(node)
	p.Dormant = pred.dormant()
	return p, nil
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
