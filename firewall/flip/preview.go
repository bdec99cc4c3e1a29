// This file holds the preview of a flip: every port the found firewall
// opens now, given the fate the derived ruleset would give it (kept, and by
// whom, or closing), and whether the flip may go ahead.

package flip

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/firewall/marks"
	"adoption/vocab"
)

// Fates.
const (
	FateKept      = flipwire.FateKept
	FateClosing   = flipwire.FateClosing
	FateWidening  = flipwire.FateWidening
	FateUncertain = flipwire.FateUncertain
)

// Fate is flipwire.Fate.
type Fate = flipwire.Fate

// Preview is flipwire.Preview.
type Preview = flipwire.Preview

// Undecoded is flipwire.Undecoded.
type Undecoded = flipwire.Undecoded

// PreviewFlip gives every port the found firewall opens now (OpenPorts,
// uncertain openings counted as open) a fate: kept when the ruleset as it
// would be after the flip (the predecessor neutralised exactly as Flip does
// it, foreign chains as they are, the derived table added) still opens it
// for that direction, family and source, with By naming the derived rule's
// owner; else closing. A found range partly kept is split. It approves only
// if every closing port is in spec.Drop, no management port would close or
// is in spec.Drop, and Flip could neutralise the predecessor; each reason
// names the port or the obstacle.
func PreviewFlip(found *firewall.Ruleset, spec MeshSpec) Preview {
	return PreviewFlipOn(found, firewall.Node{}, spec)
}

// PreviewFlipOn is PreviewFlip on a node whose interfaces and forwarding
// are known (ReadNode): published ports are then judged through DNAT by
// their host ports, before and after the flip alike. The derived ruleset
// is DeriveFor(found, spec): the flip writes the same one.
//
// An opening uncertain now for a named reason (a DNAT the evaluator cannot
// follow) refuses the preview unless it is dropped: its fate cannot be
// promised. An opening uncertain now and kept by an opening just as
// uncertain after (the same undecidable condition, such as a source port)
// is kept.
func PreviewFlipOn(found *firewall.Ruleset, node firewall.Node, spec MeshSpec) Preview {
	return Prepare(found, spec).On(node)
}

// Prepared is what a preview decides of found and a spec before it knows
// the node: found compiled, the spec as the flip applies it (its carried
// restrictions, EffectiveSpec) and the ruleset it derives. A caller that
// reads the node meanwhile prepares beside the read.
type Prepared struct {
	found   *firewall.Ruleset
	cf      *eval.Compiled
	spec    MeshSpec
	eff     MeshSpec
	derived *firewall.Ruleset
	err     error
}

// Prepare is the part of PreviewFlipOn of found and spec that does not
// depend on the node.
func Prepare(found *firewall.Ruleset, spec MeshSpec) *Prepared {
	// Found is compiled once for every question the preview asks of it.
	p := &Prepared{found: found, cf: eval.Compile(found), spec: spec}
	p.eff = effectiveSpec(p.cf, spec)
	d, err := Derive(p.eff)
	if err != nil {
		p.err = err
		return p
	}
	p.derived = d.Ruleset
	return p
}

// On is PreviewFlipOn of the prepared found ruleset and spec on node.
func (p *Prepared) On(node firewall.Node) Preview {
	if p.err != nil {
		return Preview{Fates: []Fate{}, FoundFingerprint: firewall.Fingerprint(p.found), Reasons: []string{p.err.Error()}}
	}
	return previewDerived(p.cf, p.derived, p.spec, p.eff, node)
}

// previewFlip compares found with derived (a model of table inet adoption);
// tests pass a derived ruleset that Derive would never make.
func previewFlip(found, derived *firewall.Ruleset, spec MeshSpec, node firewall.Node) Preview {
	cf := eval.Compile(found)
	return previewDerived(cf, derived, spec, effectiveSpec(cf, spec), node)
}

