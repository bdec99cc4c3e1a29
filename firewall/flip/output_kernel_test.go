package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// outputFound is a native nftables node whose output chain drops new
// packets but to 198.18.0.2's 5432/tcp, DNS (53/udp) anywhere, ping, and
// anything to fd00:f0::2; ufw's "deny out" shape as well: 9000/tcp is
// dropped to 198.18.0.3 only.
const outputFound = `table inet found {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		iif lo accept
		tcp dport 22 accept
	}
	chain output {
		type filter hook output priority 0; policy drop;
		ct state established,related accept
		oifname "lo" accept
		ip daddr 198.18.0.3 tcp dport 9000 drop
		tcp dport 9000 accept
		ip daddr 198.18.0.2 tcp dport 5432 accept
		udp dport 53 accept
		icmp type echo-request accept
		ip6 daddr fd00:f0::2 accept
	}
}
`

// The kernel as the oracle for the output policy: new connections from
// the node to the peer's addresses, before and after a flip through the
// product's path. The mesh's output chain carries found's restriction, so
// the preview keeps each family's output, nothing the node could not send
// before passes after, and what it could passes.
func TestKernelFlipCarriesOutputPolicy(t *testing.T) {
	n := fwtest.NewNamedNet(t, "op-", "op", "7c")
	n.Nft(t, outputFound)
	fwtest.ServeIn(t, n.Peer, []uint16{22, 53, 5432, 9000})
	var pkts []fwtest.Packet
	for _, dst := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		src := fwtest.NodeV4
		if strings.Contains(dst, ":") {
			src = fwtest.NodeV6
		}
		for _, pp := range []struct {
			proto string
			port  uint16
		}{{"tcp", 22}, {"udp", 53}, {"tcp", 5432}, {"tcp", 9000}, {"udp", 5432}} {
			pkts = append(pkts, fwtest.Packet{Class: "output " + pp.proto, Peer: n.Node, Proto: pp.proto, Src: src, Dst: dst, Port: pp.port})
		}
	}
	before := fwtest.ReachFrom(t, pkts)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	if !strings.Contains(d.Text(), "chain output") {
		t.Fatalf("the mesh's table has no output chain")
	}
	kept := outputKept(p, func(o firewall.Opening) string { return o.Family })
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := fwtest.ReachFrom(t, pkts)
	tally := fwtest.CheckFlip(t, "output policy", pkts, before, after, func(pk fwtest.Packet) fwtest.Claim {
		fam := firewall.FamilyIP
		if strings.Contains(pk.Dst, ":") {
			fam = firewall.FamilyIP6
		}
		return fwtest.Claim{Known: kept[fam], Kept: kept[fam], What: "output " + fam}
	})
	if tally.Kept == 0 || tally.PassedBefore == len(pkts) {
		t.Errorf("%d kept of %d passing before, of %d: the test wants packets kept and packets dropped", tally.Kept, tally.PassedBefore, len(pkts))
	}
	revertThenBoot(t, n, f, plan, d)
}
