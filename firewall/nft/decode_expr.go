// This file holds the decoder of native nftables expressions: what each
// register holds while a rule is read (meta, payload, ct, fib, immediate,
// bitwise) and the conditions comparisons on them make.

package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// field is what a register holds while a rule is decoded.
type field struct {
	kind string // see loadedFrom
	// for addresses: how many bytes of the address were loaded (prefix)
	len int
	// mask applied by a bitwise expression (nil: none)
	mask []byte
	// for exthdr: whether the expression loads only presence
	present bool
	desc    string
	// for an immediate: the value (a NAT statement reads its address and
	// port from registers loaded this way)
	data []byte
}

// Decoder decodes the rules of one chain into the model, knowing the
// table's family and its sets.
type Decoder struct {
	Family    string
	Sets      map[string]*firewall.Set
	SetsKnown bool
	// IPSets are the namespace's ipsets by index, for "-m set" matches;
	// nil: not read (a match on one is then undecidable).
	IPSets map[uint16]*IPSet
}

type ruleState struct {
	r       firewall.Rule
	regs    map[uint32]field
	nfproto string // network family known from an earlier nfproto/protocol match
	verdict bool
}

// normReg maps the 128-bit register numbers onto the 32-bit ones they overlay.
func normReg(r uint32) uint32 {
	if r >= 1 && r <= 4 {
		return 8 + (r-1)*4
	}
	return r
}

// Rule decodes one rule; what it cannot decode is kept as unknown.
func (d *Decoder) Rule(nr *nftables.Rule) firewall.Rule {
	st := &ruleState{regs: map[uint32]field{}, r: firewall.Rule{Handle: nr.Handle, Verdict: firewall.Verdict{Kind: firewall.VerdictContinue}}}
	if d.Family != firewall.FamilyInet {
		st.nfproto = d.Family
	}
	if c, ok := userdata.GetString(nr.UserData, userdata.TypeComment); ok {
		st.r.Comment = c
	}
	for _, e := range nr.Exprs {
		d.expr(st, e)
	}
	return st.r
}

func (st *ruleState) undecidable(reason string) {
	st.r.Unknown = append(st.r.Unknown, reason)
	st.r.Conds = append(st.r.Conds, firewall.Cond{Kind: firewall.CondUndecidable, Reason: reason})
}

func (st *ruleState) note(reason string) { st.r.Unknown = append(st.r.Unknown, reason) }

func (st *ruleState) setVerdict(v firewall.Verdict) {
	st.r.Verdict = v
	st.verdict = true
}

func (st *ruleState) read(reg uint32) (field, bool) {
	f, ok := st.regs[normReg(reg)]
	if !ok {
		st.undecidable(fmt.Sprintf("reads register %d that no decoded expression loaded (google/nftables drops expressions it cannot decode)", reg))
	}
	return f, ok
}

func (st *ruleState) load(reg uint32, f field) { st.regs[normReg(reg)] = f }

