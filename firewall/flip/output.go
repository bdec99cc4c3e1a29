// This file holds the found firewall's restriction of what the node sends
// (its output hook): read from found (OutputDrop), carried into an output
// chain of table inet adoption, and the preview's fate of it per family,
// protocol, port and destination region.

package flip

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/firewall/marks"
	"adoption/vocab"
)

// OutputDrop is flipwire.OutputDrop.
type OutputDrop = flipwire.OutputDrop

// outputSpellings are the regions the output chain judges besides TCP
// and UDP by port: ICMP and ICMPv6 echo requests, ESP, GRE and SCTP.
var outputSpellings = []string{"ip icmp type 8", "ip6 icmpv6 type 128", "ip esp", "ip6 esp", "ip gre", "ip6 gre", "ip sctp", "ip6 sctp"}

// outputClasses are outputSpellings' regions.
func outputClasses() []eval.Class {
	var out []eval.Class
	for _, s := range outputSpellings {
		cs, _ := vocab.ParseRegion(s)
		out = append(out, cs...)
	}
	return out
}

// foundOutput reads what found's output hook keeps the node from sending
// to the outside (eval.OutputAsInput: destinations as regions), per output
// interface class (outputIfaces), family, TCP and UDP port interval, and
// outputClasses, where some destination is surely dropped. Nil when found
// lets every new packet out (eval.OutputDrops names nothing). What found
// drops only under a condition the evaluator cannot decide is not
// carried: the preview names it.
func foundOutput(found *firewall.Ruleset) []OutputDrop {
	drops := eval.OutputDrops(found)
	if len(drops[firewall.FamilyIP]) == 0 && len(drops[firewall.FamilyIP6]) == 0 {
		return nil
	}
	m := eval.OutputAsInput(found)
	names := outputIfaces(m)
	var out []OutputDrop
	for _, c := range ifaceClasses(eval.NewReacher(m, firewall.Node{}), names) {
		oif, not := c.name, names
		if oif != "" {
			not = nil
			for _, n := range names {
				if n != oif && covers(oif, n) {
					not = append(not, n)
				}
			}
		}
		out = append(out, outputDrops(c.r, m, oif, not)...)
	}
	for i := range out {
		if out[i].PortEnd == out[i].Port {
			out[i].PortEnd = 0
		}
	}
	return out
}

// outputIfaces are the output interfaces and wildcards the output chains
// of found, seen as input (eval.OutputAsInput), name, but "lo" (the mesh's
// output chain lets loopback out first): each is a class of its own.
func outputIfaces(m *firewall.Ruleset) []string {
	return namedIfaces(m, firewall.CondIifname)
}

// outputDrops are foundOutput's drops of one output interface class,
// read by x on m (found's output as input), holding on oif but not on
// not.
func outputDrops(x *eval.Reacher, m *firewall.Ruleset, oif string, not []string) []OutputDrop {
	var out []OutputDrop
	add := func(d OutputDrop, s eval.SourceReach) bool {
		if s.Unsure || s.Plain() {
			return false
		}
		d.Oif, d.NotOif = oif, not
		d.Any, d.To, d.Except = s.Any, s.Only, s.Except
		out = append(out, d)
		return true
	}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, proto := range []string{"tcp", "udp"} {
			var last *OutputDrop
			var lastReach eval.SourceReach
			for start, end := range eval.PortRuns(eval.PortStarts(m, fam, proto)) {
				s := x.At(firewall.HookInput, fam, proto, uint16(start))
				if last != nil && reflect.DeepEqual(s, lastReach) {
					last.PortEnd = uint16(end)
					continue
				}
				last = nil
				if add(OutputDrop{Family: fam, Proto: proto, Port: uint16(start), PortEnd: uint16(end)}, s) {
					last, lastReach = &out[len(out)-1], s
				}
			}
		}
		for _, c := range outputClasses() {
			if c.Family == fam {
				add(OutputDrop{Family: fam, Class: c.Spelling()}, x.Class(c))
			}
		}
	}
	return out
}

