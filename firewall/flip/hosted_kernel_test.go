package flip

import (
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// The kernel as the oracle for traffic from a container bridge to the node
// itself: the ufw fixture with rules that let docker0's containers reach
// the host's DNS (53/udp, both families) and 5432/tcp from one container
// address only (172.17.0.2, not 172.17.0.3), and drop 8000/tcp from
// docker0 (open to everyone else). Packets from the container's namespace
// to the node's bridge and uplink addresses, before and after a flip
// through the product's path (PreviewFlipOn, then Flip).

const ctrV4b = "172.17.0.3"

// hostedNet is that node, serving hostedPorts, and its container
// namespace (holding 172.17.0.2, 172.17.0.3 and fd00:17::2).
func hostedNet(t *testing.T) (*fwtest.TestNet, string) {
	t.Helper()
	fwtest.RequireTools(t, "iptables-nft", "ip6tables-nft", "sysctl")
	n := fwtest.NewNamedNet(t, "hb-", "hb", "6a")
	ctr := n.Container(t)
	fwtest.Run(t, "", "ip", "-n", ctr, "addr", "add", ctrV4b+"/16", "dev", "eth0")
	f := strings.Fields(fwtest.Run(t, "", "ip", "-n", ctr, "-br", "link", "show", "eth0"))
	if len(f) < 3 {
		t.Fatalf("no address of the container's eth0: %q", f)
	}
	fwtest.Run(t, "", "ip", "-n", n.Node, "neigh", "replace", ctrV4b, "lladdr", f[2], "nud", "permanent", "dev", "docker0")
	fwtest.RestoreUfw(t, n)
	for _, r := range [][]string{
		{"iptables-nft", "-A", "ufw-user-input", "-i", "docker0", "-p", "udp", "-m", "udp", "--dport", "53", "-j", "ACCEPT"},
		{"iptables-nft", "-A", "ufw-user-input", "-i", "docker0", "-s", fwtest.ContainerV4 + "/32", "-p", "tcp", "-m", "tcp", "--dport", "5432", "-j", "ACCEPT"},
		{"iptables-nft", "-I", "ufw-user-input", "1", "-i", "docker0", "-p", "tcp", "-m", "tcp", "--dport", "8000", "-j", "DROP"},
		{"ip6tables-nft", "-A", "ufw6-user-input", "-i", "docker0", "-p", "udp", "-m", "udp", "--dport", "53", "-j", "ACCEPT"},
	} {
		fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node}, r...)...)
	}
	n.Serve(t, []uint16{22, 53, 5432, 7000, 8000, 8001, 9000, 60000})
	return n, ctr
}

// hostedPackets are TCP from each container address to the node's bridge
// and uplink addresses of its family, and UDP to its bridge address.
func hostedPackets(ctr string) []fwtest.Packet {
	var out []fwtest.Packet
	for _, s := range []string{fwtest.ContainerV4, ctrV4b, fwtest.ContainerV6} {
		dsts := []string{"172.17.0.1", fwtest.NodeV4}
		if strings.Contains(s, ":") {
			dsts = []string{"fd00:17::1", fwtest.NodeV6}
		}
		for _, d := range dsts {
			for _, pp := range []struct {
				proto string
				port  uint16
			}{{"tcp", 22}, {"udp", 53}, {"tcp", 5432}, {"tcp", 7000}, {"tcp", 8000}, {"tcp", 8001}, {"tcp", 9000}, {"udp", 60000}} {
				if pp.proto == "udp" && d != dsts[0] {
					// The echo to the uplink's address comes back from the
					// bridge's (a wildcard socket answers from the route's
					// source): the client would not take it.
					continue
				}
				out = append(out, fwtest.Packet{Class: "container to host " + pp.proto, Peer: ctr, Proto: pp.proto, Src: s, Dst: d, Port: pp.port})
			}
		}
	}
	return out
}

// mostSpecific is the fate of p whose opening match holds and whose
// source region holds src, the most specific one (From "": any other
// source).
func mostSpecific(p Preview, src netip.Addr, match func(o firewall.Opening) bool) *Fate {
	var best *Fate
	bits := -1
	for i := range p.Fates {
		f := &p.Fates[i]
		if !match(f.Opening) {
			continue
		}
		b := 0
		if f.Opening.From != "" {
			pfx, err := netip.ParsePrefix(f.Opening.From)
			if err != nil || !pfx.Contains(src) {
				continue
			}
			b = pfx.Bits()
		}
		if b > bits {
			best, bits = f, b
		}
	}
	return best
}

// bridgeFate is the preview's fate of a packet from docker0 to the node:
// the fate of the docker0 opening of its family, proto and port whose
// destination and source regions hold it, the most specific one. A
// region's opening (Class) whose destination is a multicast or broadcast
// block does not hold a packet to the node's own address.
func bridgeFate(p Preview, pk fwtest.Packet) fwtest.Claim {
	// Every packet hostedPackets sends goes to one of the node's own
	// unicast addresses.
	src, dst := netip.MustParseAddr(pk.Src), netip.MustParseAddr(pk.Dst)
	fam := firewall.FamilyIP
	if src.Is6() {
		fam = firewall.FamilyIP6
	}
	best := mostSpecific(p, src, func(o firewall.Opening) bool {
		if o.In != "docker0" || o.Family != fam || o.Proto != pk.Proto || pk.Port < o.Port || pk.Port > firewall.PortEnd(o) {
			return false
		}
		c, ok := vocab.ClassByName(o.Family, o.Class)
		return o.Class == "" || ok && c.Holds(dst, true)
	})
	if best == nil {
		return fwtest.Claim{}
	}
	return fwtest.Claim{Known: true, Kept: best.Fate == FateKept, Closing: best.Fate == FateClosing,
		Declared: best.Fate == FateWidening && best.Declared, What: best.Fate + " (" + describeOpening(best.Opening) + ")"}
}

func TestKernelFlipCarriesContainerToHost(t *testing.T) {
	n, ctr := hostedNet(t)
	found := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	// The probe lists what docker0's containers reach on the node.
	var dns bool
	for _, o := range eval.BridgeOpenings(found, node) {
		if o.In == "docker0" && o.Proto == "udp" && o.Port <= 53 && 53 <= firewall.PortEnd(o) && !o.Uncertain {
			dns = true
		}
	}
	if !dns {
		t.Errorf("the probe's openings from docker0 do not hold 53/udp: %v", eval.BridgeOpenings(found, node))
	}
	pkts := hostedPackets(ctr)
	before := fwtest.ReachFrom(t, pkts)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Drop: ufwDrops()}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	if !strings.Contains(d.Text(), `iifname "docker0" meta nfproto ipv4 meta l4proto udp th dport 53 counter accept`) {
		t.Errorf("the mesh's table does not carry docker0's DNS")
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := fwtest.ReachFrom(t, pkts)
	tally := fwtest.CheckFlip(t, "container to host", pkts, before, after, func(pk fwtest.Packet) fwtest.Claim { return bridgeFate(p, pk) })
	if tally.Kept == 0 || tally.Closing == 0 {
		t.Errorf("%d kept and %d closing packets: the test wants both", tally.Kept, tally.Closing)
	}
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
}
