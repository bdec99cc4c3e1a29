// This file holds the memoising evaluator: one packet through a hook's
// base chains, every undecided condition a branch, each rule's result
// memoised per packet.

package eval

import (
	"adoption/firewall"
)

// outcome is a set of possible ends of a chain evaluation: accept, drop,
// return, and (in nat chains) one bit per DNAT target the evaluator met, from
// outDNAT on.
type outcome uint64

const (
	outAccept outcome = 1 << iota
	outDrop
	outReturn
	outDNAT // first target bit; target i is outDNAT << i
)

// maxTargets is how many distinct DNAT targets one packet's nat evaluation
// keeps apart; more make the outcome unknown.
const maxTargets = 60

// Evaluator follows one packet at a time through the compiled ruleset
// (program.go). Its memo of chain outcomes is a slot per rule, valid for the
// current generation: one hook of one packet.
type Evaluator struct {
	prog *program
	pkt  Packet
	memo []memoSlot
	gen  uint32
	// nat is set while nat chains run: a DNAT verdict then yields its
	// target's bit instead of accept.
	nat     bool
	targets []firewall.NATTarget
	// sawSource is set when a source address condition was looked at since
	// it was last cleared: until then the packet's source made no
	// difference to anything.
	sawSource bool
	// sources are the source address conditions looked at since
	// startSources, each once (seenSource): a source that meets each of them
	// as any other source does goes the way any other does (likeOther).
	sources    []*firewall.Cond
	seenSource map[*firewall.Cond]bool
	// bounds are the port intervals' starts of the evaluation (portBounds):
	// a DNAT that picks a port of a range at random is evaluated once per
	// interval of the range.
	bounds []int
	// sawOwnDst is set when a destination condition was decided against
	// the node's own addresses (the packet's destination, or its original
	// one, not a DNAT target or a routed address) since it was cleared.
	sawOwnDst bool
	// looked are the fields beyond source and port whose conditions were
	// looked at since it was cleared (lookSport, lookDst): a region that
	// differs from one evaluated only in fields not looked at fares the
	// same (CompareClassesIn).
	looked uint8
	// only names the paths a client's evaluation is asked about (wants):
	// "" every path. The hooks of the others may be left unevaluated.
	only string
}

// wants reports whether path p is one of those only names, as reachesDir
// tells them: "" every path; DirRouted routed forwarding; a hook the
// paths to it but routed forwarding.
func wants(only string, p path) bool {
	switch only {
	case "":
		return true
	case DirRouted:
		return p.routed
	}
	return p.dir == only && !p.routed
}

// skips reports whether the evaluator leaves path p out: not asked for.
// What a client's packet meets on the other paths does not change how it
// fares on p (each hook is evaluated afresh, Hook), and a source region
// is left out by what the evaluation looked at (likeOther): leaving the
// others unevaluated changes no answer about p. Without the shortcuts
// every path is evaluated (and the answers filtered).
func (e *Evaluator) skips(p path) bool { return shortcuts && !wants(e.only, p) }

// shortcuts switches on what the evaluator leaves out because it cannot
// change an answer (a chain's port index, a source region that goes the
// way of any other). Only the test that compares the answers with and
// without them switches them off.
var shortcuts = true

// The fields Evaluator.looked records.
const (
	lookSport uint8 = 1 << iota
	lookDst
)

type memoSlot struct {
	gen uint32
	o   outcome
}

// NewEvaluator compiles rs and returns an evaluator of it.
func NewEvaluator(rs *firewall.Ruleset) *Evaluator { return compile(rs).Evaluator() }

// Evaluator returns an evaluator of the compiled program.
func (p *program) Evaluator() *Evaluator {
	return &Evaluator{prog: p, memo: make([]memoSlot, p.slots), seenSource: map[*firewall.Cond]bool{}}
}

// startSources forgets the source conditions looked at so far.
func (e *Evaluator) startSources() {
	e.sawSource = false
	e.sources = e.sources[:0]
	clear(e.seenSource)
}

// likeOther reports whether source a meets each of the first n source
// conditions looked at since startSources as any other source does. The
// evaluation is a function of the conditions' values: if the one of any
// other source looked at no source condition but those, a packet from a
// goes the very same way, and its evaluation can be left out.
func (e *Evaluator) likeOther(a Atom, n int) bool {
	if !shortcuts {
		return false
	}
	for _, c := range e.sources[:n] {
		if e.srcHolds(c, a) != e.srcHolds(c, Atom{Other: true}) {
			return false
		}
	}
	return true
}

// srcHolds decides source condition c for a packet from a, as cond does.
func (e *Evaluator) srcHolds(c *firewall.Cond, a Atom) bool {
	if set := e.prog.sources[c]; set != nil {
		return set.holds(a) != c.Negate
	}
	p := Packet{Src: a}
	return p.Cond(c) == TriTrue
}

// reset starts a new memo generation for a new packet or hook.
func (e *Evaluator) reset() {
	e.gen++
	if e.gen == 0 { // wrapped: old stamps could look current
		clear(e.memo)
		e.gen = 1
	}
}

// cond decides c for the current packet.
func (e *Evaluator) cond(c *firewall.Cond) Tri {
	if c.Kind == firewall.CondSaddr {
		e.sawSource = true
		if !e.seenSource[c] {
			e.seenSource[c] = true
			e.sources = append(e.sources, c)
		}
		if set := e.prog.sources[c]; set != nil {
			t := boolTri(set.holds(e.pkt.Src))
			if c.Negate {
				t = 1 - t
			}
			return t
		}
	}
	switch c.Kind {
	case firewall.CondSport:
		e.looked |= lookSport
	case firewall.CondDaddr, firewall.CondOrigDaddr, firewall.CondAddrType, firewall.CondPktType:
		e.looked |= lookDst
	}
	switch {
	case c.Kind == firewall.CondDaddr && !e.pkt.Dst.IsValid(),
		c.Kind == firewall.CondOrigDaddr && (e.pkt.Dnat || !e.pkt.Dst.IsValid()):
		e.sawOwnDst = true
	}
	return e.pkt.Cond(c)
}