func (d *Decoder) expr(st *ruleState, e expr.Any) {
	if w := writes(e); w != "" {
		st.r.Writes = append(st.r.Writes, w)
	}
	switch e := e.(type) {
	case *expr.Meta:
		if e.SourceRegister {
			return // meta set: a side effect, no condition
		}
		var f field
		switch e.Key {
		case expr.MetaKeyL4PROTO:
			f = field{kind: "l4proto"}
		case expr.MetaKeyNFPROTO:
			f = field{kind: "nfproto"}
		case expr.MetaKeyPROTOCOL:
			f = field{kind: "ethproto"}
		case expr.MetaKeyIIFNAME:
			f = field{kind: "iifname"}
		case expr.MetaKeyOIFNAME:
			f = field{kind: "oifname"}
		case expr.MetaKeyPKTTYPE:
			f = field{kind: "pkttype"}
		case expr.MetaKeyIIF:
			f = field{kind: "iif"}
		case expr.MetaKeyOIF:
			f = field{kind: "oif"}
		default:
			f = field{kind: "other", desc: fmt.Sprintf("meta key %d", e.Key)}
		}
		st.load(e.Register, f)
	case *expr.Payload:
		if e.OperationType != expr.PayloadLoad {
			return // payload write: mangling, not filtering
		}
		st.load(e.DestRegister, d.payload(st, e))
	case *expr.Ct:
		if e.SourceRegister {
			return
		}
		switch {
		case e.Key == expr.CtKeySTATE:
			st.load(e.Register, field{kind: "ctstate"})
		case e.Key == expr.CtKeySTATUS:
			st.load(e.Register, field{kind: "ctstatus"})
		case e.Key == expr.CtKeyPROTODST && e.Direction == 0:
			// "ct original proto-dst": the port the client used, before a DNAT
			st.load(e.Register, field{kind: "origdport"})
		default:
			st.load(e.Register, field{kind: "other", desc: fmt.Sprintf("ct key %d", e.Key)})
		}
	case *expr.Fib:
		switch {
		case e.ResultADDRTYPE && !e.FlagIIF && !e.FlagOIF && !e.FlagMARK && e.FlagDADDR:
			st.load(e.Register, field{kind: "fibdaddr"})
		case e.ResultADDRTYPE && !e.FlagIIF && !e.FlagOIF && !e.FlagMARK && e.FlagSADDR:
			st.load(e.Register, field{kind: "fibsaddr"})
		default:
			st.load(e.Register, field{kind: "other", desc: "fib lookup (route or interface result)"})
		}
	case *expr.Exthdr:
		if e.SourceRegister != 0 {
			return
		}
		if e.Op == expr.ExthdrOpIpv6 {
			st.load(e.DestRegister, field{kind: "exthdr6", present: e.Flags&unix.NFT_EXTHDR_F_PRESENT != 0, desc: fmt.Sprintf("ipv6 extension header %d", e.Type)})
		} else {
			st.load(e.DestRegister, field{kind: "other", desc: fmt.Sprintf("extension header op %d type %d", e.Op, e.Type)})
		}
	case *expr.Immediate:
		st.load(e.Register, field{kind: "immediate", desc: "immediate value", data: append([]byte(nil), e.Data...)})
	case *expr.Bitwise:
		f, ok := st.read(e.SourceRegister)
		if !ok {
			return
		}
		if len(bytes.Trim(e.Xor, "\x00")) != 0 {
			f = field{kind: "other", desc: "bitwise with xor on " + f.kind}
		} else if f.mask != nil {
			m := make([]byte, len(e.Mask))
			for i := range m {
				if i < len(f.mask) {
					m[i] = e.Mask[i] & f.mask[i]
				}
			}
			f.mask = m
		} else {
			f.mask = append([]byte(nil), e.Mask...)
		}
		st.load(e.DestRegister, f)
	case *expr.Cmp:
		f, ok := st.read(e.Register)
		if !ok {
			return
		}
		d.cmp(st, f, e.Op, e.Data)
	case *expr.Range:
		f, ok := st.read(e.Register)
		if !ok {
			return
		}
		d.rangeExpr(st, f, e)
	case *expr.Lookup:
		f, ok := st.read(e.SourceRegister)
		if !ok {
			return
		}
		d.lookup(st, f, e)
	case *expr.Verdict:
		st.setVerdict(verdictOf(e))
	case *expr.Reject:
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictReject})
	case *expr.Counter, *expr.Log, *expr.Notrack, *expr.FlowOffload, *expr.CtHelper, *expr.CtExpect, *expr.CtTimeout, *expr.SecMark:
		// no effect on the verdict
	case *expr.Objref:
		// NFT_OBJECT_* numbers: counter 1, quota 2, ct helper 3, limit 4,
		// connlimit 5, tunnel 6, ct timeout 7, secmark 8, ct expect 9, synproxy 10.
		switch e.Type {
		case 1, 3, 6, 7, 8, 9:
			// no effect on whether the rule matches
		case 10:
			st.setVerdict(firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "synproxy"})
		default:
			st.undecidable(fmt.Sprintf("stateful object %q (type %d)", e.Name, e.Type))
		}
	case *expr.Limit:
		st.undecidable(fmt.Sprintf("limit rate %d/%ds", e.Rate, e.Unit))
	case *expr.Quota:
		st.undecidable("quota")
	case *expr.Connlimit:
		st.undecidable("connlimit")
	case *expr.Dynset:
		if len(e.Exprs) > 0 {
			st.undecidable(fmt.Sprintf("meter on set %s with stateful expressions", e.SetName))
		} else {
			st.note(fmt.Sprintf("updates set %s (ignored: a side effect)", e.SetName))
		}
	case *expr.NAT:
		if e.Type == expr.NATTypeDestNAT {
			st.setVerdict(firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: st.natTarget(e)})
			return
		}
		// A NAT statement ends the base chain like accept (nf_nat returns NF_ACCEPT).
		st.note("nat statement treated as accept")
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictAccept})
	case *expr.Redir:
		t := &firewall.NATTarget{Local: true}
		if e.RegisterProtoMin != 0 {
			t.PortMin, t.PortMax = st.immPort(e.RegisterProtoMin, e.RegisterProtoMax, t)
		}
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: t})
	case *expr.Masq:
		st.note("nat statement treated as accept")
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictAccept})
	case *expr.Queue:
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "queue"})
	case *expr.SynProxy:
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictUnknown, Target: "synproxy"})
	case *expr.Hash, *expr.Numgen:
		st.load(regOf(e), field{kind: "other", desc: fmt.Sprintf("%T", e)})
	case *expr.Match:
		d.match(st, e)
	case *expr.Target:
		d.target(st, e)
	default:
		st.undecidable(fmt.Sprintf("expression %T not decoded", e))
	}
}

