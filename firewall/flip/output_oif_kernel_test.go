package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// A second link from the node to the peer, named like a WireGuard
// interface, on networks of its own.
const (
	oifNodeV4 = "198.19.0.1"
	oifPeerV4 = "198.19.0.2"
	oifNodeV6 = "fd00:f1::1"
	oifPeerV6 = "fd00:f1::2"
)

// oifFound is a native nftables node whose output chain tells output
// interfaces apart: by the uplink (UPLINK) 9000/tcp is dropped and
// 5432/tcp to 198.18.0.3 too; by "wg*" 9001/tcp passes, which by any
// other interface does not; DNS passes by any interface but "wg*"; IPv6
// passes by the uplink to fd00:f0::2 alone; 5432/tcp and 9000/tcp pass
// anywhere else.
const oifFound = `table inet found {
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
		oifname "UPLINK" tcp dport 9000 drop
		oifname "UPLINK" ip daddr 198.18.0.3 tcp dport 5432 drop
		oifname "UPLINK" meta nfproto ipv6 ip6 daddr != fd00:f0::2 drop
		tcp dport 5432 accept
		tcp dport 9000 accept
		oifname "wg*" tcp dport 9001 accept
		oifname != "wg*" udp dport 53 accept
		ip6 daddr fd00:f0::2 accept
	}
}
`

// The kernel as the oracle for an output policy restricted by output
// interface: new connections from the node to the peer over two links,
// the uplink and a "wg*" one, before and after a flip through the
// product's path. The mesh's output chain carries each interface's
// restriction (oifname matches, the wildcard as a wildcard), the preview
// keeps each family's output per interface class, nothing the node could
// not send before passes after, and what it could passes.
func TestKernelFlipCarriesOutputInterfaces(t *testing.T) {
	n := fwtest.NewNamedNet(t, "oo-", "oo", "7d")
	uplink := uplinkOf(t, n)
	if uplink == "" {
		t.Fatal("no veth in the node")
	}
	wg, wgp := "wgo"+uplink[len(uplink)-4:], "wgp"+uplink[len(uplink)-4:]
	nodeMAC, peerMAC := "02:00:c6:13:7d:01", "02:00:c6:13:7d:02"
	fwtest.Run(t, "", "ip", "link", "add", wg, "netns", n.Node, "address", nodeMAC, "type", "veth", "peer", "name", wgp, "netns", n.Peer, "address", peerMAC)
	for _, s := range []struct{ ns, dev, v4, v6, mac, n4, n6 string }{
		{n.Node, wg, oifNodeV4, oifNodeV6, peerMAC, oifPeerV4, oifPeerV6},
		{n.Peer, wgp, oifPeerV4, oifPeerV6, nodeMAC, oifNodeV4, oifNodeV6},
	} {
		fwtest.Run(t, "", "ip", "-n", s.ns, "addr", "add", s.v4+"/24", "dev", s.dev)
		fwtest.Run(t, "", "ip", "-n", s.ns, "addr", "add", s.v6+"/64", "dev", s.dev, "nodad")
		fwtest.Run(t, "", "ip", "-n", s.ns, "link", "set", s.dev, "up")
		// Neighbours fixed: the output policy drops neighbour discovery.
		fwtest.Run(t, "", "ip", "-n", s.ns, "neigh", "replace", s.n4, "lladdr", s.mac, "nud", "permanent", "dev", s.dev)
		fwtest.Run(t, "", "ip", "-n", s.ns, "neigh", "replace", s.n6, "lladdr", s.mac, "nud", "permanent", "dev", s.dev)
	}
	n.Nft(t, strings.ReplaceAll(oifFound, "UPLINK", uplink))
	ports := []struct {
		proto string
		port  uint16
	}{{"tcp", 22}, {"udp", 53}, {"tcp", 5432}, {"tcp", 9000}, {"tcp", 9001}, {"udp", 5432}}
	fwtest.ServeIn(t, n.Peer, []uint16{22, 53, 5432, 9000, 9001}) // tcp and udp each
	// The interface class each destination leaves by.
	by := map[string]string{fwtest.PeerV4a: "", fwtest.PeerV4b: "", fwtest.PeerV6a: "", fwtest.PeerV6b: "", oifPeerV4: "wg*", oifPeerV6: "wg*"}
	var pkts []fwtest.Packet
	for _, dst := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b, oifPeerV4, oifPeerV6} {
		src := fwtest.NodeV4
		switch {
		case dst == oifPeerV4:
			src = oifNodeV4
		case dst == oifPeerV6:
			src = oifNodeV6
		case strings.Contains(dst, ":"):
			src = fwtest.NodeV6
		}
		class := "output by " + uplink
		if by[dst] != "" {
			class = "output by wg*"
		}
		for _, pp := range ports {
			pkts = append(pkts, fwtest.Packet{Class: class + " " + pp.proto, Peer: n.Node, Proto: pp.proto, Src: src, Dst: dst, Port: pp.port})
		}
	}
	before := fwtest.ReachFrom(t, pkts)
	for _, c := range []struct {
		dst  string
		port uint16
		want bool
	}{{fwtest.PeerV4a, 9000, false}, {oifPeerV4, 9000, true}, {fwtest.PeerV4a, 9001, false}, {oifPeerV4, 9001, true}, {fwtest.PeerV4b, 5432, false}, {fwtest.PeerV4a, 5432, true}} {
		for _, pk := range pkts {
			if pk.Dst == c.dst && pk.Port == c.port && pk.Proto == "tcp" && before[pk] != c.want {
				t.Fatalf("before the flip: tcp to %s port %d passed=%v, want %v (the fixture is not what the test needs)", c.dst, c.port, before[pk], c.want)
			}
		}
	}
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, s := range []string{`oifname "wg*" meta nfproto ipv4`, `oifname != "` + uplink + `" oifname != "wg*" meta nfproto`, `oifname "` + uplink + `" meta nfproto ipv6 ip6 daddr != @`} {
		if !strings.Contains(d.Text(), s) {
			t.Errorf("the mesh's output chain does not hold %q", s)
		}
	}
	kept := outputKept(p, func(o firewall.Opening) string { return o.Family + " " + o.Out })
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := fwtest.ReachFrom(t, pkts)
	tally := fwtest.CheckFlip(t, "output by interface", pkts, before, after, func(pk fwtest.Packet) fwtest.Claim {
		fam := firewall.FamilyIP
		if strings.Contains(pk.Dst, ":") {
			fam = firewall.FamilyIP6
		}
		out := by[pk.Dst]
		if out == "" {
			out = uplink
		}
		k := kept[fam+" "+out]
		return fwtest.Claim{Known: k, Kept: k, What: "output " + fam + " by " + out}
	})
	if tally.Kept == 0 || tally.PassedBefore == len(pkts) {
		t.Errorf("%d kept of %d passing before, of %d: the test wants packets kept and packets dropped", tally.Kept, tally.PassedBefore, len(pkts))
	}
	revertThenBoot(t, n, f, plan, d)
}
