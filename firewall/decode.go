package firewall

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// List reads the whole ruleset through c and decodes it into the model. It
// only reads: a decoded rule is never written back, because google/nftables
// silently drops expressions it cannot decode and a rewrite would change the
// rule.
func List(c *nftables.Conn) (*Ruleset, error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing nftables tables: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("listing nftables chains: %w", err)
	}
	rs := &Ruleset{}
	for _, t := range tables {
		tbl := Table{Family: familyName(t.Family), Name: t.Name}
		sets := map[string]*Set{}
		if isIPFamily(tbl.Family) {
			nsets, err := c.GetSets(t)
			if err != nil {
				// One set of a type google/nftables does not know makes the
				// whole dump fail; lookups into this table's sets then stay
				// undecidable instead of failing the listing.
				tbl.Unknown = append(tbl.Unknown, fmt.Sprintf("sets not listed: %v", err))
			}
			for _, s := range nsets {
				ms := Set{
					Name: s.Name, Anonymous: s.Anonymous, Interval: s.Interval,
					Concat: s.Concatenation, IsMap: s.IsMap, KeyLen: int(s.KeyType.Bytes),
				}
				elems, err := c.GetSetElements(s)
				if err != nil {
					tbl.Unknown = append(tbl.Unknown, fmt.Sprintf("elements of set %s not listed: %v", s.Name, err))
					continue
				}
				for _, e := range elems {
					me := SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd}
					if e.VerdictData != nil {
						v := verdictOf(e.VerdictData)
						me.Verdict = &v
					} else if s.IsMap && len(e.Val) >= 4 && !e.IntervalEnd {
						// google/nftables keeps verdict map data as raw bytes.
						if v, ok := rawVerdict(e.Val); ok {
							me.Verdict = &v
						}
					}
					ms.Elements = append(ms.Elements, me)
				}
				tbl.Sets = append(tbl.Sets, ms)
			}
			for i := range tbl.Sets {
				sets[tbl.Sets[i].Name] = &tbl.Sets[i]
			}
		}
		setsKnown := len(tbl.Unknown) == 0
		for _, ch := range chains {
			if ch.Table == nil || ch.Table.Name != t.Name || ch.Table.Family != t.Family {
				continue
			}
			mc := Chain{Name: ch.Name, Type: string(ch.Type)}
			if ch.Hooknum != nil {
				mc.Hook = hookName(tbl.Family, *ch.Hooknum)
				if ch.Priority != nil {
					mc.Priority = int(*ch.Priority)
				}
				mc.Policy = "accept"
				if ch.Policy != nil && *ch.Policy == nftables.ChainPolicyDrop {
					mc.Policy = "drop"
				}
			}
			rules, err := c.GetRules(t, ch)
			if err != nil {
				mc.Unknown = fmt.Sprintf("rules not listed: %v", err)
			}
			if isIPFamily(tbl.Family) {
				d := decoder{family: tbl.Family, sets: sets, setsKnown: setsKnown}
				for _, r := range rules {
					mc.Rules = append(mc.Rules, d.rule(r))
				}
			} else {
				for _, r := range rules {
					mc.Rules = append(mc.Rules, Rule{Handle: r.Handle, Verdict: Verdict{Kind: VerdictContinue},
						Unknown: []string{"family " + tbl.Family + " is not decoded"}})
				}
			}
			tbl.Chains = append(tbl.Chains, mc)
		}
		rs.Tables = append(rs.Tables, tbl)
	}
	return rs, nil
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return FamilyIP
	case nftables.TableFamilyIPv6:
		return FamilyIP6
	case nftables.TableFamilyINet:
		return FamilyInet
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family%d", f)
}

func isIPFamily(f string) bool { return f == FamilyIP || f == FamilyIP6 || f == FamilyInet }

func hookName(family string, h nftables.ChainHook) string {
	if family == "netdev" {
		switch h {
		case *nftables.ChainHookIngress:
			return "ingress"
		case *nftables.ChainHookEgress:
			return "egress"
		}
		return fmt.Sprintf("hook%d", h)
	}
	switch h {
	case *nftables.ChainHookPrerouting:
		return "prerouting"
	case *nftables.ChainHookInput:
		return HookInput
	case *nftables.ChainHookForward:
		return HookForward
	case *nftables.ChainHookOutput:
		return "output"
	case *nftables.ChainHookPostrouting:
		return "postrouting"
	case 5:
		return "ingress" // inet ingress (NF_INET_INGRESS)
	}
	return fmt.Sprintf("hook%d", h)
}

