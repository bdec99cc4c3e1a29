// This file holds the differential check of a flip with the kernel as the
// oracle: packets from clients in peer namespaces, sent before and after a
// flip, compared with the fate a preview gives each one, and the sources
// such packets come from (inside and outside each prefix a rule names).

package fwtest

import (
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"testing"
)

// Packet is one new connection a client outside the node attempts: from
// Src, an address of the peer namespace Peer, to Dst:Port. Class names the
// traffic class it belongs to (who generated it and whose fate decides it).
type Packet struct {
	Class string
	Peer  string
	Proto string
	Src   string
	Dst   string
	Port  uint16
}

func (p Packet) String() string {
	return fmt.Sprintf("[%s] %s %s -> %s port %d (from %s)", p.Class, p.Proto, p.Src, p.Dst, p.Port, p.Peer)
}

// ReachFrom attempts every packet at once, each from its peer namespace,
// and reports which got through.
func ReachFrom(t *testing.T, pkts []Packet) map[Packet]bool {
	t.Helper()
	got := make(map[Packet]bool, len(pkts))
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Bounded: hundreds of threads switched into namespaces at once would
	// only queue on the two cores.
	sem := make(chan struct{}, 64)
	for _, p := range pkts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ok := false
			if err := InNetns(p.Peer, func() error { ok = attemptTo(p.Proto, p.Src, p.Dst, p.Port); return nil }); err != nil {
				t.Errorf("packet %v: %v", p, err)
			}
			mu.Lock()
			got[p] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

// Claim is what a preview says of one packet: the fate of the opening
// that covers it, if any.
type Claim struct {
	Known    bool   // an opening of the found firewall covers the packet
	Kept     bool   // kept: it passes after the flip
	Closing  bool   // closing: it is dropped after the flip
	Declared bool   // a widening the configuration declares (flip.widen)
	What     string // the fate as the preview writes it, for messages
}

// Tally counts a differential run, per traffic class and in total.
type Tally struct {
	Sent, PassedBefore, PassedAfter, Kept, Closing, Declared, Mismatches int
}

func (c Tally) String() string {
	return fmt.Sprintf("%d packets sent (%d before and %d after the flip), %d passed before, %d pass after, %d kept, %d closing, %d declared widenings, %d mismatches",
		c.Sent, c.Sent/2, c.Sent/2, c.PassedBefore, c.PassedAfter, c.Kept, c.Closing, c.Declared, c.Mismatches)
}

// CheckFlip holds the preview to what the kernel did: every packet that
// passes after the flip passed before or is a declared widening; every
// packet that passed before has a fate; every kept one passes after; every
// closing one is dropped. Each mismatch fails t, naming the packet. It
// prints the counts per class and in total, and returns the totals.
func CheckFlip(t *testing.T, what string, pkts []Packet, before, after map[Packet]bool, claim func(Packet) Claim) Tally {
	t.Helper()
	per := map[string]*Tally{}
	var total Tally
	for _, p := range pkts {
		c := per[p.Class]
		if c == nil {
			c = &Tally{}
			per[p.Class] = c
		}
		b, a := before[p], after[p]
		cl := claim(p)
		bad := ""
		switch {
		case a && !b && !cl.Declared:
			bad = "passes after the flip and did not before, and no widening is declared"
		case b && !cl.Known:
			bad = "passed before the flip and the preview gives it no fate"
		case b && cl.Kept && !a:
			bad = "is kept by the preview and is dropped after the flip"
		case b && cl.Closing && a:
			bad = "is closing by the preview and passes after the flip"
		}
		for _, k := range []*Tally{c, &total} {
			k.Sent += 2
			k.PassedBefore += btoi(b)
			k.PassedAfter += btoi(a)
			k.Kept += btoi(b && cl.Kept)
			k.Closing += btoi(b && cl.Closing)
			k.Declared += btoi(a && !b && cl.Declared)
			k.Mismatches += btoi(bad != "")
		}
		if bad != "" {
			t.Errorf("%s: %v %s (passed before %v, after %v; fate %q)", what, p, bad, b, a, cl.What)
		}
	}
	classes := make([]string, 0, len(per))
	for k := range per {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	for _, k := range classes {
		fmt.Printf("%s, %s: %v\n", what, k, *per[k])
	}
	fmt.Printf("%s, all classes: %v\n", what, total)
	return total
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SourcesAround gives, for each prefix, an address inside it and one just
// past its end, skipping any that falls in avoid (the node's own networks,
// where a peer cannot stand) or is not a unicast address. The whole
// address space (a /0) has no outside; the result is sorted and without
// repeats.
func SourcesAround(prefixes, avoid []netip.Prefix) []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	add := func(a netip.Addr) {
		if !a.IsValid() || seen[a] || !a.IsGlobalUnicast() {
			return
		}
		for _, p := range avoid {
			if p.Contains(a) {
				return
			}
		}
		seen[a] = true
		out = append(out, a)
	}
	for _, p := range prefixes {
		p = p.Masked()
		if p.Bits() == 0 {
			continue
		}
		in := p.Addr()
		for i := 0; i < 5 && p.Contains(in.Next()); i++ {
			in = in.Next()
		}
		add(in)
		add(lastOf(p).Next().Next())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
