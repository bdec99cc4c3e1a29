package flip

// The kernel as the oracle for forwarded ICMP on a ufw node with a
// container behind docker0: ufw's ufw-before-forward accepts an echo
// request whichever way it is forwarded, so a client pinging the
// container and the container pinging out both pass before the flip; the
// preview must give each a fate, and the kernel must agree after a flip
// through the product's path.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// fwdICMPFate is the preview's fate of a forwarded ICMP probe: a forward
// opening of its family and protocol whose type holds the probe's, routed
// to a network holding its destination (via) or from bridge in, whose
// source region holds its source (the most specific one).
func fwdICMPFate(p Preview, pr fwtest.ClassProbe, in string) *Fate {
	dst := netip.MustParseAddr(pr.Dst)
	return mostSpecific(p, netip.MustParseAddr(pr.Src), func(o firewall.Opening) bool {
		if o.Direction != firewall.HookForward || o.Class == "" || o.In != in {
			return false
		}
		c, ok := vocab.ClassByName(o.Family, o.Class)
		if !ok || c.Num != pr.Proto || pr.Type < c.Type || pr.Type > c.TypeEnd {
			return false
		}
		via, err := netip.ParsePrefix(o.Via)
		return in != "" || err == nil && via.Contains(dst)
	})
}

// A client pings the container (routed to docker0's network) and the
// container pings the client (from docker0, out by the uplink), in both
// families: each passes before the flip (ufw's before-forward rules), is
// kept by the preview, and passes after.
func TestKernelFlipForwardedICMP(t *testing.T) {
	fwtest.RequireTools(t, "iptables-nft", "ip6tables-nft", "sysctl")
	n := fwtest.NewNamedNet(t, "fi-", "fi", "6c")
	ctr := n.Container(t)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "route", "add", "172.17.0.0/16", "via", fwtest.NodeV4)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", "fd00:17::/64", "via", fwtest.NodeV6)
	fwtest.RestoreUfw(t, n)
	in := []fwtest.ClassProbe{
		{Name: "ip icmp type 8 to 172.17.0.0/16", Src: fwtest.PeerV4a, Dst: fwtest.ContainerV4, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128 to fd00:17::/64", Src: fwtest.PeerV6a, Dst: fwtest.ContainerV6, Proto: 58, Type: 128},
	}
	out := []fwtest.ClassProbe{
		{Name: "ip icmp type 8", Src: fwtest.ContainerV4, Dst: fwtest.PeerV4a, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128", Src: fwtest.ContainerV6, Dst: fwtest.PeerV6a, Proto: 58, Type: 128},
	}
	reach := func() (map[fwtest.ClassProbe]bool, map[fwtest.ClassProbe]bool) {
		return fwtest.ClassReachTo(t, n.Peer, ctr, in), fwtest.ClassReachTo(t, ctr, n.Peer, out)
	}
	beforeIn, beforeOut := reach()
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Drop: ufwDrops()}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, f := range p.Fates {
		if f.Opening.Direction == firewall.HookForward && f.Opening.Class != "" {
			t.Logf("fate: %s %s (%s)", f.Fate, f.Opening.Class, describeOpening(f.Opening))
		}
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	afterIn, afterOut := reach()
	sent, passedBefore, passedAfter, kept, mismatches := 0, 0, 0, 0, 0
	for _, l := range []struct {
		probes        []fwtest.ClassProbe
		before, after map[fwtest.ClassProbe]bool
		in            string
	}{{in, beforeIn, afterIn, ""}, {out, beforeOut, afterOut, "docker0"}} {
		for _, pr := range l.probes {
			sent += 2
			b, a := l.before[pr], l.after[pr]
			passedBefore += btoi(b)
			passedAfter += btoi(a)
			fate := fwdICMPFate(p, pr, l.in)
			if !b {
				t.Errorf("%v did not pass before the flip: the fixture is not what the test needs", pr)
			}
			switch {
			case a && !b:
				mismatches++
				t.Errorf("%v passes after the flip and did not before (fate %+v)", pr, fate)
			case b && fate == nil:
				mismatches++
				t.Errorf("%v passed before the flip and the preview gives it no fate", pr)
			case b && fate.Fate == FateKept:
				kept++
				if !a {
					mismatches++
					t.Errorf("%v is kept by the preview and does not pass after the flip", pr)
				}
			case b && fate.Fate == FateClosing && a:
				mismatches++
				t.Errorf("%v is closing by the preview and passes after the flip", pr)
			case b && fate.Fate != FateClosing:
				mismatches++
				t.Errorf("%v passed before with fate %+v: want kept or closing", pr, fate)
			}
		}
	}
	fmt.Printf("forwarded ICMP: %d packets sent (before and after, 3 times each), %d passed before, %d pass after, %d kept, %d mismatches\n",
		sent, passedBefore, passedAfter, kept, mismatches)
	if !strings.Contains(d.Text(), "meta l4proto 1 icmp type 8 accept") {
		t.Errorf("the mesh's forward chain does not carry the echo request")
	}
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
}