func regOf(e expr.Any) uint32 {
	switch e := e.(type) {
	case *expr.Hash:
		return e.DestRegister
	case *expr.Numgen:
		return e.Register
	}
	return 0
}

func (d *Decoder) payload(st *ruleState, p *expr.Payload) field {
	off, l := int(p.Offset), int(p.Len)
	switch p.Base {
	case expr.PayloadBaseTransportHeader:
		switch {
		case off == 0 && l == 2:
			return field{kind: "sport"}
		case off == 2 && l == 2:
			return field{kind: "dport"}
		case off == 0 && l == 4:
			// iptables-nft loads "--sport A --dport B" as one 4-byte word
			return field{kind: "ports"}
		case off == 13 && l == 1:
			return field{kind: "tcpflags"}
		case off == 0 && l == 1 && st.icmp():
			return field{kind: "icmptype"}
		}
	case expr.PayloadBaseNetworkHeader:
		switch st.nfproto {
		case firewall.FamilyIP:
			switch {
			case off == 9 && l == 1:
				return field{kind: "l4proto"}
			case off == 8 && l == 1:
				return field{kind: "hoplimit"}
			case off == 12 && l >= 1 && l <= 4:
				return field{kind: "saddr", len: l}
			case off == 16 && l >= 1 && l <= 4:
				return field{kind: "daddr", len: l}
			}
		case firewall.FamilyIP6:
			switch {
			case off == 6 && l == 1:
				return field{kind: "l4proto"} // nexthdr: the synthetic packet has no extension headers
			case off == 7 && l == 1:
				return field{kind: "hoplimit"}
			case off == 8 && l >= 1 && l <= 16:
				return field{kind: "saddr", len: l}
			case off == 24 && l >= 1 && l <= 16:
				return field{kind: "daddr", len: l}
			}
		}
	}
	return field{kind: "other", desc: fmt.Sprintf("payload base %d offset %d len %d", p.Base, off, l)}
}

