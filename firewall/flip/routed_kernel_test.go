package flip

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// The kernel as the oracle for routed (non-DNAT) forwarding: packets from
// the peer routed through the node to a host behind its bridge (docker0,
// 172.17.0.2 and fd00:17::2), before and after a flip through the
// product's path (PreviewFlipOn, then Flip with the fingerprints it saw).

// routedNet is a node with a host behind docker0 serving routedPorts, and
// a peer that routes to it through the node. It returns the net and the
// node's uplink.
func routedNet(t *testing.T, prefix, octet string) (*fwtest.TestNet, string) {
	t.Helper()
	fwtest.RequireTools(t, "ip", "sysctl", "nft")
	n := fwtest.NewNamedNet(t, prefix, prefix[:2], octet)
	ctr := n.Container(t)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "route", "add", "172.17.0.0/16", "via", fwtest.NodeV4)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", "fd00:17::/64", "via", fwtest.NodeV6)
	fwtest.ServeIn(t, ctr, []uint16{22, 5353, 5432, 6379, 8443, 9443})
	uplink := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], prefix[:2]+"n") {
			uplink = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	if uplink == "" {
		t.Fatal("the node's uplink was not found")
	}
	return n, uplink
}

// routedProbes are TCP and UDP from both peer addresses of each family to
// the host behind the node (dst4, dst6), on every served port and one
// nothing serves.
func routedProbes(dst4, dst6 string) []fwtest.Probe {
	var out []fwtest.Probe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		dst := dst4
		if strings.Contains(s, ":") {
			dst = dst6
		}
		for _, pp := range []struct {
			proto string
			port  uint16
		}{{"tcp", 22}, {"tcp", 5432}, {"tcp", 6379}, {"tcp", 8443}, {"tcp", 9443}, {"udp", 5353}, {"udp", 5432}} {
			out = append(out, fwtest.Probe{Proto: pp.proto, Src: s, Port: pp.port, Dst: dst})
		}
	}
	return out
}

// routedFate is the preview's fate for a routed probe: the fate of the
// routed forward opening (Via a network) of its family, proto and port
// whose network holds its destination and whose source region holds its
// source, the most specific one.
func routedFate(p Preview, pr fwtest.Probe) *Fate {
	src, dst := netip.MustParseAddr(pr.Src), netip.MustParseAddr(pr.Dst)
	var best *Fate
	bestBits := -1
	for i := range p.Fates {
		f := &p.Fates[i]
		o := f.Opening
		if o.Direction != firewall.HookForward || o.Family != pr.Family() || o.Proto != pr.Proto || pr.Port < o.Port || pr.Port > firewall.PortEnd(o) {
			continue
		}
		via, err := netip.ParsePrefix(o.Via)
		if err != nil || !via.Contains(dst) {
			continue // a DNAT's, or another network's
		}
		bits := 0
		if o.From != "" {
			pfx, err := netip.ParsePrefix(o.From)
			if err != nil || !pfx.Contains(src) {
				continue
			}
			bits = pfx.Bits()
		}
		if bits+via.Bits() > bestBits {
			best, bestBits = f, bits+via.Bits()
		}
	}
	return best
}

// routedDifferential sends probes before and after flipping spec, checks
// the kernel against the preview's fates and reverts. It wants some kept
// and some closing probes.
func routedDifferential(t *testing.T, n *fwtest.TestNet, spec MeshSpec, what string) {
	t.Helper()
	routedDifferentialTo(t, n, spec, what, routedProbes(fwtest.ContainerV4, fwtest.ContainerV6))
}

