// This file holds a ruleset compiled once for many of the evaluator's
// questions (Compiled), and two compiled rulesets compared region by region
// (Pair): a flip's preview asks the found ruleset and the one after the
// flip a dozen questions, and each is compiled once for all of them.

package eval

import (
	"net/netip"
	"sync"

	"adoption/firewall"
)

// Compiled is a ruleset compiled for the evaluator. It only points into
// the ruleset, which must not change while it is used. Its methods may be
// called at once from several goroutines: each evaluates with an
// evaluator of its own.
type Compiled struct {
	rs   *firewall.Ruleset
	prog *program

	boundsOnce sync.Once
	bounds     []int // portBounds unpruned, any family and proto

	reasonsOnce sync.Once
	reasons     []reasonRule // the rules that carry a reason (Undecided)
}

// Compile compiles rs once for the questions asked through the result.
func Compile(rs *firewall.Ruleset) *Compiled {
	return &Compiled{rs: rs, prog: compile(rs)}
}

// Ruleset is the ruleset c was compiled from.
func (c *Compiled) Ruleset() *firewall.Ruleset { return c.rs }

// anyBounds are the port intervals of every condition of the ruleset
// (portBounds unpruned), the same for every family, proto and class.
func (c *Compiled) anyBounds() []int {
	c.boundsOnce.Do(func() { c.bounds = portBounds(c.rs, "", 0, false) })
	return c.bounds
}

// Evaluator is a new evaluator of the compiled ruleset (NewEvaluator).
func (c *Compiled) Evaluator() *Evaluator { return c.prog.Evaluator() }

// Reacher is NewReacher on the compiled ruleset.
func (c *Compiled) Reacher(node firewall.Node) *Reacher {
	return &Reacher{rs: c.rs, node: node, e: c.prog.Evaluator(), fams: map[string]*reachFamily{},
		shared: &reachShared{atoms: map[string]*familyAtoms{}, bounds: c.anyBounds()}}
}

// Pair is two compiled rulesets, before and after a change, with what
// their comparisons read of both at once (the source regions that the
// prefixes of either cut). Its methods may be called at once from several
// goroutines.
type Pair struct {
	before, after *Compiled
	// both holds the tables of before, then of after.
	both *firewall.Ruleset
	keep bool // keepsPort(both)
	fams map[string]*familyAtoms
}

// NewPair pairs before and after for their comparisons.
func NewPair(before, after *Compiled) *Pair {
	both := &firewall.Ruleset{Tables: append(append([]firewall.Table(nil), before.rs.Tables...), after.rs.Tables...)}
	p := &Pair{before: before, after: after, both: both, keep: keepsPort(both), fams: map[string]*familyAtoms{}}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		atoms := sourceAtoms(both, fam)
		p.fams[fam] = &familyAtoms{atoms: atoms, groups: groupAtoms(both, atoms), index: atomIndex(atoms)}
	}
	return p
}

// Before is the ruleset before the change.
func (p *Pair) Before() *firewall.Ruleset { return p.before.rs }

// After is the ruleset after the change.
func (p *Pair) After() *firewall.Ruleset { return p.after.rs }

// Compiled are the compiled rulesets before and after the change.
func (p *Pair) Compiled() (before, after *Compiled) { return p.before, p.after }

// evaluators are a new evaluator of before and one of after.
func (p *Pair) evaluators() (*Evaluator, *Evaluator) {
	return p.before.prog.Evaluator(), p.after.prog.Evaluator()
}

// regions are the source atoms of family fam that both rulesets cut, their
// groups and index.
func (p *Pair) regions(fam string) ([]Atom, [][]Atom, map[netip.Prefix]int) {
	f := p.fams[fam]
	return f.atoms, f.groups, f.index
}