func (d *Decoder) cmp(st *ruleState, f field, op expr.CmpOp, data []byte) {
	neg := op == expr.CmpOpNeq
	eqLike := op == expr.CmpOpEq || op == expr.CmpOpNeq
	switch f.kind {
	case "l4proto":
		if eqLike && len(data) == 1 && f.mask == nil {
			st.add(firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{int(data[0])}, Negate: neg})
			return
		}
	case "nfproto", "ethproto":
		if eqLike && f.mask == nil {
			fam := ""
			switch {
			case f.kind == "nfproto" && len(data) == 1 && data[0] == unix.NFPROTO_IPV4,
				f.kind == "ethproto" && len(data) == 2 && binary.BigEndian.Uint16(data) == unix.ETH_P_IP:
				fam = firewall.FamilyIP
			case f.kind == "nfproto" && len(data) == 1 && data[0] == unix.NFPROTO_IPV6,
				f.kind == "ethproto" && len(data) == 2 && binary.BigEndian.Uint16(data) == unix.ETH_P_IPV6:
				fam = firewall.FamilyIP6
			}
			if fam != "" {
				if !neg && st.nfproto == "" {
					st.nfproto = fam
				}
				st.add(firewall.Cond{Kind: firewall.CondNFProto, Family: fam, Negate: neg})
				return
			}
		}
	case "sport", "dport", "origdport":
		if len(data) == 2 && f.mask == nil {
			v := binary.BigEndian.Uint16(data)
			var pr firewall.PortRange
			switch op {
			case expr.CmpOpEq, expr.CmpOpNeq:
				pr = firewall.PortRange{From: v, To: v}
			case expr.CmpOpLt:
				if v == 0 {
					st.add(firewall.Cond{Kind: firewall.CondNever, Reason: "port < 0"})
					return
				}
				pr = firewall.PortRange{From: 0, To: v - 1}
			case expr.CmpOpLte:
				pr = firewall.PortRange{From: 0, To: v}
			case expr.CmpOpGt:
				if v == 65535 {
					st.add(firewall.Cond{Kind: firewall.CondNever, Reason: "port > 65535"})
					return
				}
				pr = firewall.PortRange{From: v + 1, To: 65535}
			case expr.CmpOpGte:
				pr = firewall.PortRange{From: v, To: 65535}
			}
			st.add(firewall.Cond{Kind: firewall.CondKind(f.kind), Ports: []firewall.PortRange{pr}, Negate: neg})
			return
		}
	case "ports":
		if op == expr.CmpOpEq && len(data) == 4 && f.mask == nil {
			sp, dp := binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
			st.add(firewall.Cond{Kind: firewall.CondSport, Ports: []firewall.PortRange{{From: sp, To: sp}}})
			st.add(firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: dp, To: dp}}})
			return
		}
	case "saddr", "daddr":
		if eqLike {
			if p, ok := prefixFrom(st.nfproto, f, data); ok {
				st.add(firewall.Cond{Kind: firewall.CondKind(f.kind), Prefixes: []netip.Prefix{p}, Negate: neg})
				return
			}
		}
	case "iifname", "oifname":
		if eqLike && f.mask == nil {
			st.add(firewall.Cond{Kind: firewall.CondKind(f.kind), Names: []string{ifname(data)}, Negate: neg})
			return
		}
	case "iif", "oif":
		// Interface indexes differ per node, except lo's, which is 1 in
		// every namespace ("iif lo accept").
		if eqLike && f.mask == nil && len(data) == 4 && binary.NativeEndian.Uint32(data) == 1 {
			st.add(firewall.Cond{Kind: firewall.CondKind(f.kind + "name"), Names: []string{"lo"}, Negate: neg})
			return
		}
	case "ctstate", "ctstatus", "fibdaddr", "fibsaddr", "pkttype":
		if eqLike {
			if c, ok := bitsCond(f, op, data); ok {
				st.add(c)
				return
			}
		}
	case "icmptype":
		if eqLike && len(data) == 1 && f.mask == nil {
			st.add(firewall.Cond{Kind: firewall.CondICMPType, Types: []int{int(data[0])}, Negate: neg})
			return
		}
		if len(data) == 1 && f.mask == nil {
			// A type range, as nft writes "icmp type 13-255": two
			// comparisons, each a condition.
			lo, hi := 0, 255
			switch v := int(data[0]); op {
			case expr.CmpOpLt:
				hi = v - 1
			case expr.CmpOpLte:
				hi = v
			case expr.CmpOpGt:
				lo = v + 1
			case expr.CmpOpGte:
				lo = v
			}
			c := firewall.Cond{Kind: firewall.CondICMPType, Types: []int{}}
			for t := lo; t <= hi; t++ {
				c.Types = append(c.Types, t)
			}
			if len(c.Types) == 0 {
				c = firewall.Cond{Kind: firewall.CondNever, Reason: "an empty ICMP type range"}
			}
			st.add(c)
			return
		}
	case "hoplimit":
		if eqLike && len(data) == 1 && f.mask == nil {
			mode := uint8(0)
			if neg {
				mode = 1
			}
			st.add(firewall.Cond{Kind: firewall.CondHopLimit, Mask: mode, Value: data[0]})
			return
		}
	case "tcpflags":
		if eqLike && len(data) == 1 {
			m := uint8(0xff)
			if len(f.mask) == 1 {
				m = f.mask[0]
			}
			st.add(firewall.Cond{Kind: firewall.CondTCPFlags, Mask: m, Value: data[0] & m, Negate: neg})
			return
		}
	case "exthdr6":
		// The synthetic packet carries no extension header: a presence
		// load yields 0, a value load breaks the rule.
		if !f.present {
			st.add(firewall.Cond{Kind: firewall.CondNever, Reason: f.desc + " absent from the packet"})
			return
		}
		zero := len(bytes.Trim(data, "\x00")) == 0
		if (op == expr.CmpOpEq && zero) || (op == expr.CmpOpNeq && !zero) {
			return // always true for a packet without the header
		}
		if eqLike {
			st.add(firewall.Cond{Kind: firewall.CondNever, Reason: f.desc + " absent from the packet"})
			return
		}
	}
	st.undecidable(fmt.Sprintf("cmp op %d on %s", op, describe(f)))
}