func verdictOf(v *expr.Verdict) Verdict {
	switch v.Kind {
	case expr.VerdictAccept:
		return Verdict{Kind: VerdictAccept}
	case expr.VerdictDrop:
		return Verdict{Kind: VerdictDrop}
	case expr.VerdictReturn:
		return Verdict{Kind: VerdictReturn}
	case expr.VerdictJump:
		return Verdict{Kind: VerdictJump, Target: v.Chain}
	case expr.VerdictGoto:
		return Verdict{Kind: VerdictGoto, Target: v.Chain}
	case expr.VerdictContinue, expr.VerdictBreak:
		return Verdict{Kind: VerdictContinue}
	}
	return Verdict{Kind: VerdictUnknown, Target: fmt.Sprintf("verdict %d", v.Kind)}
}

// rawVerdict decodes a verdict map element's value: google/nftables hands
// over the nested attributes of NFTA_DATA_VERDICT (NFTA_VERDICT_CODE, big
// endian, and NFTA_VERDICT_CHAIN) undecoded.
func rawVerdict(b []byte) (Verdict, bool) {
	var code int32
	var chain string
	found := false
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < 4 || l > len(b) {
			return Verdict{}, false
		}
		payload := b[4:l]
		switch typ {
		case unix.NFTA_VERDICT_CODE:
			if len(payload) == 4 {
				code = int32(binary.BigEndian.Uint32(payload))
				found = true
			}
		case unix.NFTA_VERDICT_CHAIN:
			chain = string(bytes.TrimRight(payload, "\x00"))
		}
		next := (l + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	if !found {
		return Verdict{}, false
	}
	return verdictOf(&expr.Verdict{Kind: expr.VerdictKind(code), Chain: chain}), true
}

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
}

type decoder struct {
	family    string
	sets      map[string]*Set
	setsKnown bool
}

