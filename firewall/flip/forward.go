// This file holds the mesh's forward acceptance that the found firewall
// decides: the bridges whose egress it lets out (Egress) and the routed,
// non-DNAT forwarding it lets through from outside (Routed), each read
// from the found firewall by EffectiveSpec and written into the derived
// table's forward chain with the restriction found.

package flip

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flipwire"
	"adoption/firewall/marks"
)

// OwnerRouted is flipwire.OwnerRouted.
const OwnerRouted = flipwire.OwnerRouted

// Egress is flipwire.Egress.
type Egress = flipwire.Egress

// Routed is flipwire.Routed.
type Routed = flipwire.Routed

// foundForward reads from found what its forward hook lets through that
// the mesh must keep: the bridges whose egress it forwards
// (eval.EgressFrom), and the routed openings it surely lets through from
// outside on a node known by its ruleset (uncertain ones are not carried,
// and the preview names them closing), each with its source restriction
// (one per run of ports whose sources are alike).
func foundForward(cf *eval.Compiled, r *carrier) ([]Egress, []Routed) {
	var eg []Egress
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, n := range cf.EgressFrom(fam) {
			eg = append(eg, Egress{Family: fam, Iif: n})
		}
	}
	// The routed openings of eval.OpenPorts(found), evaluated alone: the
	// ports each family and protocol has open to some source.
	type famProto struct{ fam, proto string }
	open := map[famProto][]firewall.Opening{}
	for _, o := range cf.Routed() {
		if o.Routed() && !o.Uncertain {
			k := famProto{o.Family, o.Proto}
			open[k] = append(open[k], o)
		}
	}
	// An opening says what any source not named reaches, not which of
	// them do not: "80 from any" and "0-65535 from all but X" are one
	// opening, 0-65535. Its sources are read on every port interval of
	// found within it, and an interval whose sources differ from the one
	// before it is carried on its own (80 from all, the rest but X).
	var rt []Routed
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		for _, proto := range []string{"tcp", "udp"} {
			os := open[famProto{fam, proto}]
			if len(os) == 0 {
				continue
			}
			var bounds []int
			for _, o := range os {
				bounds = append(bounds, int(o.Port), int(firewall.PortEnd(o))+1)
			}
			var last *Routed
			for start, end := range eval.PortRuns(eval.PortCuts(fam, proto, []*firewall.Ruleset{cf.Ruleset()}, bounds...)) {
				if !slices.ContainsFunc(os, func(o firewall.Opening) bool {
					return int(o.Port) <= start && start <= int(firewall.PortEnd(o))
				}) {
					last = nil
					continue
				}
				s := r.zero.At(eval.DirRouted, fam, proto, uint16(start))
				if s.Unsure || !s.Open() {
					last = nil
					continue
				}
				if last != nil && slices.Equal(last.From, s.Only) && slices.Equal(last.Except, s.Except) {
					last.PortEnd = uint16(end)
					continue
				}
				rt = append(rt, Routed{Family: fam, Proto: proto, Port: uint16(start), PortEnd: uint16(end), From: s.Only, Except: s.Except})
				last = &rt[len(rt)-1]
			}
		}
	}
	for i := range rt {
		if rt[i].PortEnd == rt[i].Port {
			rt[i].PortEnd = 0
		}
	}
	return eg, rt
}

