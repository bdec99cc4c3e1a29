// This file holds the decoding of xtables compat expressions that
// iptables-nft writes: matches (conntrack, addrtype, tcp, udp, multiport,
// state, comment, ...) and targets (ACCEPT, REJECT, DNAT, LOG, ...).

package nft

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"net/netip"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

// Constants of the xtables matches decoded from raw info bytes (host order).
const (
	xtAddrTypeInvertSource = 0x1
	xtAddrTypeInvertDest   = 0x2
	xtAddrTypeLimitIfaceIn = 0x4
	xtAddrTypeLimitIfaceOu = 0x8

	xtMultiPorts = 15

	// NF_NAT_RANGE_PROTO_OFFSET: the new port is the range's first plus
	// the client's port's offset from a base ("--to-destination A:lo-hi/base").
	natRangeProtoOffset = 1 << 6
)

func (d *Decoder) match(st *ruleState, m *expr.Match) {
	switch info := m.Info.(type) {
	case *xt.Comment:
		if st.r.Comment == "" {
			st.r.Comment = string(*info)
		}
		return
	case *xt.ConntrackMtinfo3:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask), uint32(info.StatusMask), info.OrigDstPortHigh, true)
		return
	case *xt.ConntrackMtinfo2:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask), uint32(info.StatusMask), 0, false)
		return
	case *xt.ConntrackMtinfo1:
		d.conntrack(st, &info.ConntrackMtinfoBase, uint32(info.StateMask), uint32(info.StatusMask), 0, false)
		return
	case *xt.AddrTypeV1:
		if info.Flags&(xtAddrTypeLimitIfaceIn|xtAddrTypeLimitIfaceOu) != 0 {
			st.undecidable("addrtype limited to an interface")
			return
		}
		if info.Source != 0 {
			st.add(firewall.Cond{Kind: firewall.CondAddrType, Addr: "saddr", Bits: uint32(info.Source), Negate: info.Flags&xtAddrTypeInvertSource != 0})
		}
		if info.Dest != 0 {
			st.add(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: uint32(info.Dest), Negate: info.Flags&xtAddrTypeInvertDest != 0})
		}
		return
	case *xt.AddrType:
		if info.Source != 0 {
			st.add(firewall.Cond{Kind: firewall.CondAddrType, Addr: "saddr", Bits: uint32(info.Source), Negate: info.InvertSource})
		}
		if info.Dest != 0 {
			st.add(firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr", Bits: uint32(info.Dest), Negate: info.InvertDest})
		}
		return
	case *xt.Tcp:
		st.add(firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{unix.IPPROTO_TCP}})
		xtPorts(st, info.SrcPorts, info.DstPorts, info.InvFlags&xt.TcpInvSrcPorts != 0, info.InvFlags&xt.TcpInvDestPorts != 0)
		if info.FlagsMask != 0 {
			st.add(firewall.Cond{Kind: firewall.CondTCPFlags, Mask: info.FlagsMask, Value: info.FlagsCmp & info.FlagsMask, Negate: info.InvFlags&xt.TcpInvFlags != 0})
		}
		if info.Option != 0 {
			st.undecidable(fmt.Sprintf("tcp option %d", info.Option))
		}
		return
	case *xt.Udp:
		st.add(firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{unix.IPPROTO_UDP}})
		xtPorts(st, info.SrcPorts, info.DstPorts, info.InvFlags&xt.UdpInvSrcPorts != 0, info.InvFlags&xt.UdpInvDestPorts != 0)
		return
	case *xt.Unknown:
		raw := []byte(*info)
		switch m.Name {
		case "icmp", "icmp6", "icmpv6":
			// struct ipt_icmp / ip6t_icmp: type, code range, invflags.
			// Type 0xff is any. The synthetic ICMP packet has code 0.
			if len(raw) >= 4 {
				st.add(icmpMatch(raw[0], raw[1], raw[2], raw[3]&0x01 != 0))
				return
			}
		case "hl", "ttl":
			// struct ip6t_hl_info / ipt_ttl_info: mode, value.
			if len(raw) >= 2 && raw[0] <= 3 {
				st.add(firewall.Cond{Kind: firewall.CondHopLimit, Mask: raw[0], Value: raw[1]})
				return
			}
		case "rt":
			// ip6 rt_mt6 returns false when the packet has no routing header
			// (ipv6_find_hdr fails), whatever the inversion flags say. The
			// synthetic packet has none, so ufw's unguarded
			// "-m rt --rt-type 0 -j DROP" never applies to it.
			st.add(firewall.Cond{Kind: firewall.CondNever, Reason: "xt rt match: the packet has no routing header"})
			return
		case "multiport":
			if c, ok := multiport(m.Rev, raw); ok {
				st.add(c)
				return
			}
		case "state":
			if len(raw) >= 4 {
				st.add(firewall.Cond{Kind: firewall.CondCtState, Bits: binary.NativeEndian.Uint32(raw)})
				return
			}
		case "set":
			d.ipsetMatch(st, m.Rev, raw)
			return
		case "pkttype":
			if len(raw) >= 8 {
				t := binary.NativeEndian.Uint32(raw)
				if t < 32 {
					st.add(firewall.Cond{Kind: firewall.CondPktType, Bits: 1 << t, Negate: binary.NativeEndian.Uint32(raw[4:]) != 0})
					return
				}
			}
		}
	}
	st.undecidable(fmt.Sprintf("xt match %s rev %d", m.Name, m.Rev))
}

