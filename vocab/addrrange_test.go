package vocab

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// lastAddrBitwise is LastAddr bit by bit, as it was written first: the
// reference the word-wise one is checked against.
func lastAddrBitwise(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// The last address of a prefix and a range's text are what the bitwise
// reference and RangeToPrefixes give, for IPv4, IPv6 and IPv4-mapped
// prefixes of every length, and for ranges that are one prefix, many, or
// backwards.
func TestAddrRangesAsTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	addr := func(kind int) netip.Addr {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		switch kind {
		case 0:
			return netip.AddrFrom4([4]byte(b[:4]))
		case 1:
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom16(netip.AddrFrom4([4]byte(b[:4])).As16())
	}
	for i := range 20000 {
		a := addr(i % 3)
		p := netip.PrefixFrom(a, r.IntN(a.BitLen()+1))
		if got, want := LastAddr(p), lastAddrBitwise(p); got != want {
			t.Fatalf("LastAddr(%s) = %s, want %s", p, got, want)
		}
		lo, hi := p.Masked().Addr(), LastAddr(p)
		switch r.IntN(4) {
		case 0: // the prefix itself
		case 1:
			hi = addr(i % 3)
		case 2:
			lo = lo.Next()
		default:
			if hi.Prev().IsValid() {
				hi = hi.Prev()
			}
		}
		if !lo.IsValid() || !hi.IsValid() {
			continue
		}
		want := lo.String() + "-" + hi.String()
		if lo == hi {
			want = lo.String()
		} else if ps := RangeToPrefixes(lo, hi); len(ps) == 1 {
			want = ps[0].String()
		}
		if got := AddrRangeText(lo, hi); got != want {
			t.Fatalf("AddrRangeText(%s, %s) = %q, want %q", lo, hi, got, want)
		}
	}
	if got := LastAddr(netip.Prefix{}); got.IsValid() {
		t.Errorf("LastAddr of no prefix: %s", got)
	}
}