// forwardRules are the forward chain's rules for spec's Egress and Routed.
func forwardRules(spec MeshSpec) ([]derivedRule, []derivedSet) {
	var rules []derivedRule
	var sets []derivedSet
	egress := fmt.Sprintf("%s%s:%s:egress", firewall.MarkPrefix, spec.Node, OwnerContainers)
	for _, e := range spec.Egress {
		ex, text, _ := carriedExprs("egress", Reach{Family: e.Family}, 0)
		rules = append(rules, derivedRule{chain: firewall.HookForward, exprs: append(ex, marks.Iifname(e.Iif, expr.VerdictAccept)...), comment: egress,
			text: text + fmt.Sprintf("iifname %q accept", e.Iif)})
	}
	for k, r := range spec.Routed {
		dport, dtext, ports := dportMatch(r.Port, r.PortEnd)
		// Sets are named by the first port, and k keeps two routed
		// openings of one port (another family) apart.
		ex, text, ss := carriedExprs(fmt.Sprintf("%s_%d_%s", OwnerRouted, r.Port, r.Proto), Reach{Family: r.Family, From: r.From, Except: r.Except}, k)
		sets = append(sets, ss...)
		// Not DNATed: a published port's fate is its Forward allow's.
		ex = append(ex,
			&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(firewall.IpsDstNAT), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{marks.L4num(r.Proto)}})
		ex = append(append(ex, dport...), &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
		rules = append(rules, derivedRule{chain: firewall.HookForward, exprs: ex,
			comment: fmt.Sprintf("%s%s:%s:%s/%s", firewall.MarkPrefix, spec.Node, OwnerRouted, ports, r.Proto),
			text:    text + fmt.Sprintf("ct status & dnat == 0 meta l4proto %s %scounter accept", r.Proto, dtext)})
	}
	icmpRules, icmpSets := forwardICMPRules(spec)
	return append(rules, icmpRules...), append(sets, icmpSets...)
}

// dportMatch is the destination port match of port..end (end below port:
// port alone): its expressions, its nft text ("th dport 53 ", nothing for
// every port) and the ports as a comment names them ("53", "6000-6010").
func dportMatch(port, end uint16) ([]expr.Any, string, string) {
	if end < port {
		end = port
	}
	ports := fmt.Sprint(port)
	if end != port {
		ports = fmt.Sprintf("%d-%d", port, end)
	}
	switch {
	case port == 0 && end == 65535:
		return nil, "", ports // every port: nft writes no port match
	case end == port:
		return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)}}, "th dport " + ports + " ", ports
	}
	// As nft writes a range (two comparisons, not a range expression), so
	// the table the boot file's "nft -f" loads is the flip's.
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: binaryutil.BigEndian.PutUint16(end)}}, "th dport " + ports + " ", ports
}

// validateForward checks spec's Egress, Routed and ForwardICMP.
func validateForward(spec MeshSpec) []error {
	errs := validForwardICMP(spec)
	fam := func(f string) bool { return f == firewall.FamilyIP || f == firewall.FamilyIP6 }
	for _, e := range spec.Egress {
		if !fam(e.Family) {
			errs = append(errs, fmt.Errorf("egress from %q: family %q is not ip or ip6", e.Iif, e.Family))
		}
		if err := validIfname(e.Iif, true); err != nil {
			errs = append(errs, fmt.Errorf("egress: %w", err))
		}
	}
	for _, r := range spec.Routed {
		where := fmt.Sprintf("routed %d/%s", r.Port, r.Proto)
		if !fam(r.Family) {
			errs = append(errs, fmt.Errorf("%s: family %q is not ip or ip6", where, r.Family))
		}
		if r.Proto != "tcp" && r.Proto != "udp" {
			errs = append(errs, fmt.Errorf("%s: protocol %q is not tcp or udp", where, r.Proto))
		}
		if r.PortEnd != 0 && r.PortEnd < r.Port {
			errs = append(errs, fmt.Errorf("%s: port range ends at %d, before it starts", where, r.PortEnd))
		}
		for _, q := range append(append([]netip.Prefix(nil), r.From...), r.Except...) {
			if !q.IsValid() || q.Addr().Is4() != (r.Family == firewall.FamilyIP) || q.Addr().Is4In6() {
				errs = append(errs, fmt.Errorf("%s: source %s is not a prefix of family %s", where, q, r.Family))
			}
		}
	}
	return errs
}

// validIfname checks an interface name as nft matches it (a trailing '*'
// a prefix match where wildcard allows it).
func validIfname(n string, wildcard bool) error {
	base := n
	if wildcard {
		base = strings.TrimSuffix(n, "*")
	}
	if base == "" || len(n) >= unix.IFNAMSIZ || strings.ContainsAny(base, "*\"\x00") {
		return fmt.Errorf("interface name %q is not one", n)
	}
	return nil
}