// icmpMatch is xt icmp's "--icmp-type T[/CODE]": true for an ICMP packet
// of type typ (0xff: any) with a code in [lo, hi], the other way round
// when inverted; false for a packet of another protocol.
func icmpMatch(typ, lo, hi uint8, inv bool) firewall.Cond {
	switch {
	case typ == 0xff:
		if inv {
			return firewall.Cond{Kind: firewall.CondNever, Reason: "xt icmp match: not any type"}
		}
		return firewall.Cond{Kind: firewall.CondICMPType}
	case lo > 0 || hi < lo:
		// No code-0 packet of the type matches: every ICMP packet does
		// when inverted.
		if inv {
			return firewall.Cond{Kind: firewall.CondICMPType}
		}
		return firewall.Cond{Kind: firewall.CondNever, Reason: fmt.Sprintf("xt icmp match: type %d codes %d-%d", typ, lo, hi)}
	}
	return firewall.Cond{Kind: firewall.CondICMPType, Types: []int{int(typ)}, Negate: inv}
}

func xtPorts(st *ruleState, src, dst [2]uint16, invSrc, invDst bool) {
	if !(src[0] == 0 && src[1] == 0xffff) || invSrc {
		st.add(firewall.Cond{Kind: firewall.CondSport, Ports: []firewall.PortRange{{From: src[0], To: src[1]}}, Negate: invSrc})
	}
	if !(dst[0] == 0 && dst[1] == 0xffff) || invDst {
		st.add(firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: dst[0], To: dst[1]}}, Negate: invDst})
	}
}

// multiport decodes struct xt_multiport (rev 0) and xt_multiport_v1 (rev 1):
// u8 flags, u8 count, u16 ports[15], (rev 1: u8 pflags[15], u8 invert).
func multiport(rev uint32, raw []byte) (firewall.Cond, bool) {
	if len(raw) < 2+2*xtMultiPorts {
		return firewall.Cond{}, false
	}
	flags, count := raw[0], int(raw[1])
	if count > xtMultiPorts {
		return firewall.Cond{}, false
	}
	ports := make([]uint16, xtMultiPorts)
	for i := range ports {
		ports[i] = binary.NativeEndian.Uint16(raw[2+2*i:])
	}
	var pflags []byte
	invert := false
	if rev >= 1 {
		if len(raw) < 2+3*xtMultiPorts+1 {
			return firewall.Cond{}, false
		}
		pflags = raw[2+2*xtMultiPorts : 2+3*xtMultiPorts]
		invert = raw[2+3*xtMultiPorts] != 0
	}
	var prs []firewall.PortRange
	for i := 0; i < count; i++ {
		if pflags != nil && pflags[i] != 0 && i+1 < count {
			prs = append(prs, firewall.PortRange{From: ports[i], To: ports[i+1]})
			i++
			continue
		}
		prs = append(prs, firewall.PortRange{From: ports[i], To: ports[i]})
	}
	switch flags {
	case 0:
		return firewall.Cond{Kind: firewall.CondSport, Ports: prs, Negate: invert}, true
	case 1:
		return firewall.Cond{Kind: firewall.CondDport, Ports: prs, Negate: invert}, true
	}
	return firewall.Cond{}, false // either source or destination port
}

// xt conntrack's state bits beyond nft's (XT_CONNTRACK_STATE_*).
const (
	xtCtStateSNAT      = 1 << 6
	XtCtStateDNAT      = 1 << 7
	xtCtStateUntracked = 1 << 8
)