// run returns the possible outcomes of chain c from rule i on. outReturn
// means the chain returned (or fell off its end) to its caller. The memo is
// by (chain, rule) only, whatever the depth.
func (e *Evaluator) run(c *cchain, i, depth int) outcome {
	if c == nil || depth > 64 {
		return outAccept | outDrop | outReturn
	}
	if c.ch.Unknown != "" {
		return outAccept | outDrop | outReturn
	}
	if c.ports != nil && i < len(c.rules) && portProto(e.pkt.Proto) {
		// The rules passed over are ones whose port condition is false
		// for the packet: each would go on to the next.
		i = c.ports.live(i, e.pkt.Port)
	}
	if i >= len(c.rules) {
		return outReturn
	}
	if s := e.memo[c.base+i]; s.gen == e.gen {
		return s.o
	}
	r := &c.rules[i]
	m := TriTrue
	for _, cd := range r.conds {
		switch e.cond(cd) {
		case TriFalse:
			m = TriFalse
		case TriUnknown:
			m = TriUnknown
		}
		if m == TriFalse {
			break
		}
	}
	var o outcome
	switch m {
	case TriFalse:
		o = e.run(c, i+1, depth)
	default:
		if r.rule.VMap != nil {
			o = e.vmap(c, i, depth)
		} else {
			o = e.verdict(c, i, r.rule.Verdict, r.target, depth)
		}
		if m == TriUnknown {
			o |= e.run(c, i+1, depth)
		}
	}
	e.memo[c.base+i] = memoSlot{e.gen, o}
	return o
}

func (e *Evaluator) vmap(c *cchain, i, depth int) outcome {
	r := &c.rules[i]
	var o outcome
	definite := false
	for k := range r.rule.VMap {
		en := &r.rule.VMap[k]
		switch e.cond(&en.Cond) {
		case TriTrue:
			o |= e.verdict(c, i, en.Verdict, r.vtargets[k], depth)
			definite = true
		case TriUnknown:
			o |= e.verdict(c, i, en.Verdict, r.vtargets[k], depth)
		}
	}
	if !definite {
		o |= e.run(c, i+1, depth) // no key matched: the rule does nothing
	}
	return o
}

// verdict is what verdict v of rule i of c does; target is the chain a jump
// or goto names (nil: none by that name). The rest of the chain is rule i+1
// on.
func (e *Evaluator) verdict(c *cchain, i int, v firewall.Verdict, target *cchain, depth int) outcome {
	switch v.Kind {
	case firewall.VerdictAccept:
		return outAccept
	case firewall.VerdictDNAT:
		if a := v.NAT; a != nil && a.Addr.IsValid() && a.Addr.Is4() != (e.pkt.Family == firewall.FamilyIP) {
			// "dnat ip to" in an inet table does nothing to an IPv6
			// packet (and the other way round): the rule goes on.
			return e.run(c, i+1, depth)
		}
		if !e.nat {
			return outAccept // a NAT statement ends the base chain like accept
		}
		return e.targetBit(v.NAT)
	case firewall.VerdictDrop, firewall.VerdictReject:
		return outDrop
	case firewall.VerdictReturn:
		return outReturn
	case firewall.VerdictContinue:
		return e.run(c, i+1, depth)
	case firewall.VerdictJump:
		o := e.run(target, 0, depth+1)
		if o&outReturn != 0 {
			o = o&^outReturn | e.run(c, i+1, depth)
		}
		return o
	case firewall.VerdictGoto:
		// The target's return goes to our caller: it is our return.
		return e.run(target, 0, depth+1)
	}
	return outAccept | outDrop | e.run(c, i+1, depth)
}

func (e *Evaluator) targetBit(t *firewall.NATTarget) outcome {
	if t == nil {
		t = &firewall.NATTarget{Unknown: "no target decoded"}
	}
	for i := range e.targets {
		if e.targets[i] == *t {
			return outDNAT << i
		}
	}
	if len(e.targets) >= maxTargets {
		return outAccept | outDrop
	}
	e.targets = append(e.targets, *t)
	return outDNAT << (len(e.targets) - 1)
}

// Result is the outcome of a whole hook for one packet: whether it may be
// accepted, dropped, or both (undecided).
type Result struct {
	Accept, drop bool
}

// runBase runs one base chain; falling off its end (or returning from it)
// is its policy's verdict.
func (e *Evaluator) runBase(b ChainRef) outcome {
	o := e.run(e.prog.chain(b.chain), 0, 0)
	if o&outReturn != 0 {
		o &^= outReturn
		if b.chain.Policy == "drop" {
			o |= outDrop
		} else {
			o |= outAccept
		}
	}
	return o
}

// Hook runs pkt through the base chains bases of one hook.
func (e *Evaluator) Hook(bases []ChainRef, pkt Packet) Result {
	e.pkt = pkt
	e.reset()
	cont, drop := true, false
	for _, b := range bases {
		if !cont {
			break
		}
		o := e.runBase(b)
		if o&outDrop != 0 {
			drop = true
		}
		cont = o&outAccept != 0
	}
	return Result{Accept: cont, drop: drop}
}