// previewDerived is previewFlip of the compiled found ruleset cf with eff,
// EffectiveSpec(found, spec), decided once by the caller.
func previewDerived(cf *eval.Compiled, derived *firewall.Ruleset, spec, eff MeshSpec, node firewall.Node) (p Preview) {
	found := cf.Ruleset()
	// The fingerprints are taken beside the rest.
	fingerprints := make(chan [2]string, 1)
	go func() { fingerprints <- [2]string{firewall.Fingerprint(found), firewall.Fingerprint(derived)} }()
	p = Preview{Fates: []Fate{}}
	defer func() {
		fp := <-fingerprints
		p.FoundFingerprint, p.DerivedFingerprint = fp[0], fp[1]
	}()
	after, err := afterFlip(found, derived, spec.Node, &node)
	if err != nil {
		p.Reasons = append(p.Reasons, err.Error())
		return p
	}
	// The ruleset after the flip is compiled once too, and each comparison
	// of the two shares both. The comparisons do not depend on the ports
	// open before and after: they are made beside them, each into a
	// preview of its own, joined below in the order they are named.
	ca := eval.Compile(after)
	pair := eval.NewPair(cf, ca)
	var parts [4]Preview
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		widenings(&parts[0], pair, derived, spec, node)
		classFates(&parts[1], pair, node, spec)
		forwardICMPFates(&parts[1], pair, node, spec)
		bridgeFates(&parts[2], pair, derived, node, spec)
		outputFates(&parts[3], found, after)
	}()
	// What found and the ruleset after open, the networks behind the node
	// cut alike in both (a routed opening compares with the other's to the
	// same region).
	foundOpen, afterOpen := pair.OpenPortsOn(node)
	dropped := map[vocab.Port]bool{}
	for _, d := range spec.Drop {
		dropped[d] = true
	}
	mgmt := map[vocab.Port]bool{}
	for _, a := range spec.Input {
		if a.Owner == OwnerManagement {
			mgmt[a.Port] = true
			if dropped[a.Port] {
				p.Reasons = append(p.Reasons, fmt.Sprintf("%s is a management port and is in flip.drop: the node would be cut off from its operator; remove it from flip.drop", a.Port))
			}
		}
	}
	narrowed := newNarrowings(pair, node)
	for _, o := range foundOpen {
		// Boundaries where the fate, owner or drop can change inside o.
		end := firewall.PortEnd(o)
		cuts := map[int]bool{int(o.Port): true}
		add := func(x int) {
			if x > int(o.Port) && x <= int(end) {
				cuts[x] = true
			}
		}
		for _, a := range afterOpen {
			add(int(a.Port))
			add(int(firewall.PortEnd(a)) + 1)
		}
		for _, l := range [][]Allow{spec.Input, spec.Forward} {
			for _, a := range l {
				add(int(a.Port.Num))
				add(int(a.Port.Num) + 1)
			}
		}
		for _, d := range spec.Drop {
			add(int(d.Num))
			add(int(d.Num) + 1)
		}
		starts := make([]int, 0, len(cuts))
		for x := range cuts {
			starts = append(starts, x)
		}
		sort.Ints(starts)
		var segs []Fate
		for i, s := range starts {
			e := int(end)
			if i+1 < len(starts) {
				e = starts[i+1] - 1
			}
			f := Fate{Opening: o, Fate: FateClosing}
			f.Opening.Port, f.Opening.PortEnd = uint16(s), 0
			if e != s {
				f.Opening.PortEnd = uint16(e)
			}
			if stillOpen(afterOpen, o, uint16(s)) {
				f.Fate = FateKept
				f.By = keeper(derived, o, uint16(s))
			} else {
				f.Dropped = dropped[vocab.Port{Num: uint16(s), Proto: o.Proto}] && (s == e || allDropped(dropped, o.Proto, s, e))
			}
			if n := len(segs); n > 0 && segs[n-1].Fate == f.Fate && segs[n-1].By == f.By && segs[n-1].Dropped == f.Dropped {
				segs[n-1].Opening.PortEnd = uint16(e)
				continue
			}
			segs = append(segs, f)
		}
		refuse := func(f Fate, also string) {
			for x := int(f.Opening.Port); x <= int(firewall.PortEnd(f.Opening)); x++ {
				if mgmt[vocab.Port{Num: uint16(x), Proto: o.Proto}] && o.Direction == firewall.HookInput {
					p.Reasons = append(p.Reasons, fmt.Sprintf("management port %d/%s (%s) is open now and would close: the node would be cut off from its operator", x, o.Proto, describeOpening(f.Opening)))
				}
			}
			if !f.Dropped {
				why := also
				if o.Reason != "" {
					why = " (uncertain now: " + o.Reason + ")"
				}
				p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) is open now and would close%s: declare it in a module or add it to flip.drop", portSpec(f.Opening), describeOpening(f.Opening), why))
			}
		}
		for _, f := range segs {
			if f.Fate == FateKept && o.Reason != "" {
				f.Fate, f.Reason = FateUncertain, o.Reason
			}
			p.Fates = append(p.Fates, f)
			if f.Fate == FateKept && o.From == "" && !o.Uncertain {
				// Kept from any source, but perhaps not from every source
				// it reaches now: closing from those it would leave out.
				for _, c := range narrowed.closing(f) {
					c.Dropped = allDropped(dropped, o.Proto, int(c.Opening.Port), int(firewall.PortEnd(c.Opening)))
					p.Fates = append(p.Fates, c)
					refuse(c, " to that source, while kept from the rest")
				}
			}
			if f.Fate == FateClosing {
				// Closing from the sources o names, but for those the
				// ruleset after still opens it to: kept from them.
				for _, from := range openFromFewer(afterOpen, o, f.Opening.Port) {
					k := f
					k.Fate, k.Dropped, k.Opening.From = FateKept, false, from
					k.By = keeper(derived, k.Opening, f.Opening.Port)
					p.Fates = append(p.Fates, k)
				}
			}
			if f.Fate == FateClosing {
				refuse(f, "")
			}
		}
		for _, f := range segs {
			if f.Fate == FateKept && o.Reason != "" {
				fix := "fix what the reason names, or add it to flip.drop"
				if allDropped(dropped, o.Proto, int(f.Opening.Port), int(firewall.PortEnd(f.Opening))) {
					fix = "it is in flip.drop, but the flip cannot be shown to close it: fix what the reason names"
				}
				p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) stays uncertain: %s; its fate after the flip cannot be promised; %s", portSpec(f.Opening), describeOpening(f.Opening), o.Reason, fix))
			}
		}
	}
	wg.Wait()
	for _, part := range parts {
		p.Fates = append(p.Fates, part.Fates...)
		p.Reasons = append(p.Reasons, part.Reasons...)
	}
	// A management port must be open after the flip, whether or not it is
	// open now: in every family, or, where the found firewall restricts it
	// (Allow.Carried), in every family it is open in now.
	for _, a := range eff.Input {
		if a.Owner != OwnerManagement {
			continue
		}
		for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
			if a.Carried != nil && !slices.ContainsFunc(a.Carried, func(r Reach) bool { return r.Family == fam }) {
				continue // closed now in fam, and kept so
			}
			if !openFromSome(afterOpen, firewall.HookInput, fam, a.Port) {
				p.Reasons = append(p.Reasons, fmt.Sprintf("management port %s (input, %s) would not be open after the flip", a.Port, fam))
			}
		}
	}
	p.Approved = len(p.Reasons) == 0
	return p
}