// conntrack decodes struct xt_conntrack_mtinfo1/2/3; origDstHigh is the
// upper bound of --ctorigdstport's range (rev 3 only).
func (d *Decoder) conntrack(st *ruleState, b *xt.ConntrackMtinfoBase, stateMask, statusMask uint32, origDstHigh uint16, hasHigh bool) {
	flags, inv := xt.ConntrackFlags(b.MatchFlags), xt.ConntrackFlags(b.InvertFlags)
	known := xt.ConntrackState | xt.ConntrackStateAlias | xt.ConntrackProto | xt.ConntrackOrigSrc | xt.ConntrackOrigDst |
		xt.ConntrackStatus | xt.ConntrackOrigDstPort
	if flags&(xt.ConntrackState|xt.ConntrackStateAlias) != 0 {
		bits := stateMask & (firewall.CtStateInvalid | firewall.CtStateEstablished | firewall.CtStateRelated | firewall.CtStateNew)
		if stateMask&xtCtStateSNAT != 0 {
			bits |= firewall.CtStateSNAT
		}
		if stateMask&XtCtStateDNAT != 0 {
			bits |= firewall.CtStateDNAT
		}
		if stateMask&xtCtStateUntracked != 0 {
			bits |= firewall.CtStateUntracked
		}
		st.add(firewall.Cond{Kind: firewall.CondCtState, Bits: bits, Negate: inv&xt.ConntrackState != 0})
	}
	if flags&xt.ConntrackStatus != 0 {
		st.add(firewall.Cond{Kind: firewall.CondCtStatus, Bits: statusMask, Negate: inv&xt.ConntrackStatus != 0})
	}
	if flags&xt.ConntrackOrigDstPort != 0 {
		// Rev 3 holds a host-order range (the kernel compares it with
		// ntohs of the tuple's port); revs 1 and 2 one big-endian port.
		lo, hi := b.OrigDstPort, origDstHigh
		if !hasHigh {
			lo = beUint16(lo)
			hi = lo
		}
		if hi < lo {
			st.add(firewall.Cond{Kind: firewall.CondNever, Reason: "empty --ctorigdstport range"})
		} else {
			st.add(firewall.Cond{Kind: firewall.CondOrigDport, Ports: []firewall.PortRange{{From: lo, To: hi}}, Negate: inv&xt.ConntrackOrigDstPort != 0})
		}
	}
	if flags&xt.ConntrackProto != 0 {
		st.add(firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{int(b.L4Proto)}, Negate: inv&xt.ConntrackProto != 0})
	}
	// For a new connection the original source is the packet's own (no
	// SNAT happens before filtering); the original destination is the one
	// before a DNAT.
	for _, x := range []struct {
		flag xt.ConntrackFlags
		kind firewall.CondKind
		addr []byte
		mask []byte
	}{{xt.ConntrackOrigSrc, firewall.CondSaddr, b.OrigSrcAddr, b.OrigSrcMask}, {xt.ConntrackOrigDst, firewall.CondOrigDaddr, b.OrigDstAddr, b.OrigDstMask}} {
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
		st.add(firewall.Cond{Kind: x.kind, Prefixes: []netip.Prefix{p}, Negate: inv&x.flag != 0})
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

func (d *Decoder) target(st *ruleState, t *expr.Target) {
	switch t.Name {
	case "REJECT":
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictReject})
	case "ACCEPT":
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictAccept})
	case "DROP":
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictDrop})
	case "RETURN":
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictReturn})
	case "LOG", "NFLOG", "ULOG", "MARK", "CONNMARK", "TCPMSS", "CLASSIFY", "DSCP", "TOS", "TTL", "HL",
		"TRACE", "CT", "NOTRACK", "AUDIT", "CHECKSUM", "SECMARK", "CONNSECMARK", "SET", "IDLETIMER", "LED":
		// non-terminal: the packet goes on to the next rule
		st.note("xt target " + t.Name)
	case "DNAT", "REDIRECT":
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: xtNAT(t)})
	case "SNAT", "MASQUERADE", "NETMAP":
		st.note("xt target " + t.Name + " treated as accept")
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictAccept})
	default:
		st.note("xt target " + t.Name + " not decoded")
		st.setVerdict(firewall.Verdict{Kind: firewall.VerdictUnknown, Target: t.Name})
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