type ruleState struct {
	r       Rule
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

func (d *decoder) rule(nr *nftables.Rule) Rule {
	st := &ruleState{regs: map[uint32]field{}, r: Rule{Handle: nr.Handle, Verdict: Verdict{Kind: VerdictContinue}}}
	if d.family != FamilyInet {
		st.nfproto = d.family
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
	st.r.Conds = append(st.r.Conds, Cond{Kind: CondUndecidable, Reason: reason})
}

func (st *ruleState) note(reason string) { st.r.Unknown = append(st.r.Unknown, reason) }

func (st *ruleState) setVerdict(v Verdict) {
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

func (d *decoder) expr(st *ruleState, e expr.Any) {
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
		if e.Key == expr.CtKeySTATE {
			st.load(e.Register, field{kind: "ctstate"})
		} else {
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
		st.load(e.Register, field{kind: "other", desc: "immediate value"})
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
		st.setVerdict(Verdict{Kind: VerdictReject})
	case *expr.Counter, *expr.Log, *expr.Notrack, *expr.FlowOffload, *expr.CtHelper, *expr.CtExpect, *expr.CtTimeout, *expr.SecMark:
		// no effect on the verdict
	case *expr.Objref:
		// NFT_OBJECT_* numbers: counter 1, quota 2, ct helper 3, limit 4,
		// connlimit 5, tunnel 6, ct timeout 7, secmark 8, ct expect 9, synproxy 10.
		switch e.Type {
		case 1, 3, 6, 7, 8, 9:
			// no effect on whether the rule matches
		case 10:
			st.setVerdict(Verdict{Kind: VerdictUnknown, Target: "synproxy"})
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
	case *expr.Masq, *expr.NAT, *expr.Redir:
		// A NAT statement ends the base chain like accept (nf_nat returns NF_ACCEPT).
		st.note("nat statement treated as accept")
		st.setVerdict(Verdict{Kind: VerdictAccept})
	case *expr.Queue:
		st.setVerdict(Verdict{Kind: VerdictUnknown, Target: "queue"})
	case *expr.SynProxy:
		st.setVerdict(Verdict{Kind: VerdictUnknown, Target: "synproxy"})
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

func (d *decoder) payload(st *ruleState, p *expr.Payload) field {
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
		}
	case expr.PayloadBaseNetworkHeader:
		switch st.nfproto {
		case FamilyIP:
			switch {
			case off == 9 && l == 1:
				return field{kind: "l4proto"}
			case off == 12 && l >= 1 && l <= 4:
				return field{kind: "saddr", len: l}
			case off == 16 && l >= 1 && l <= 4:
				return field{kind: "daddr", len: l}
			}
		case FamilyIP6:
			switch {
			case off == 6 && l == 1:
				return field{kind: "l4proto"} // nexthdr: the synthetic packet has no extension headers
			case off == 8 && l >= 1 && l <= 16:
				return field{kind: "saddr", len: l}
			case off == 24 && l >= 1 && l <= 16:
				return field{kind: "daddr", len: l}
			}
		}
	}
	return field{kind: "other", desc: fmt.Sprintf("payload base %d offset %d len %d", p.Base, off, l)}
}

func (d *decoder) cmp(st *ruleState, f field, op expr.CmpOp, data []byte) {
	neg := op == expr.CmpOpNeq
	eqLike := op == expr.CmpOpEq || op == expr.CmpOpNeq
	switch f.kind {
	case "l4proto":
		if eqLike && len(data) == 1 && f.mask == nil {
			st.add(Cond{Kind: CondL4Proto, Protos: []int{int(data[0])}, Negate: neg})
			return
		}
	case "nfproto", "ethproto":
		if eqLike && f.mask == nil {
			fam := ""
			switch {
			case f.kind == "nfproto" && len(data) == 1 && data[0] == unix.NFPROTO_IPV4,
				f.kind == "ethproto" && len(data) == 2 && binary.BigEndian.Uint16(data) == unix.ETH_P_IP:
				fam = FamilyIP
			case f.kind == "nfproto" && len(data) == 1 && data[0] == unix.NFPROTO_IPV6,
				f.kind == "ethproto" && len(data) == 2 && binary.BigEndian.Uint16(data) == unix.ETH_P_IPV6:
				fam = FamilyIP6
			}
			if fam != "" {
				if !neg && st.nfproto == "" {
					st.nfproto = fam
				}
				st.add(Cond{Kind: CondNFProto, Family: fam, Negate: neg})
				return
			}
		}
	case "sport", "dport":
		if len(data) == 2 && f.mask == nil {
			v := binary.BigEndian.Uint16(data)
			var pr PortRange
			switch op {
			case expr.CmpOpEq, expr.CmpOpNeq:
				pr = PortRange{v, v}
			case expr.CmpOpLt:
				if v == 0 {
					st.add(Cond{Kind: CondNever, Reason: "port < 0"})
					return
				}
				pr = PortRange{0, v - 1}
			case expr.CmpOpLte:
				pr = PortRange{0, v}
			case expr.CmpOpGt:
				if v == 65535 {
					st.add(Cond{Kind: CondNever, Reason: "port > 65535"})
					return
				}
				pr = PortRange{v + 1, 65535}
			case expr.CmpOpGte:
				pr = PortRange{v, 65535}
			}
			st.add(Cond{Kind: CondKind(f.kind), Ports: []PortRange{pr}, Negate: neg})
			return
		}
	case "ports":
		if op == expr.CmpOpEq && len(data) == 4 && f.mask == nil {
			sp, dp := binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])
			st.add(Cond{Kind: CondSport, Ports: []PortRange{{sp, sp}}})
			st.add(Cond{Kind: CondDport, Ports: []PortRange{{dp, dp}}})
			return
		}
	case "saddr", "daddr":
		if eqLike {
			if p, ok := prefixFrom(st.nfproto, f, data); ok {
				st.add(Cond{Kind: CondKind(f.kind), Prefixes: []netip.Prefix{p}, Negate: neg})
				return
			}
		}
	case "iifname", "oifname":
		if eqLike && f.mask == nil {
			st.add(Cond{Kind: CondKind(f.kind), Names: []string{ifname(data)}, Negate: neg})
			return
		}
	case "iif", "oif":
		// Interface indexes differ per node, except lo's, which is 1 in
		// every namespace ("iif lo accept").
		if eqLike && f.mask == nil && len(data) == 4 && binary.NativeEndian.Uint32(data) == 1 {
			st.add(Cond{Kind: CondKind(f.kind + "name"), Names: []string{"lo"}, Negate: neg})
			return
		}
	case "ctstate", "fibdaddr", "fibsaddr", "pkttype":
		if eqLike {
			if c, ok := bitsCond(f, op, data); ok {
				st.add(c)
				return
			}
		}
	case "tcpflags":
		if eqLike && len(data) == 1 {
			m := uint8(0xff)
			if len(f.mask) == 1 {
				m = f.mask[0]
			}
			st.add(Cond{Kind: CondTCPFlags, Mask: m, Value: data[0] & m, Negate: neg})
			return
		}
	case "exthdr6":
		// The synthetic packet carries no extension header: a presence
		// load yields 0, a value load breaks the rule.
		if !f.present {
			st.add(Cond{Kind: CondNever, Reason: f.desc + " absent from the packet"})
			return
		}
		zero := len(bytes.Trim(data, "\x00")) == 0
		if (op == expr.CmpOpEq && zero) || (op == expr.CmpOpNeq && !zero) {
			return // always true for a packet without the header
		}
		if eqLike {
			st.add(Cond{Kind: CondNever, Reason: f.desc + " absent from the packet"})
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

func (st *ruleState) add(c Cond) { st.r.Conds = append(st.r.Conds, c) }

// bitsCond decodes a comparison on a host-endian 32-bit (or 8-bit pkttype)
// value whose possible values are small enumerations or flags.
func bitsCond(f field, op expr.CmpOp, data []byte) (Cond, bool) {
	kind, addr := CondCtState, ""
	switch f.kind {
	case "fibdaddr":
		kind, addr = CondAddrType, "daddr"
	case "fibsaddr":
		kind, addr = CondAddrType, "saddr"
	case "pkttype":
		kind = CondPktType
	}
	neg := op == expr.CmpOpNeq
	v, ok := hostUint(data)
	if !ok {
		return Cond{}, false
	}
	if f.kind == "ctstate" {
		if f.mask != nil {
			m, ok := hostUint(f.mask)
			if !ok || v != 0 {
				return Cond{}, false
			}
			// ct state & M != 0  <=>  the packet's state bit is in M
			return Cond{Kind: kind, Bits: m, Negate: !neg}, true
		}
		if bits.OnesCount32(v) != 1 {
			return Cond{Kind: CondNever, Reason: "ct state equal to several states"}, !neg
		}
		return Cond{Kind: kind, Bits: v, Negate: neg}, true
	}
	if f.mask != nil || v >= 32 {
		return Cond{}, false
	}
	return Cond{Kind: kind, Addr: addr, Bits: 1 << v, Negate: neg}, true
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
	if fam == FamilyIP6 {
		size = 16
	} else if fam != FamilyIP {
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

func (d *decoder) rangeExpr(st *ruleState, f field, e *expr.Range) {
	neg := e.Op == expr.CmpOpNeq
	if e.Op == expr.CmpOpEq || neg {
		switch f.kind {
		case "sport", "dport":
			if f.mask == nil && len(e.FromData) == 2 && len(e.ToData) == 2 {
				st.add(Cond{Kind: CondKind(f.kind), Negate: neg, Ports: []PortRange{{binary.BigEndian.Uint16(e.FromData), binary.BigEndian.Uint16(e.ToData)}}})
				return
			}
		case "saddr", "daddr":
			if f.mask == nil {
				if ps, ok := rangePrefixes(e.FromData, e.ToData); ok {
					st.add(Cond{Kind: CondKind(f.kind), Negate: neg, Prefixes: ps})
					return
				}
			}
		}
	}
	st.undecidable("range on " + describe(f))
}

// interval is an inclusive key interval of a set, with a map verdict.
type interval struct {
	lo, hi  []byte
	verdict *Verdict
}

// intervals turns a set's elements into inclusive key intervals. Interval
// sets hold each interval as a start element and an end element flagged
// IntervalEnd whose key is one past the end; the kernel may dump them in any
// order.
func intervals(s *Set) ([]interval, bool) {
	if !s.Interval {
		var out []interval
		for _, e := range s.Elements {
			out = append(out, interval{lo: e.Key, hi: e.Key, verdict: e.Verdict})
		}
		return out, true
	}
	els := append([]SetElement(nil), s.Elements...)
	sort.SliceStable(els, func(i, j int) bool {
		if c := bytes.Compare(els[i].Key, els[j].Key); c != 0 {
			return c < 0
		}
		return els[i].IntervalEnd && !els[j].IntervalEnd
	})
	var out []interval
	var open *SetElement
	for i := range els {
		e := &els[i]
		if open != nil {
			hi, ok := decr(e.Key)
			if ok && bytes.Compare(hi, open.Key) >= 0 {
				out = append(out, interval{lo: open.Key, hi: hi, verdict: open.Verdict})
			}
			open = nil
		}
		if !e.IntervalEnd {
			open = e
		}
	}
	if open != nil {
		hi := bytes.Repeat([]byte{0xff}, len(open.Key))
		out = append(out, interval{lo: open.Key, hi: hi, verdict: open.Verdict})
	}
	return out, true
}

func decr(b []byte) ([]byte, bool) {
	out := append([]byte(nil), b...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] > 0 {
			out[i]--
			return out, true
		}
		out[i] = 0xff
	}
	return nil, false
}

func (d *decoder) lookup(st *ruleState, f field, e *expr.Lookup) {
	s, ok := d.sets[e.SetName]
	switch {
	case !ok && !d.setsKnown:
		st.undecidable(fmt.Sprintf("lookup in set %s whose elements could not be listed", e.SetName))
		return
	case !ok:
		st.undecidable(fmt.Sprintf("lookup in unknown set %s", e.SetName))
		return
	case s.Concat:
		st.undecidable(fmt.Sprintf("lookup in concatenated set %s", e.SetName))
		return
	}
	ivs, _ := intervals(s)
	if e.IsDestRegSet {
		if e.DestRegister != unix.NFT_REG_VERDICT {
			st.load(e.DestRegister, field{kind: "other", desc: "value of map " + e.SetName})
			return
		}
		// A verdict map: one entry per verdict target, keyed disjointly.
		var entries []VMapEntry
		for _, iv := range ivs {
			if iv.verdict == nil {
				st.undecidable(fmt.Sprintf("verdict map %s element without a decodable verdict", e.SetName))
				return
			}
			c, ok := keysCond(st.nfproto, f, []interval{iv})
			if !ok {
				st.undecidable(fmt.Sprintf("verdict map %s keyed on %s", e.SetName, describe(f)))
				return
			}
			entries = append(entries, VMapEntry{Cond: c, Verdict: *iv.verdict})
		}
		st.r.VMap = entries
		st.verdict = true
		return
	}
	c, ok := keysCond(st.nfproto, f, ivs)
	if !ok {
		st.undecidable(fmt.Sprintf("lookup in set %s on %s", e.SetName, describe(f)))
		return
	}
	c.Negate = e.Invert
	st.add(c)
}

// keysCond builds a condition from set keys looked up with field f.
func keysCond(fam string, f field, ivs []interval) (Cond, bool) {
	if f.mask != nil && f.kind != "ctstate" {
		return Cond{}, false
	}
	switch f.kind {
	case "dport", "sport":
		c := Cond{Kind: CondKind(f.kind), Ports: []PortRange{}}
		for _, iv := range ivs {
			if len(iv.lo) != 2 || len(iv.hi) != 2 {
				return Cond{}, false
			}
			c.Ports = append(c.Ports, PortRange{binary.BigEndian.Uint16(iv.lo), binary.BigEndian.Uint16(iv.hi)})
		}
		return c, true
	case "l4proto":
		c := Cond{Kind: CondL4Proto, Protos: []int{}}
		for _, iv := range ivs {
			if len(iv.lo) != 1 || len(iv.hi) != 1 {
				return Cond{}, false
			}
			for p := int(iv.lo[0]); p <= int(iv.hi[0]); p++ {
				c.Protos = append(c.Protos, p)
			}
		}
		return c, true
	case "saddr", "daddr":
		size := 4
		if fam == FamilyIP6 {
			size = 16
		} else if fam != FamilyIP {
			return Cond{}, false
		}
		if f.len != size {
			return Cond{}, false
		}
		c := Cond{Kind: CondKind(f.kind), Prefixes: []netip.Prefix{}}
		for _, iv := range ivs {
			ps, ok := rangePrefixes(iv.lo, iv.hi)
			if !ok {
				return Cond{}, false
			}
			c.Prefixes = append(c.Prefixes, ps...)
		}
		return c, true
	case "iifname", "oifname":
		c := Cond{Kind: CondKind(f.kind), Names: []string{}}
		for _, iv := range ivs {
			if bytes.Equal(iv.lo, iv.hi) {
				c.Names = append(c.Names, ifname(iv.lo))
				continue
			}
			// a wildcard in an interval set: "eth" 00.. to "eth" ff..
			p := strings.TrimRight(string(iv.lo), "\x00")
			if !strings.HasPrefix(string(iv.hi), p) || !allBytes(iv.hi[len(p):], 0xff) {
				return Cond{}, false
			}
			c.Names = append(c.Names, p+"*")
		}
		return c, true
	case "ctstate", "fibdaddr", "fibsaddr", "pkttype":
		c := Cond{Kind: CondCtState}
		switch f.kind {
		case "fibdaddr":
			c = Cond{Kind: CondAddrType, Addr: "daddr"}
		case "fibsaddr":
			c = Cond{Kind: CondAddrType, Addr: "saddr"}
		case "pkttype":
			c = Cond{Kind: CondPktType}
		}
		if f.mask != nil {
			return Cond{}, false
		}
		for _, iv := range ivs {
			if !bytes.Equal(iv.lo, iv.hi) {
				return Cond{}, false
			}
			v, ok := hostUint(iv.lo)
			if !ok {
				return Cond{}, false
			}
			if f.kind == "ctstate" {
				if bits.OnesCount32(v) == 1 {
					c.Bits |= v
				}
				continue
			}
			if v >= 32 {
				return Cond{}, false
			}
			c.Bits |= 1 << v
		}
		return c, true
	case "nfproto":
		c := Cond{Kind: CondNFProto}
		fams := map[string]bool{}
		for _, iv := range ivs {
			if len(iv.lo) == 1 && bytes.Equal(iv.lo, iv.hi) {
				switch iv.lo[0] {
				case unix.NFPROTO_IPV4:
					fams[FamilyIP] = true
				case unix.NFPROTO_IPV6:
					fams[FamilyIP6] = true
				}
			}
		}
		switch {
		case fams[FamilyIP] && fams[FamilyIP6]:
			return Cond{Kind: CondNFProto, Family: FamilyInet}, true
		case fams[FamilyIP]:
			c.Family = FamilyIP
		case fams[FamilyIP6]:
			c.Family = FamilyIP6
		default:
			return Cond{Kind: CondNever, Reason: "nfproto set without ip or ip6"}, true
		}
		return c, true
	}
	return Cond{}, false
}

// rangePrefixes covers the inclusive address range [lo, hi] with prefixes.
func rangePrefixes(lo, hi []byte) ([]netip.Prefix, bool) {
	a, ok1 := netip.AddrFromSlice(lo)
	b, ok2 := netip.AddrFromSlice(hi)
	if !ok1 || !ok2 || a.BitLen() != b.BitLen() || b.Less(a) {
		return nil, false
	}
	var out []netip.Prefix
	for {
		var p netip.Prefix
		for n := 0; n <= a.BitLen(); n++ {
			q := netip.PrefixFrom(a, n).Masked()
			if q.Addr() == a && !b.Less(lastAddr(q)) {
				p = q
				break
			}
		}
		out = append(out, p)
		last := lastAddr(p)
		if last == b {
			return out, true
		}
		a = last.Next()
		if len(out) > 4096 {
			return nil, false
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		lo := i * 8
		switch {
		case lo >= p.Bits():
			b[i] = 0xff
		case lo+8 > p.Bits():
			b[i] |= 0xff >> (p.Bits() - lo)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Constants of the xtables matches decoded from raw info bytes (host order).
const (
	xtAddrTypeInvertSource = 0x1
	xtAddrTypeInvertDest   = 0x2
	xtAddrTypeLimitIfaceIn = 0x4
	xtAddrTypeLimitIfaceOu = 0x8

	xtMultiPorts = 15
)

func (d *decoder) match(st *ruleState, m *expr.Match) {
	switch info := m.Info.(type) {
	case *xt.Comment:
		if st.r.Comment == "" {
			st.r.Comment = string(*info)
		}
		return
	case *xt.ConntrackMtinfo3:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask))
		return
	case *xt.ConntrackMtinfo2:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask))
		return
	case *xt.ConntrackMtinfo1:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask))
		return
	case *xt.AddrTypeV1:
		if info.Flags&(xtAddrTypeLimitIfaceIn|xtAddrTypeLimitIfaceOu) != 0 {
			st.undecidable("addrtype limited to an interface")
			return
		}
		if info.Source != 0 {
			st.add(Cond{Kind: CondAddrType, Addr: "saddr", Bits: uint32(info.Source), Negate: info.Flags&xtAddrTypeInvertSource != 0})
		}
		if info.Dest != 0 {
			st.add(Cond{Kind: CondAddrType, Addr: "daddr", Bits: uint32(info.Dest), Negate: info.Flags&xtAddrTypeInvertDest != 0})
		}
		return
	case *xt.AddrType:
		if info.Source != 0 {
			st.add(Cond{Kind: CondAddrType, Addr: "saddr", Bits: uint32(info.Source), Negate: info.InvertSource})
		}
		if info.Dest != 0 {
			st.add(Cond{Kind: CondAddrType, Addr: "daddr", Bits: uint32(info.Dest), Negate: info.InvertDest})
		}
		return
	case *xt.Tcp:
		st.add(Cond{Kind: CondL4Proto, Protos: []int{unix.IPPROTO_TCP}})
		xtPorts(st, info.SrcPorts, info.DstPorts, info.InvFlags&xt.TcpInvSrcPorts != 0, info.InvFlags&xt.TcpInvDestPorts != 0)
		if info.FlagsMask != 0 {
			st.add(Cond{Kind: CondTCPFlags, Mask: info.FlagsMask, Value: info.FlagsCmp & info.FlagsMask, Negate: info.InvFlags&xt.TcpInvFlags != 0})
		}
		if info.Option != 0 {
			st.undecidable(fmt.Sprintf("tcp option %d", info.Option))
		}
		return
	case *xt.Udp:
		st.add(Cond{Kind: CondL4Proto, Protos: []int{unix.IPPROTO_UDP}})
		xtPorts(st, info.SrcPorts, info.DstPorts, info.InvFlags&xt.UdpInvSrcPorts != 0, info.InvFlags&xt.UdpInvDestPorts != 0)
		return
	case *xt.Unknown:
		raw := []byte(*info)
		switch m.Name {
		case "icmp", "icmp6", "icmpv6":
			// The match fails on anything but ICMP before any inversion.
			st.add(Cond{Kind: CondNever, Reason: "xt " + m.Name + " match never matches tcp or udp"})
			return
		case "rt":
			// ip6 rt_mt6 returns false when the packet has no routing header
			// (ipv6_find_hdr fails), whatever the inversion flags say. The
			// synthetic packet has none, so ufw's unguarded
			// "-m rt --rt-type 0 -j DROP" never applies to it.
			st.add(Cond{Kind: CondNever, Reason: "xt rt match: the packet has no routing header"})
			return
		case "multiport":
			if c, ok := multiport(m.Rev, raw); ok {
				st.add(c)
				return
			}
		case "state":
			if len(raw) >= 4 {
				st.add(Cond{Kind: CondCtState, Bits: binary.NativeEndian.Uint32(raw)})
				return
			}
		case "pkttype":
			if len(raw) >= 8 {
				t := binary.NativeEndian.Uint32(raw)
				if t < 32 {
					st.add(Cond{Kind: CondPktType, Bits: 1 << t, Negate: binary.NativeEndian.Uint32(raw[4:]) != 0})
					return
				}
			}
		}
	}
	st.undecidable(fmt.Sprintf("xt match %s rev %d", m.Name, m.Rev))
}

func xtPorts(st *ruleState, src, dst [2]uint16, invSrc, invDst bool) {
	if !(src[0] == 0 && src[1] == 0xffff) || invSrc {
		st.add(Cond{Kind: CondSport, Ports: []PortRange{{src[0], src[1]}}, Negate: invSrc})
	}
	if !(dst[0] == 0 && dst[1] == 0xffff) || invDst {
		st.add(Cond{Kind: CondDport, Ports: []PortRange{{dst[0], dst[1]}}, Negate: invDst})
	}
}

// multiport decodes struct xt_multiport (rev 0) and xt_multiport_v1 (rev 1):
// u8 flags, u8 count, u16 ports[15], (rev 1: u8 pflags[15], u8 invert).
func multiport(rev uint32, raw []byte) (Cond, bool) {
	if len(raw) < 2+2*xtMultiPorts {
		return Cond{}, false
	}
	flags, count := raw[0], int(raw[1])
	if count > xtMultiPorts {
		return Cond{}, false
	}
	ports := make([]uint16, xtMultiPorts)
	for i := range ports {
		ports[i] = binary.NativeEndian.Uint16(raw[2+2*i:])
	}
	var pflags []byte
	invert := false
	if rev >= 1 {
		if len(raw) < 2+3*xtMultiPorts+1 {
			return Cond{}, false
		}
		pflags = raw[2+2*xtMultiPorts : 2+3*xtMultiPorts]
		invert = raw[2+3*xtMultiPorts] != 0
	}
	var prs []PortRange
	for i := 0; i < count; i++ {
		if pflags != nil && pflags[i] != 0 && i+1 < count {
			prs = append(prs, PortRange{ports[i], ports[i+1]})
			i++
			continue
		}
		prs = append(prs, PortRange{ports[i], ports[i]})
	}
	switch flags {
	case 0:
		return Cond{Kind: CondSport, Ports: prs, Negate: invert}, true
	case 1:
		return Cond{Kind: CondDport, Ports: prs, Negate: invert}, true
	}
	return Cond{}, false // either source or destination port
}

func (d *decoder) conntrack(st *ruleState, b *xt.ConntrackMtinfoBase, stateMask uint32) {
	flags, inv := xt.ConntrackFlags(b.MatchFlags), xt.ConntrackFlags(b.InvertFlags)
	known := xt.ConntrackState | xt.ConntrackStateAlias | xt.ConntrackProto | xt.ConntrackOrigSrc | xt.ConntrackOrigDst
	if flags&(xt.ConntrackState|xt.ConntrackStateAlias) != 0 {
		st.add(Cond{Kind: CondCtState, Bits: stateMask, Negate: inv&xt.ConntrackState != 0})
	}
	if flags&xt.ConntrackProto != 0 {
		st.add(Cond{Kind: CondL4Proto, Protos: []int{int(b.L4Proto)}, Negate: inv&xt.ConntrackProto != 0})
	}
	// For a new connection the original tuple is the packet's own.
	for _, x := range []struct {
		flag xt.ConntrackFlags
		kind CondKind
		addr []byte
		mask []byte
	}{{xt.ConntrackOrigSrc, CondSaddr, b.OrigSrcAddr, b.OrigSrcMask}, {xt.ConntrackOrigDst, CondDaddr, b.OrigDstAddr, b.OrigDstMask}} {
		if flags&x.flag == 0 {
			continue
		}
		a, ok := netip.AddrFromSlice(x.addr)
		ones := maskOnes(x.mask)
		if !ok || ones < 0 {
			st.undecidable("conntrack address match")
			continue
		}
		a = a.Unmap()
		if ones > a.BitLen() {
			ones = a.BitLen()
		}
		p, _ := a.Prefix(ones)
		st.add(Cond{Kind: x.kind, Prefixes: []netip.Prefix{p}, Negate: inv&x.flag != 0})
	}
	if flags&^known != 0 {
		st.undecidable(fmt.Sprintf("conntrack match flags %#x", uint16(flags&^known)))
	}
}

func maskOnes(m []byte) int {
	n := 0
	for i, b := range m {
		if b == 0xff {
			n += 8
			continue
		}
		n += bits.LeadingZeros8(^b)
		for _, r := range m[i+1:] {
			if r != 0 {
				return -1
			}
		}
		if b<<uint(bits.LeadingZeros8(^b)) != 0 {
			return -1
		}
		return n
	}
	return n
}

func (d *decoder) target(st *ruleState, t *expr.Target) {
	switch t.Name {
	case "REJECT":
		st.setVerdict(Verdict{Kind: VerdictReject})
	case "ACCEPT":
		st.setVerdict(Verdict{Kind: VerdictAccept})
	case "DROP":
		st.setVerdict(Verdict{Kind: VerdictDrop})
	case "RETURN":
		st.setVerdict(Verdict{Kind: VerdictReturn})
	case "LOG", "NFLOG", "ULOG", "MARK", "CONNMARK", "TCPMSS", "CLASSIFY", "DSCP", "TOS", "TTL", "HL",
		"TRACE", "CT", "NOTRACK", "AUDIT", "CHECKSUM", "SECMARK", "CONNSECMARK", "SET", "IDLETIMER", "LED":
		// non-terminal: the packet goes on to the next rule
		st.note("xt target " + t.Name)
	case "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP":
		st.note("xt target " + t.Name + " treated as accept")
		st.setVerdict(Verdict{Kind: VerdictAccept})
	default:
		st.note("xt target " + t.Name + " not decoded")
		st.setVerdict(Verdict{Kind: VerdictUnknown, Target: t.Name})
	}
}

// allBytes reports whether every byte of b is c. (strings.Trim cannot do
// this for 0xff: its cutset is read as UTF-8, and 0xff is not UTF-8.)
func allBytes(b []byte, c byte) bool {
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}
