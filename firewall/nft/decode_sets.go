// This file holds the decoding of set and map lookups: a set's elements
// become port ranges, prefixes, names or state bits, a verdict map becomes
// one entry per key range.

package nft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"sort"
	"strings"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"adoption/firewall"
)

type interval struct {
	lo, hi  []byte
	verdict *firewall.Verdict
}

// intervals turns a set's elements into inclusive key intervals. Interval
// sets hold each interval as a start element and an end element flagged
// IntervalEnd whose key is one past the end; the kernel may dump them in any
// order.
func intervals(s *firewall.Set) ([]interval, bool) {
	if !s.Interval {
		var out []interval
		for _, e := range s.Elements {
			out = append(out, interval{lo: e.Key, hi: e.Key, verdict: e.Verdict})
		}
		return out, true
	}
	els := append([]firewall.SetElement(nil), s.Elements...)
	sort.SliceStable(els, func(i, j int) bool {
		if c := bytes.Compare(els[i].Key, els[j].Key); c != 0 {
			return c < 0
		}
		return els[i].IntervalEnd && !els[j].IntervalEnd
	})
	var out []interval
	var open *firewall.SetElement
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

func (d *Decoder) lookup(st *ruleState, f field, e *expr.Lookup) {
	s, ok := d.Sets[e.SetName]
	switch {
	case !ok && !d.SetsKnown:
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
		var entries []firewall.VMapEntry
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
			entries = append(entries, firewall.VMapEntry{Cond: c, Verdict: *iv.verdict})
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
func keysCond(fam string, f field, ivs []interval) (firewall.Cond, bool) {
	if f.mask != nil && f.kind != "ctstate" {
		return firewall.Cond{}, false
	}
	switch f.kind {
	case "dport", "sport", "origdport":
		c := firewall.Cond{Kind: firewall.CondKind(f.kind), Ports: []firewall.PortRange{}}
		for _, iv := range ivs {
			if len(iv.lo) != 2 || len(iv.hi) != 2 {
				return firewall.Cond{}, false
			}
			c.Ports = append(c.Ports, firewall.PortRange{From: binary.BigEndian.Uint16(iv.lo), To: binary.BigEndian.Uint16(iv.hi)})
		}
		return c, true
	case "icmptype":
		c := firewall.Cond{Kind: firewall.CondICMPType, Types: []int{}}
		for _, iv := range ivs {
			if len(iv.lo) != 1 || len(iv.hi) != 1 {
				return firewall.Cond{}, false
			}
			for p := int(iv.lo[0]); p <= int(iv.hi[0]); p++ {
				c.Types = append(c.Types, p)
			}
		}
		return c, true
	case "l4proto":
		c := firewall.Cond{Kind: firewall.CondL4Proto, Protos: []int{}}
		for _, iv := range ivs {
			if len(iv.lo) != 1 || len(iv.hi) != 1 {
				return firewall.Cond{}, false
			}
			for p := int(iv.lo[0]); p <= int(iv.hi[0]); p++ {
				c.Protos = append(c.Protos, p)
			}
		}
		return c, true
	case "saddr", "daddr":
		size := 4
		if fam == firewall.FamilyIP6 {
			size = 16
		} else if fam != firewall.FamilyIP {
			return firewall.Cond{}, false
		}
		if f.len != size {
			return firewall.Cond{}, false
		}
		c := firewall.Cond{Kind: firewall.CondKind(f.kind), Prefixes: []netip.Prefix{}}
		for _, iv := range ivs {
			ps, ok := RangePrefixes(iv.lo, iv.hi)
			if !ok {
				return firewall.Cond{}, false
			}
			c.Prefixes = append(c.Prefixes, ps...)
		}
		return c, true
	case "iifname", "oifname":
		c := firewall.Cond{Kind: firewall.CondKind(f.kind), Names: []string{}}
		for _, iv := range ivs {
			if bytes.Equal(iv.lo, iv.hi) {
				c.Names = append(c.Names, ifname(iv.lo))
				continue
			}
			// a wildcard in an interval set: "eth" 00.. to "eth" ff..
			p := strings.TrimRight(string(iv.lo), "\x00")
			if !strings.HasPrefix(string(iv.hi), p) || !allBytes(iv.hi[len(p):], 0xff) {
				return firewall.Cond{}, false
			}
			c.Names = append(c.Names, p+"*")
		}
		return c, true
	case "ctstate", "fibdaddr", "fibsaddr", "pkttype":
		c := firewall.Cond{Kind: firewall.CondCtState}
		switch f.kind {
		case "fibdaddr":
			c = firewall.Cond{Kind: firewall.CondAddrType, Addr: "daddr"}
		case "fibsaddr":
			c = firewall.Cond{Kind: firewall.CondAddrType, Addr: "saddr"}
		case "pkttype":
			c = firewall.Cond{Kind: firewall.CondPktType}
		}
		if f.mask != nil {
			return firewall.Cond{}, false
		}
		for _, iv := range ivs {
			if !bytes.Equal(iv.lo, iv.hi) {
				return firewall.Cond{}, false
			}
			v, ok := hostUint(iv.lo)
			if !ok {
				return firewall.Cond{}, false
			}
			if f.kind == "ctstate" {
				if bits.OnesCount32(v) == 1 {
					c.Bits |= v
				}
				continue
			}
			if v >= 32 {
				return firewall.Cond{}, false
			}
			c.Bits |= 1 << v
		}
		return c, true
	case "nfproto":
		c := firewall.Cond{Kind: firewall.CondNFProto}
		fams := map[string]bool{}
		for _, iv := range ivs {
			if len(iv.lo) == 1 && bytes.Equal(iv.lo, iv.hi) {
				switch iv.lo[0] {
				case unix.NFPROTO_IPV4:
					fams[firewall.FamilyIP] = true
				case unix.NFPROTO_IPV6:
					fams[firewall.FamilyIP6] = true
				}
			}
		}
		switch {
		case fams[firewall.FamilyIP] && fams[firewall.FamilyIP6]:
			return firewall.Cond{Kind: firewall.CondNFProto, Family: firewall.FamilyInet}, true
		case fams[firewall.FamilyIP]:
			c.Family = firewall.FamilyIP
		case fams[firewall.FamilyIP6]:
			c.Family = firewall.FamilyIP6
		default:
			return firewall.Cond{Kind: firewall.CondNever, Reason: "nfproto set without ip or ip6"}, true
		}
		return c, true
	}
	return firewall.Cond{}, false
}

// rangePrefixes covers the inclusive address range [lo, hi] with prefixes.
func RangePrefixes(lo, hi []byte) ([]netip.Prefix, bool) {
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
			if q.Addr() == a && !b.Less(LastAddr(q)) {
				p = q
				break
			}
		}
		out = append(out, p)
		last := LastAddr(p)
		if last == b {
			return out, true
		}
		a = last.Next()
		if len(out) > 4096 {
			return nil, false
		}
	}
}

// LastAddr is the last address of prefix p.
func LastAddr(p netip.Prefix) netip.Addr {
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
