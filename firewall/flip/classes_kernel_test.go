package flip

import (
	"fmt"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// classFound is a native nftables node that lets ping in from 10.9.0.0/24
// (IPv4) and fd00:f0::2 (IPv6) only, neighbour discovery with hop limit 255
// from anyone, ESP from 10.9.0.0/24, GRE from anyone, VRRP to 224.0.0.18,
// mDNS to 224.0.0.251 and DHCP requests to 255.255.255.255; everything else
// (SCTP, MLD queries, the IPv6 multicast services) is dropped.
const classFound = `table inet found {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		ct state invalid drop
		iif lo accept
		ip saddr 10.9.0.0/24 icmp type echo-request accept
		ip6 saddr fd00:f0::2 icmpv6 type echo-request accept
		icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-advert } ip6 hoplimit 255 accept
		ip saddr 10.9.0.0/24 meta l4proto esp accept
		meta l4proto gre accept
		ip daddr 224.0.0.18 meta l4proto vrrp accept
		ip daddr 224.0.0.251 udp dport 5353 accept
		ip daddr 255.255.255.255 udp dport 67 accept
		tcp dport 22 accept
	}
}
`

var classSources = []string{fwtest.PeerV4a, "10.9.0.5", "10.8.0.5", fwtest.PeerV6a, fwtest.PeerV6b}

func classNet(t *testing.T) *fwtest.TestNet {
	t.Helper()
	n := fwtest.NewNamedNet(t, "cl-", "cl", "1c")
	dev := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Peer, "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && !strings.HasPrefix(f[1], "lo") {
			dev = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	for _, s := range []string{"10.9.0.5", "10.8.0.5"} {
		fwtest.Run(t, "", "ip", "-n", n.Peer, "addr", "add", s+"/32", "dev", dev)
	}
	for _, p := range []string{"10.8.0.0/16", "10.9.0.0/16"} {
		fwtest.Run(t, "", "ip", "-n", n.Node, "route", "add", p, "via", fwtest.PeerV4a)
	}
	n.Nft(t, classFound)
	return n
}

func classProbes() []fwtest.ClassProbe { return fwtest.RegionProbes(fwtest.ProbeRegions, classSources) }

// classFateOf is the preview's fate whose region and source region hold
// probe p (the most specific source region; "" any other source).
func classFateOf(p Preview, pr fwtest.ClassProbe) *Fate {
	var best *Fate
	for i := range p.Fates {
		f := &p.Fates[i]
		o := f.Opening
		if o.In != "" || !fwtest.Holds(o, pr) {
			continue
		}
		if o.From == "" {
			if best == nil {
				best = f
			}
			continue
		}
		best = f
	}
	return best
}

// The kernel as the oracle for the traffic classes beyond TCP and UDP by
// port: ping (restricted by source), neighbour discovery, router adverts,
// MLD, ESP, GRE, VRRP, SCTP, mDNS and a DHCP server's broadcast, from
// sources inside and outside each allowed prefix, before and after a flip
// through the product's path (PreviewFlipOn, then Flip). The evaluator's
// openings agree with the kernel before; after, every packet that passes
// passed before, every kept one passes, every closing one is dropped.
func TestKernelFlipCarriesClasses(t *testing.T) {
	n := classNet(t)
	classDifferential(t, n, MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}, "native nftables node", []classWant{
		{"ip icmp type 8 to node", "10.9.0.5", true}, {"ip icmp type 8 to node", "10.8.0.5", false}, {"ip6 icmpv6 type 128 to node", fwtest.PeerV6b, false},
		{"ip udp to 224.0.0.251 dport 5353", "10.8.0.5", true}, {"ip sctp to node", fwtest.PeerV4a, false}})
}

// The same on a ufw node (its before.rules: ping, neighbour discovery with
// hop limit 255, MLD from link-local sources, mDNS), with a source-limited
// ssh, deny lists and an ipset blocklist.
func TestKernelUfwFlipCarriesClasses(t *testing.T) {
	n := narrowNet(t)
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8080/udp")...)}
	spec.Drop = fwtest.Ports("9999/tcp")
	classDifferential(t, n, spec, "ufw node", []classWant{
		{"ip icmp type 8 to node", "10.8.0.5", true}, {"ip udp to 224.0.0.251 dport 5353", "10.8.0.5", true}, {"ip gre to node", fwtest.PeerV4a, false},
		{"ip6 icmpv6 type 135 to node", fwtest.PeerV6a, true}, {"ip6 icmpv6 type 130 to ff02::1", fwtest.PeerV6a, false}})
}