func describe(f field) string {
	if f.desc != "" {
		return f.desc
	}
	if f.mask != nil {
		return f.kind + " (masked)"
	}
	return f.kind
}

func (st *ruleState) add(c firewall.Cond) { st.r.Conds = append(st.r.Conds, c) }

// icmp reports whether the rule so far holds only for ICMP or ICMPv6 (a
// protocol dependency "meta l4proto icmp"): the first byte of the
// transport header is then the ICMP type.
func (st *ruleState) icmp() bool {
	for _, c := range st.r.Conds {
		if c.Kind == firewall.CondL4Proto && !c.Negate && len(c.Protos) > 0 {
			all := true
			for _, p := range c.Protos {
				all = all && (p == unix.IPPROTO_ICMP || p == unix.IPPROTO_ICMPV6)
			}
			if all {
				return true
			}
		}
	}
	return false
}

// bitsCond decodes a comparison on a host-endian 32-bit (or 8-bit pkttype)
// value whose possible values are small enumerations or flags.
func bitsCond(f field, op expr.CmpOp, data []byte) (firewall.Cond, bool) {
	kind, addr := firewall.CondCtState, ""
	switch f.kind {
	case "fibdaddr":
		kind, addr = firewall.CondAddrType, "daddr"
	case "fibsaddr":
		kind, addr = firewall.CondAddrType, "saddr"
	case "pkttype":
		kind = firewall.CondPktType
	}
	neg := op == expr.CmpOpNeq
	v, ok := hostUint(data)
	if !ok {
		return firewall.Cond{}, false
	}
	if f.kind == "ctstatus" {
		// Only "ct status & M != 0" (nft's "ct status dnat") is a question
		// the evaluator can answer.
		m, ok := hostUint(f.mask)
		if f.mask == nil || !ok || v != 0 {
			return firewall.Cond{}, false
		}
		return firewall.Cond{Kind: firewall.CondCtStatus, Bits: m, Negate: !neg}, true
	}
	if f.kind == "ctstate" {
		if f.mask != nil {
			m, ok := hostUint(f.mask)
			if !ok || v != 0 {
				return firewall.Cond{}, false
			}
			// ct state & M != 0  <=>  the packet's state bit is in M
			return firewall.Cond{Kind: kind, Bits: m, Negate: !neg}, true
		}
		if bits.OnesCount32(v) != 1 {
			return firewall.Cond{Kind: firewall.CondNever, Reason: "ct state equal to several states"}, !neg
		}
		return firewall.Cond{Kind: kind, Bits: v, Negate: neg}, true
	}
	if f.mask != nil || v >= 32 {
		return firewall.Cond{}, false
	}
	return firewall.Cond{Kind: kind, Addr: addr, Bits: 1 << v, Negate: neg}, true
}