func beUint16(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

// xtNAT reads where an xt DNAT or REDIRECT target sends a connection.
func xtNAT(t *expr.Target) *firewall.NATTarget {
	var flags uint
	var minIP, maxIP net.IP
	var minPort, maxPort uint16
	switch info := t.Info.(type) {
	case *xt.NatRange:
		flags, minIP, maxIP, minPort, maxPort = info.Flags, info.MinIP, info.MaxIP, info.MinPort, info.MaxPort
	case *xt.NatRange2:
		flags, minIP, maxIP, minPort, maxPort = info.Flags, info.MinIP, info.MaxIP, info.MinPort, info.MaxPort
	case *xt.NatIPv4MultiRangeCompat:
		if len(*info) != 1 {
			return &firewall.NATTarget{Unknown: fmt.Sprintf("xt %s with %d ranges", t.Name, len(*info))}
		}
		r := (*info)[0]
		flags, minIP, maxIP, minPort, maxPort = r.Flags, r.MinIP, r.MaxIP, r.MinPort, r.MaxPort
	default:
		return &firewall.NATTarget{Unknown: fmt.Sprintf("xt %s rev %d info not decoded", t.Name, t.Rev)}
	}
	n := &firewall.NATTarget{}
	if flags&uint(xt.NatRangeProtoSpecified) != 0 {
		n.PortMin, n.PortMax = minPort, maxPort
		n.RandomPort = flags&(uint(xt.NatRangeProtoRandomAll)|natRangeProtoOffset) != 0
	}
	if t.Name == "REDIRECT" || flags&uint(xt.NatRangeMapIPs) == 0 {
		n.Local = true // REDIRECT, or "--to-destination :PORT": the address stays the node's
		return n
	}
	lo, ok1 := netip.AddrFromSlice(minIP)
	hi, ok2 := netip.AddrFromSlice(maxIP)
	switch {
	case !ok1 || !ok2:
		n.Unknown = "xt " + t.Name + " address not readable"
	case lo.Unmap() != hi.Unmap():
		n.Unknown = fmt.Sprintf("an address range %s-%s", lo.Unmap(), hi.Unmap())
	default:
		n.Addr = lo.Unmap()
	}
	return n
}

// ipsetMatch decodes "-m set --match-set NAME src|dst" (xt_set_info_match
// rev 1 to 4: u16 index, u8 dim, u8 flags; rev 3 and 4 add packet and byte
// counter matches and match flags) on a hash:ip or hash:net set whose
// members were read: a source or destination prefix condition. Anything
// else is undecidable, naming the set.
func (d *Decoder) ipsetMatch(st *ruleState, rev uint32, raw []byte) {
	// enum ip_set_kopt: IPSET_INV_MATCH is bit 0, IPSET_DIM_ONE_SRC bit 1;
	// IPSET_FLAG_RETURN_NOMATCH is bit 7 of the match flags.
	const (
		invMatch      = 1 << 0
		dimOneSrc     = 1 << 1
		returnNomatch = 1 << 7
	)
	if rev < 1 || rev > 4 || len(raw) < 4 {
		st.undecidable(fmt.Sprintf("xt match set rev %d", rev))
		return
	}
	index, dim, flags := binary.NativeEndian.Uint16(raw), raw[2], raw[3]
	s := d.IPSets[index]
	name := fmt.Sprintf("ipset with index %d", index)
	if s != nil {
		name = "ipset " + s.Name
	}
	if rev >= 3 {
		if len(raw) < 44 || raw[8] != 0 || raw[24] != 0 || binary.NativeEndian.Uint32(raw[40:])&returnNomatch != 0 {
			st.undecidable(fmt.Sprintf("match on %s with counters or return-nomatch", name))
			return
		}
	}
	switch {
	case s == nil:
		st.undecidable(fmt.Sprintf("match on %s, whose members could not be read", name))
		return
	case dim != 1:
		st.undecidable(fmt.Sprintf("match on %s over %d dimensions", name, dim))
		return
	case s.Type != "hash:ip" && s.Type != "hash:net":
		st.undecidable(fmt.Sprintf("match on %s of type %s", name, s.Type))
		return
	case s.Unknown != "":
		st.undecidable(fmt.Sprintf("match on %s: %s", name, s.Unknown))
		return
	}
	kind := firewall.CondDaddr
	if flags&dimOneSrc != 0 {
		kind = firewall.CondSaddr
	}
	if s.Family != st.nfproto && st.nfproto != firewall.FamilyInet && st.nfproto != "" {
		// A set of the other family never holds the packet (ip_set_test
		// returns 0): the match fails, or, inverted, holds.
		if flags&invMatch == 0 {
			st.add(firewall.Cond{Kind: firewall.CondNever, Reason: name + " is of the other family"})
		}
		return
	}
	st.add(firewall.Cond{Kind: kind, Prefixes: append([]netip.Prefix{}, s.Prefixes...), Negate: flags&invMatch != 0})
}