// Declared classes on the same native node: GRE (open from anyone) in
// flip.drop closes in both families, IPv4's ping (open from 10.9.0.0/24
// only) in flip.widen passes from every source after the flip; IPv6's
// ping, not declared, keeps its one source. Every packet that passes
// after the flip passed before or is a declared widening; every dropped
// one is dropped.
func TestKernelFlipDeclaredClasses(t *testing.T) {
	n := classNet(t)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), DropClasses: []string{"ip gre", "ip6 gre"}, WidenClasses: []string{"ip icmp type 8"}}
	classDifferential(t, n, spec, "native nftables node, gre dropped and IPv4 ping widened", []classWant{
		{"ip icmp type 8 to node", "10.8.0.5", false}, {"ip gre to node", fwtest.PeerV4a, true}},
		func(after map[fwtest.ClassProbe]bool) {
			for pr, a := range after {
				switch {
				case pr.Name == "ip icmp type 8 to node" && !a:
					t.Errorf("the widened ping does not pass from %s after the flip", pr.Src)
				case strings.Contains(pr.Name, " gre ") && a:
					t.Errorf("the dropped GRE passes from %s after the flip", pr.Src)
				case pr.Name == "ip6 icmpv6 type 128 to node" && a != (pr.Src == fwtest.PeerV6a):
					t.Errorf("IPv6's ping from %s after the flip: %v (not declared: it keeps its one source)", pr.Src, a)
				}
			}
		})
}

type classWant struct {
	name, src string
	want      bool
}

// classDifferential sends every class's probes before and after a flip of
// n through the product's path and compares the kernel's answers with the
// evaluator's and the preview's; wants check the fixture first.
func classDifferential(t *testing.T, n *fwtest.TestNet, spec MeshSpec, label string, wants []classWant, checks ...func(after map[fwtest.ClassProbe]bool)) {
	t.Helper()
	regionDifferential(t, n, classProbes(), spec, label, wants, checks...)
}

// regionDifferential is classDifferential with probes.
func regionDifferential(t *testing.T, n *fwtest.TestNet, probes []fwtest.ClassProbe, spec MeshSpec, label string, wants []classWant, checks ...func(after map[fwtest.ClassProbe]bool)) {
	t.Helper()
	before := n.ClassReach(t, probes)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	found := n.List(t)
	predicted := eval.ClassOpenings(found, node)
	oracle := 0
	for _, pr := range probes {
		want := false
		for _, o := range predicted {
			if fwtest.Holds(o, pr) {
				want = true
			}
		}
		if want != before[pr] {
			oracle++
			t.Errorf("before the flip: %v: predicted %v, the kernel says %v", pr, want, before[pr])
		}
	}
	for _, c := range wants {
		for _, pr := range probes {
			if pr.Name == c.name && pr.Src == c.src && before[pr] != c.want {
				t.Fatalf("before the flip: %v reached=%v, want %v (the fixture is not what the test needs)", pr, before[pr], c.want)
			}
		}
	}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := n.ClassReach(t, probes)
	for _, check := range checks {
		check(after)
	}
	mismatches, kept, closing, declared, passedBefore, passedAfter := 0, 0, 0, 0, 0, 0
	for _, pr := range probes {
		b, a := before[pr], after[pr]
		if b {
			passedBefore++
		}
		if a {
			passedAfter++
		}
		fate := classFateOf(p, pr)
		switch {
		case a && !b && fate != nil && fate.Fate == FateWidening && fate.Declared:
			declared++
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
		case b && fate.Fate == FateClosing:
			closing++
			if a {
				mismatches++
				t.Errorf("%v is closing by the preview and passes after the flip", pr)
			}
		}
	}
	fmt.Printf("%s, flip carrying traffic classes: %d probes (%d sent before and after, 3 times each), %d pass before, %d pass after, %d kept, %d closing, %d declared widenings passing, %d mismatches; evaluator against the kernel before: %d mismatches\n",
		label, len(probes), 2*len(probes), passedBefore, passedAfter, kept, closing, declared, mismatches, oracle)
	if kept == 0 || passedBefore == len(probes) {
		t.Errorf("%d kept of %d passing before, of %d probes: the test wants kept and dropped classes", kept, passedBefore, len(probes))
	}
	revertThenBoot(t, n, f, plan, d)
}
