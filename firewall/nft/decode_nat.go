// This file decodes a native NAT statement's target: the address and port
// nft loads into registers with immediates just before "dnat to".

package nft

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/google/nftables/expr"

	"adoption/firewall"
)

// natTarget reads a native "dnat to ADDR[:PORT]" whose address and port
// nft loads into registers with immediates just before the statement.
func (st *ruleState) natTarget(e *expr.NAT) *firewall.NATTarget {
	t := &firewall.NATTarget{}
	if e.RegAddrMin != 0 {
		lo, okLo := st.regs[normReg(e.RegAddrMin)]
		hi := lo
		if e.RegAddrMax != 0 {
			hi = st.regs[normReg(e.RegAddrMax)]
		}
		a, ok := netip.AddrFromSlice(lo.data)
		switch {
		case !okLo || lo.kind != "immediate" || !ok:
			t.Unknown = "the address comes from " + describe(lo)
		case !bytes.Equal(lo.data, hi.data):
			t.Unknown = "an address range"
		case e.Prefix:
			t.Unknown = "a prefix mapping"
		default:
			t.Addr = a.Unmap()
		}
	} else {
		t.Local = true // "dnat to :PORT" keeps the address: the node's own
	}
	if e.RegProtoMin != 0 {
		t.PortMin, t.PortMax = st.immPort(e.RegProtoMin, e.RegProtoMax, t)
		t.RandomPort = e.Random || e.FullyRandom
	}
	return t
}

// immPort reads the port range of a NAT statement from its registers.
func (st *ruleState) immPort(regMin, regMax uint32, t *firewall.NATTarget) (uint16, uint16) {
	lo, ok := st.regs[normReg(regMin)]
	hi := lo
	if regMax != 0 {
		hi = st.regs[normReg(regMax)]
	}
	if !ok || lo.kind != "immediate" || hi.kind != "immediate" || len(lo.data) != 2 || len(hi.data) != 2 {
		if t.Unknown == "" {
			t.Unknown = "the port comes from " + describe(lo)
		}
		return 0, 0
	}
	return binary.BigEndian.Uint16(lo.data), binary.BigEndian.Uint16(hi.data)
}