// outputRules are the output chain's rules for spec.Output (nil: no output
// chain): established/related and loopback pass, then per OutputDrop
// "[oifname O] [oifname != N ...] meta nfproto F [F daddr [!=] @S] meta
// l4proto P [th dport N | icmp type T] drop". The chain's policy is
// accept: what found lets out passes.
func outputRules(spec MeshSpec) ([]derivedRule, []derivedSet) {
	if len(spec.Output) == 0 {
		return nil, nil
	}
	base := func(what string) string {
		return fmt.Sprintf("%s%s:%s:%s", firewall.MarkPrefix, spec.Node, OwnerEssentials, what)
	}
	rules := []derivedRule{
		{chain: firewall.HookOutput, exprs: marks.CtBits(expr.CtKeySTATE, firewall.CtStateEstablished|firewall.CtStateRelated, expr.VerdictAccept),
			comment: base("established"), text: "ct state established,related accept"},
		{chain: firewall.HookOutput, exprs: oifname("lo"), comment: base("loopback"), text: `oifname "lo" accept`},
	}
	var sets []derivedSet
	for k, d := range spec.Output {
		nfproto, kw, off, fam := byte(unix.NFPROTO_IPV4), "ip", uint32(16), "ipv4"
		if d.Family == firewall.FamilyIP6 {
			nfproto, kw, off, fam = unix.NFPROTO_IPV6, "ip6", 24, "ipv6"
		}
		var ex []expr.Any
		text := ""
		if d.Oif != "" {
			ex = append(ex, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameData(d.Oif)})
			text += fmt.Sprintf("oifname %q ", d.Oif)
		}
		for _, n := range d.NotOif {
			ex = append(ex, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameData(n)})
			text += fmt.Sprintf("oifname != %q ", n)
		}
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}})
		text += "meta nfproto " + fam + " "
		var ps []netip.Prefix
		invert := false
		switch {
		case d.Any:
			ps = d.Except
		case len(d.To) > 0:
			ps, invert = d.To, true
		}
		if len(ps) > 0 {
			s := derivedSet{name: fmt.Sprintf("output%d_%s", k, d.Family), family: d.Family, ranges: prefixRanges(ps)}
			sets = append(sets, s)
			ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(ps[0].Addr().AsSlice()))},
				&expr.Lookup{SourceRegister: 1, SetName: s.name, Invert: invert})
			op := ""
			if invert {
				op = "!= "
			}
			text += fmt.Sprintf("%s daddr %s@%s ", kw, op, s.name)
		}
		what := ""
		if d.Class != "" {
			c, _ := eval.ClassByName(d.Family, d.Class) // validateOutput checked it
			ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Num}})
			text += fmt.Sprintf("meta l4proto %d ", c.Num)
			if c.ICMP() {
				ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
					&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{c.Type}})
				text += fmt.Sprintf("%s type %d ", c.Proto, c.Type)
			}
			what = d.Class
		} else {
			dport, dtext, ports := dportMatch(d.Port, d.PortEnd)
			ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{marks.L4num(d.Proto)}})
			ex = append(ex, dport...)
			text += fmt.Sprintf("meta l4proto %s %s", d.Proto, dtext)
			what = ports + "/" + d.Proto
		}
		ex = append(ex, &expr.Verdict{Kind: expr.VerdictDrop})
		rules = append(rules, derivedRule{chain: firewall.HookOutput, exprs: ex, comment: base("output-" + what), text: text + "drop"})
	}
	return rules, sets
}

func oifname(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameData(n)},
		&expr.Verdict{Kind: expr.VerdictAccept}}
}