func hostUint(b []byte) (uint32, bool) {
	switch len(b) {
	case 1:
		return uint32(b[0]), true
	case 2:
		return uint32(binary.NativeEndian.Uint16(b)), true
	case 4:
		return binary.NativeEndian.Uint32(b), true
	}
	return 0, false
}

func ifname(data []byte) string {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return string(data[:i])
	}
	// no terminating NUL: a prefix match, written "eth*" by nft and "eth+" by iptables
	return string(data) + "*"
}

// prefixFrom turns the data of a comparison on a (possibly partial, possibly
// masked) address load into a prefix.
func prefixFrom(fam string, f field, data []byte) (netip.Prefix, bool) {
	size := 4
	if fam == firewall.FamilyIP6 {
		size = 16
	} else if fam != firewall.FamilyIP {
		return netip.Prefix{}, false
	}
	if len(data) != f.len || f.len > size {
		return netip.Prefix{}, false
	}
	nbits := f.len * 8
	buf := make([]byte, size)
	copy(buf, data)
	if f.mask != nil {
		if len(f.mask) != f.len {
			return netip.Prefix{}, false
		}
		n := 0
		for _, b := range f.mask {
			n += bits.LeadingZeros8(^b)
			if b != 0xff {
				break
			}
		}
		// the mask must be contiguous
		for i := range f.mask {
			want := byte(0)
			switch {
			case (i+1)*8 <= n:
				want = 0xff
			case i*8 < n:
				want = ^byte(0xff >> (n - i*8))
			}
			if f.mask[i] != want {
				return netip.Prefix{}, false
			}
		}
		nbits = n
	}
	a, ok := netip.AddrFromSlice(buf)
	if !ok {
		return netip.Prefix{}, false
	}
	p, err := a.Prefix(nbits)
	if err != nil {
		return netip.Prefix{}, false
	}
	return p, true
}

func (d *Decoder) rangeExpr(st *ruleState, f field, e *expr.Range) {
	neg := e.Op == expr.CmpOpNeq
	if e.Op == expr.CmpOpEq || neg {
		switch f.kind {
		case "sport", "dport", "origdport":
			if f.mask == nil && len(e.FromData) == 2 && len(e.ToData) == 2 {
				st.add(firewall.Cond{Kind: firewall.CondKind(f.kind), Negate: neg, Ports: []firewall.PortRange{{From: binary.BigEndian.Uint16(e.FromData), To: binary.BigEndian.Uint16(e.ToData)}}})
				return
			}
		case "icmptype":
			if f.mask == nil && len(e.FromData) == 1 && len(e.ToData) == 1 && e.FromData[0] <= e.ToData[0] {
				c := firewall.Cond{Kind: firewall.CondICMPType, Negate: neg}
				for t := int(e.FromData[0]); t <= int(e.ToData[0]); t++ {
					c.Types = append(c.Types, t)
				}
				st.add(c)
				return
			}
		case "saddr", "daddr":
			if f.mask == nil {
				if ps, ok := RangePrefixes(e.FromData, e.ToData); ok {
					st.add(firewall.Cond{Kind: firewall.CondKind(f.kind), Negate: neg, Prefixes: ps})
					return
				}
			}
		}
	}
	st.undecidable("range on " + describe(f))
}