func allDropped(dropped map[vocab.Port]bool, proto string, from, to int) bool {
	for x := from; x <= to; x++ {
		if !dropped[vocab.Port{Num: uint16(x), Proto: proto}] {
			return false
		}
	}
	return true
}

func portSpec(o firewall.Opening) string {
	if o.PortEnd != 0 && o.PortEnd != o.Port {
		return fmt.Sprintf("%d-%d/%s", o.Port, o.PortEnd, o.Proto)
	}
	return fmt.Sprintf("%d/%s", o.Port, o.Proto)
}

func describeOpening(o firewall.Opening) string {
	s := o.Direction + ", " + o.Family
	if o.In != "" {
		s += ", in on " + o.In
	}
	if o.Out != "" {
		s += ", out by " + o.Out
	}
	if o.Via != "" {
		s += ", to " + o.Via
	}
	if o.From != "" {
		s += ", from " + o.From
	}
	if o.To != "" {
		s += ", at " + o.To
	}
	if o.Uncertain {
		s += ", uncertain"
	}
	return s
}

// stillOpen reports whether after opens port for o's direction, family,
// proto and source. An opening that is only uncertain after the flip keeps
// an opening that was uncertain before (the same undecidable condition, such
// as "came in on a container bridge"), not a sure one.
func stillOpen(after []firewall.Opening, o firewall.Opening, port uint16) bool {
	for _, a := range after {
		if !keepsTarget(a, o, port) {
			continue
		}
		if a.From != "" {
			ap, err1 := netip.ParsePrefix(a.From)
			op, err2 := netip.ParsePrefix(o.From)
			if o.From == "" || err1 != nil || err2 != nil || op.Bits() < ap.Bits() || !ap.Contains(op.Addr()) {
				continue
			}
		}
		return true
	}
	return false
}

// keepsTarget reports whether opening a after the flip opens port where o
// is open now, its sources aside: the same direction, family and protocol,
// at the same address of the node (or any), sent to the same place (or
// either unsaid), and surely where o is sure.
func keepsTarget(a, o firewall.Opening, port uint16) bool {
	switch {
	case a.Direction != o.Direction || a.Family != o.Family || a.Proto != o.Proto || port < a.Port || port > firewall.PortEnd(a):
		return false
	case a.To != "" && a.To != o.To:
		return false // open after only at another of the node's addresses
	case a.Uncertain && !o.Uncertain:
		return false
	case a.Via != o.Via && a.Via != "" && o.Via != "":
		return false // the same host port, now sent elsewhere
	}
	return true
}

