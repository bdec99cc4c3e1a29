package flip

// The kernel as the oracle for a DHCPv6 server's reply (udp 547 -> 546)
// on a ufw node: ufw6's before-rules accept it from a link-local source to
// a link-local destination only. A reply from a link-local source to the
// node's global address is dropped before the flip; after it, it may pass
// only as a widening the preview names.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// dhcp6Fate is the preview's fate whose opening holds a DHCPv6 reply
// probe: an input opening of ip6 udp holding port 546 (a port's, or a
// region's whose destination holds the probe's) whose source region holds
// its source, the most specific one.
func dhcp6Fate(p Preview, pr fwtest.ClassProbe, own bool) *Fate {
	dst := netip.MustParseAddr(pr.Dst)
	return mostSpecific(p, netip.MustParseAddr(pr.Src), func(o firewall.Opening) bool {
		if o.Direction != firewall.HookInput || o.In != "" || o.Family != firewall.FamilyIP6 || o.Proto != "udp" || pr.Port < o.Port || pr.Port > firewall.PortEnd(o) {
			return false
		}
		c, ok := vocab.ClassByName(o.Family, o.Class)
		return o.Class == "" || ok && c.Holds(dst, own) && c.Sport <= pr.Sport && pr.Sport <= c.SportEnd
	})
}

// A reply from the server's link-local address to the node's global one
// is dropped before the flip (ufw6 requires -d fe80::/10) and after it, or
// the preview names it widening; the reply to the node's link-local
// address passes before and is kept.
func TestKernelDHCP6ReplyToGlobalAddress(t *testing.T) {
	fwtest.RequireTools(t, "ufw", "iptables-nft")
	n := fwtest.NewNamedNet(t, "d6-", "d6", "8a")
	devOf := func(ns string) (string, string) {
		for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", ns, "-o", "link", "show"), "\n") {
			if f := strings.Fields(l); len(f) > 16 && !strings.HasPrefix(f[1], "lo") {
				for i := range f {
					if f[i] == "link/ether" && i+1 < len(f) {
						return strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0], f[i+1]
					}
				}
			}
		}
		t.Fatalf("no link of %s", ns)
		return "", ""
	}
	nodeDev, nodeMAC := devOf(n.Node)
	peerDev, peerMAC := devOf(n.Peer)
	const srvGlobal, srvLL, nodeLL = "fe80::a1", "fe80::a2", "fe80::b1"
	for _, a := range []string{srvGlobal, srvLL} {
		fwtest.Run(t, "", "ip", "-n", n.Peer, "addr", "add", a+"/64", "dev", peerDev, "nodad")
		fwtest.Run(t, "", "ip", "-n", n.Node, "neigh", "replace", a, "lladdr", peerMAC, "nud", "permanent", "dev", nodeDev)
	}
	fwtest.Run(t, "", "ip", "-n", n.Node, "addr", "add", nodeLL+"/64", "dev", nodeDev, "nodad")
	fwtest.Run(t, "", "ip", "-n", n.Peer, "neigh", "replace", nodeLL, "lladdr", nodeMAC, "nud", "permanent", "dev", peerDev)
	n.Ufw(t, []string{"default", "deny", "incoming"}, []string{"allow", "22/tcp"}, []string{"--force", "enable"})
	toGlobal := fwtest.ClassProbe{Name: "ip6 udp to node sport 547 dport 546", Src: srvGlobal, Dst: fwtest.NodeV6, Proto: 17, Port: 546, Sport: 547}
	toLL := fwtest.ClassProbe{Name: "ip6 udp to " + nodeLL + " sport 547 dport 546", Src: srvLL, Dst: nodeLL, Proto: 17, Port: 546, Sport: 547}
	probes := []fwtest.ClassProbe{toGlobal, toLL}
	before := n.ClassReach(t, probes)
	if before[toGlobal] || !before[toLL] {
		t.Fatalf("before the flip: to the global address %v, to the link-local %v; the fixture wants false, true", before[toGlobal], before[toLL])
	}

	found := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p := PreviewFlipOn(found, node, spec)
	fate := dhcp6Fate(p, toGlobal, true)
	if !p.Approved {
		// Refused: only for the widening, named.
		if fate == nil || fate.Fate != FateWidening {
			t.Fatalf("preview refused (%v) and the reply to the global address has fate %+v: want approved, or refused for it as widening", p.Reasons, fate)
		}
		return
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("derived:\n%s", d.Text())
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := n.ClassReach(t, probes)
	mismatches := 0
	if after[toGlobal] && (fate == nil || fate.Fate != FateWidening) {
		mismatches++
		t.Errorf("the reply to the global address passes after the flip, not before, and the preview's fate is %+v: want widening", fate)
	}
	llFate := dhcp6Fate(p, toLL, false)
	if !after[toLL] {
		mismatches++
		t.Errorf("the reply to the link-local address does not pass after the flip (fate %+v)", llFate)
	}
	if llFate != nil && llFate.Fate != FateKept {
		mismatches++
		t.Errorf("the reply to the link-local address, passing before and after, has fate %+v", llFate)
	}
	fmt.Printf("DHCPv6 reply to a global address: %d probes sent before and after (3 times each), to global %v/%v, to link-local %v/%v (before/after), %d mismatches\n",
		len(probes), before[toGlobal], after[toGlobal], before[toLL], after[toLL], mismatches)
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
}