// validateOutput checks spec's Output.
func validateOutput(spec MeshSpec) []error {
	var errs []error
	for _, d := range spec.Output {
		where := fmt.Sprintf("output %s %d/%s", d.Class, d.Port, d.Proto)
		if d.Class != "" {
			if _, ok := eval.ClassByName(d.Family, d.Class); !ok || d.Proto != "" {
				errs = append(errs, fmt.Errorf("%s: %q of family %q is not a region of packets of that family: %v", where, d.Class, d.Family, regionError(d.Class)))
			}
		} else if d.Proto != "tcp" && d.Proto != "udp" {
			errs = append(errs, fmt.Errorf("%s: protocol %q is not tcp or udp", where, d.Proto))
		}
		if d.PortEnd != 0 && d.PortEnd < d.Port {
			errs = append(errs, fmt.Errorf("%s: port range ends at %d, before it starts", where, d.PortEnd))
		}
		oifs := d.NotOif
		if d.Oif != "" {
			oifs = append([]string{d.Oif}, oifs...)
		}
		for _, n := range oifs {
			if err := validIfname(n, true); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		errs = append(errs, checkReach(where, Reach{Family: d.Family, From: d.To, Except: d.Except})...)
	}
	return errs
}

// outputFates gives what the node sends a fate per family, compared on
// eval.OutputAsInput of found and of the ruleset after the flip: for TCP
// and UDP per port interval and destination region (Opening.To), and for
// outputClasses. Widening where the node could send after the flip what it
// cannot now (or surely what it can now only under a condition the
// evaluator cannot decide: that restriction cannot be carried); closing
// where it could not send what it can now. Both refuse, named. With
// neither, the family's output is kept. Where either output chain names
// output interfaces, each interface class (outputIfaces: each name, and
// any other) is judged apart, its fates naming it (Opening.Out).
func outputFates(p *Preview, found, after *firewall.Ruleset) {
	mf, ma := eval.OutputAsInput(found), eval.OutputAsInput(after)
	// Each compiled once for the comparisons of every interface class.
	cmf, cma := eval.Compile(mf), eval.Compile(ma)
	forth, back := eval.NewPair(cmf, cma), eval.NewPair(cma, cmf)
	names := outputIfaces(&firewall.Ruleset{Tables: append(append([]firewall.Table(nil), mf.Tables...), ma.Tables...)})
	if len(names) == 0 {
		outputClassFates(p, forth, back, found, firewall.Node{}, "")
		return
	}
	for _, c := range append([]string{""}, names...) {
		as := c
		if as == "" {
			as = otherIface
		}
		outputClassFates(p, forth, back, found, firewall.Node{Interfaces: []firewall.Interface{{Name: as}}}, c)
	}
}

// outputClassFates are outputFates for what leaves by one output
// interface class, out ("" any other), read on node: a node whose one
// interface stands for the class (a wildcard's own name stands for the
// interfaces it matches that no other name does).
func outputClassFates(p *Preview, forth, back *eval.Pair, found *firewall.Ruleset, node firewall.Node, out string) {
	drops := eval.OutputDrops(found)
	bad := map[string]bool{}
	by := ""
	if out != "" {
		by = " by " + out
	} else if node.HasInterfaces() {
		by = " by any other interface"
	}
	add := func(o firewall.Opening, fate, reason string) {
		o.Direction = "output"
		o.Out = out
		if o.From != "" {
			o.To, o.From = o.From, ""
		}
		bad[o.Family] = true
		p.Fates = append(p.Fates, Fate{Opening: o, Fate: fate, Reason: reason})
		what := portSpec(o)
		if o.Class != "" {
			what = classSpec(o)
		}
		to := "any destination"
		if o.To != "" {
			to = o.To
		}
		p.Reasons = append(p.Reasons, fmt.Sprintf("output %s (%s, to %s%s) would be %s: %s", what, o.Family, to, by, fate, reason))
	}
	for _, w := range forth.Widened(node) {
		if w.Opening.Direction != firewall.HookInput {
			continue
		}
		reason := "the node could send it after the flip, and the found firewall does not let it out"
		if w.Surer {
			reason = "the found firewall lets it out only under a condition the evaluator cannot decide (" + strings.Join(drops[w.Opening.Family], "; ") + "): that restriction cannot be carried; remove it from the found firewall before the flip if the node may send it"
		}
		add(w.Opening, FateWidening, reason)
	}
	for _, w := range back.Widened(node) {
		if w.Opening.Direction == firewall.HookInput && !w.Surer {
			add(w.Opening, FateClosing, "the found firewall lets it out now and the mesh's output chain would drop it")
		}
	}
	for _, r := range forth.CompareClasses(node, outputSpellings) {
		if !isOutputClass(r.Class) {
			continue
		}
		o := firewall.ClassOpening(r.Class, r.From)
		switch {
		case r.After.Open && !r.After.Unsure && (!r.Before.Open || r.Before.Unsure):
			add(o, FateWidening, "the node could send it after the flip, and the found firewall does not surely let it out")
		case r.Before.Open && !r.Before.Unsure && !r.After.Open:
			add(o, FateClosing, "the found firewall lets it out now and the mesh's output chain would drop it")
		}
	}
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		if !bad[fam] {
			p.Fates = append(p.Fates, Fate{Opening: firewall.Opening{Direction: "output", Family: fam, Class: "output", Out: out}, Fate: FateKept, By: OwnerEssentials})
		}
	}
}

func isOutputClass(c eval.Class) bool {
	return c.Own && c.WithinAny(outputSpellings)
}