// openFromFewer are the source prefixes from which after opens port for
// o's direction, family, proto and destination, where it does not open it
// from every source o is open from (stillOpen is false): the sources that
// keep it, each narrower than o's.
func openFromFewer(after []firewall.Opening, o firewall.Opening, port uint16) []string {
	var out []string
	for _, a := range after {
		if a.From == "" || a.From == o.From || !keepsTarget(a, o, port) || slices.Contains(out, a.From) {
			continue
		}
		ap, err := netip.ParsePrefix(a.From)
		if err != nil {
			continue
		}
		if o.From != "" {
			op, err := netip.ParsePrefix(o.From)
			if err != nil || ap.Bits() <= op.Bits() || !op.Contains(ap.Addr()) {
				continue
			}
		}
		out = append(out, a.From)
	}
	return out
}

// openFromSome reports whether after surely opens port at hook in family
// fam from some source.
func openFromSome(after []firewall.Opening, hook, fam string, port vocab.Port) bool {
	for _, a := range after {
		if a.Direction == hook && a.Family == fam && a.Proto == port.Proto && !a.Uncertain && a.Port <= port.Num && port.Num <= firewall.PortEnd(a) {
			return true
		}
	}
	return false
}

// widenings adds a widening fate for every region where the ruleset after
// the flip lets a new connection through that found does not (or surely
// where found does only under an undecided condition). Each refuses unless
// every port of it is in spec.Widen.
func widenings(p *Preview, pair *eval.Pair, derived *firewall.Ruleset, spec MeshSpec, node firewall.Node) {
	found := pair.Before()
	widen := map[vocab.Port]bool{}
	for _, w := range spec.Widen {
		widen[w] = true
	}
	for _, w := range pair.Widened(node) {
		o := w.Opening
		f := Fate{Opening: o, Fate: FateWidening, By: keeper(derived, o, o.Port)}
		from := "any source"
		if o.From != "" {
			from = o.From
		}
		if w.Surer {
			f.Reason = "passes now only under a condition the evaluator cannot decide, and after the flip without it"
			if why := eval.Undecided(found, o.Direction, o.Family, o.Proto, o.Port); len(why) > 0 {
				f.Reason += " (" + strings.Join(why, "; ") + "): that restriction cannot be carried"
			}
		} else {
			f.Reason = "passes after the flip from " + from + ", which the found firewall does not let through"
		}
		all := true
		for x := int(o.Port); x <= int(firewall.PortEnd(o)); x++ {
			if !widen[vocab.Port{Num: uint16(x), Proto: o.Proto}] {
				all = false
				break
			}
		}
		f.Declared = all
		p.Fates = append(p.Fates, f)
		if !all {
			p.Reasons = append(p.Reasons, fmt.Sprintf("%s (%s) would widen: %s; carry the restriction, or declare the port in flip.widen", portSpec(o), describeOpening(o), f.Reason))
		}
	}
}

// keeper names the owner of the derived rule that accepts a new connection
// to (proto, port): the first rule that surely matches, else the first that
// may.
func keeper(derived *firewall.Ruleset, o firewall.Opening, port uint16) string {
	hook := o.Direction
	src := eval.Atom{Other: true}
	if pfx, err := netip.ParsePrefix(o.From); err == nil {
		src = eval.Atom{Prefix: pfx}
	}
	pkt := eval.Packet{Hook: hook, Family: o.Family, Proto: marks.L4num(o.Proto), Port: port, OrigPort: port, Src: src}
	if hook == firewall.HookForward && !o.Routed() {
		// A published port: DNATed, its original port the host port.
		pkt.Dnat = true
	}
	maybe := ""
	for _, t := range derived.Tables {
		for _, ch := range t.Chains {
			if ch.Hook != hook {
				continue
			}
			for _, r := range ch.Rules {
				if r.Verdict.Kind != firewall.VerdictAccept || r.VMap != nil {
					continue
				}
				m := eval.TriTrue
				for i := range r.Conds {
					switch pkt.Cond(&r.Conds[i]) {
					case eval.TriFalse:
						m = eval.TriFalse
					case eval.TriUnknown:
						if m == eval.TriTrue {
							m = eval.TriUnknown
						}
					}
				}
				switch {
				case m == eval.TriTrue:
					return ownerOf(r.Comment)
				case m == eval.TriUnknown && maybe == "":
					maybe = ownerOf(r.Comment)
				}
			}
		}
	}
	return maybe
}