// routedDifferentialTo is routedDifferential with probes.
func routedDifferentialTo(t *testing.T, n *fwtest.TestNet, spec MeshSpec, what string, probes []fwtest.Probe) {
	t.Helper()
	before := n.Reach(t, probes)
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, f := range p.Fates {
		if f.Opening.Direction == firewall.HookForward {
			t.Logf("fate: %s %s (%s)", f.Fate, portSpec(f.Opening), describeOpening(f.Opening))
		}
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := n.Reach(t, probes)
	mismatches, kept, closing, passedBefore, passedAfter := 0, 0, 0, 0, 0
	for _, pr := range probes {
		b, a := before[pr], after[pr]
		if b {
			passedBefore++
		}
		if a {
			passedAfter++
		}
		fate := routedFate(p, pr)
		switch {
		case a && !b && (fate == nil || fate.Fate != FateWidening || !fate.Declared):
			mismatches++
			t.Errorf("%v passes after the flip and did not before, undeclared (fate %+v)", pr, fate)
		case b && fate == nil:
			mismatches++
			t.Errorf("%v passed before the flip and the preview gives it no fate", pr)
		case b && fate.Fate == FateKept:
			kept++
			if !a {
				mismatches++
				t.Errorf("%v is kept by the preview and does not pass after the flip", pr)
			}
		case b && fate.Fate == FateClosing:
			closing++
			if a {
				mismatches++
				t.Errorf("%v is closing by the preview and passes after the flip", pr)
			}
		case b:
			mismatches++
			t.Errorf("%v passed before with fate %+v: want kept or closing", pr, fate)
		}
	}
	fmt.Printf("routed forwarding, %s: %d packets sent (%d probes before and after), %d pass before, %d pass after, %d kept, %d closing, %d mismatches\n",
		what, 2*len(probes), len(probes), passedBefore, passedAfter, kept, closing, mismatches)
	if kept == 0 || closing == 0 {
		t.Errorf("%d kept and %d closing probes: the test wants both", kept, closing)
	}
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	if got := n.Reach(t, probes); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after the revert the node answers otherwise than before the flip")
	}
	// The boot file's table, routed rules and sets included, is what nft
	// loads.
	boot, err := BootRuleset(d.Spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	fwtest.Run(t, boot, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
	meshListed(t, n, d, "the boot file's table")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "nft", "delete", "table", "inet", firewall.MeshTable)
}

// nativeForward is a native ruleset whose forward chain accepts tcp dport
// { 5432, 6379 } from anyone, 5353/udp from 198.18.0.3 only, and 9443 in
// on uplink only.
func nativeForward(uplink string) string {
	return fmt.Sprintf(`table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		tcp dport 22 accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		tcp dport { 5432, 6379 } accept
		ip saddr %s udp dport 5353 accept
		iifname %q tcp dport 9443 accept
	}
}
`, fwtest.PeerV4b, uplink)
}

// ufwRouteRules restores the ufw fixture on n's node with route rules:
// from 198.18.0.3 and fd00:f0::3 to port 6379, 5353/udp, and in on the
// uplink to 9443.
func ufwRouteRules(t *testing.T, n *fwtest.TestNet, uplink string) {
	t.Helper()
	fwtest.RestoreUfw(t, n)
	for _, r := range [][]string{
		{"iptables-nft", "-A", "ufw-user-forward", "-s", fwtest.PeerV4b + "/32", "-p", "tcp", "-m", "tcp", "--dport", "6379", "-j", "ACCEPT"},
		{"iptables-nft", "-A", "ufw-user-forward", "-p", "udp", "-m", "udp", "--dport", "5353", "-j", "ACCEPT"},
		{"iptables-nft", "-A", "ufw-user-forward", "-i", uplink, "-p", "tcp", "-m", "tcp", "--dport", "9443", "-j", "ACCEPT"},
		{"ip6tables-nft", "-A", "ufw6-user-forward", "-s", fwtest.PeerV6b + "/128", "-p", "tcp", "-m", "tcp", "--dport", "6379", "-j", "ACCEPT"},
		{"ip6tables-nft", "-A", "ufw6-user-forward", "-p", "udp", "-m", "udp", "--dport", "5353", "-j", "ACCEPT"},
		{"ip6tables-nft", "-A", "ufw6-user-forward", "-i", uplink, "-p", "tcp", "-m", "tcp", "--dport", "9443", "-j", "ACCEPT"},
	} {
		fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node}, r...)...)
	}
}

// ufwDrops are the input ports of the ufw fixture the specs below do not
// keep: closing on purpose (and 2222's rate limit cannot be carried).
func ufwDrops() []vocab.Port {
	var out []vocab.Port
	for p := uint16(8000); p <= 8010; p++ {
		out = append(out, vocab.Port{Num: p, Proto: "tcp"})
	}
	for p := uint16(60000); p <= 60010; p++ {
		out = append(out, vocab.Port{Num: p, Proto: "udp"})
	}
	return append(out, fwtest.Ports("7000/tcp", "2222/tcp")...)
}

// The ufw fixture with routed rules: route allow 8443/tcp (the fixture's
// own), from 198.18.0.3 and fd00:f0::3 to port 6379, 5353/udp, and in on
// the uplink to 9443 (an interface the mesh's table, read without the
// node, cannot carry: closing, dropped on purpose).
func TestKernelRoutedUfw(t *testing.T) {
	fwtest.RequireTools(t, "iptables-nft", "ip6tables-nft")
	n, uplink := routedNet(t, "ru-", "5a")
	ufwRouteRules(t, n, uplink)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	spec.Drop = append(ufwDrops(), fwtest.Ports("9443/tcp")...)
	routedDifferential(t, n, spec, "ufw route rules")
}

// A native nftables node whose forward chain accepts tcp dport { 5432,
// 6379 } from anyone, 5353/udp from 198.18.0.3 only, and 9443 in on the
// uplink only (closing, dropped on purpose).
func TestKernelRoutedNativeForward(t *testing.T) {
	n, uplink := routedNet(t, "rn-", "5b")
	n.Nft(t, nativeForward(uplink))
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Drop: fwtest.Ports("9443/tcp")}
	routedDifferential(t, n, spec, "native forward chain")
}
