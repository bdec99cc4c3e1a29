package flip

import (
	"fmt"
	"strings"
	"testing"

	"adoption/internal/fwtest"
)

// The kernel as the oracle for traffic classes the found firewall lets in
// on some input interfaces only: IPv4 ping in on the uplink only, GRE in on
// the uplink from 198.18.0.3 only and from docker0's containers, IPv6 ping
// in on anything but docker0.
// The same packets from the peer (on the uplink) and from a container's
// namespace (in on docker0), before and after a flip through the product's
// path: the restrictions are carried (iifname, iifname !=, saddr), so the
// preview keeps each class and the kernel agrees.
func TestKernelFlipCarriesClassInterfaces(t *testing.T) {
	fwtest.RequireTools(t, "sysctl")
	n := fwtest.NewNamedNet(t, "ci-", "ci", "1d")
	ctr := n.Container(t)
	uplink := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "cin") {
			uplink = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	if uplink == "" {
		t.Fatal("the node's uplink was not found")
	}
	n.Nft(t, fmt.Sprintf(`table inet found {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		ct state invalid drop
		iif lo accept
		iifname %[1]q icmp type echo-request accept
		iifname %[1]q ip saddr %[2]s meta l4proto gre accept
		iifname "docker0" meta l4proto gre accept
		iifname != "docker0" icmpv6 type echo-request accept
		tcp dport 22 accept
	}
}
`, uplink, fwtest.PeerV4b))
	var peer, fromCtr []fwtest.ClassProbe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b} {
		peer = append(peer, fwtest.ClassProbe{Name: "ip icmp type 8 to node", Src: s, Proto: 1, Type: 8}, fwtest.ClassProbe{Name: "ip gre to node", Src: s, Proto: 47})
	}
	peer = append(peer, fwtest.ClassProbe{Name: "ip6 icmpv6 type 128 to node", Src: fwtest.PeerV6a, Proto: 58, Type: 128})
	fromCtr = append(fromCtr,
		fwtest.ClassProbe{Name: "ip icmp type 8 to node", Src: fwtest.ContainerV4, Dst: "172.17.0.1", Proto: 1, Type: 8},
		fwtest.ClassProbe{Name: "ip gre to node", Src: fwtest.ContainerV4, Dst: "172.17.0.1", Proto: 47},
		fwtest.ClassProbe{Name: "ip6 icmpv6 type 128 to node", Src: fwtest.ContainerV6, Dst: "fd00:17::1", Proto: 58, Type: 128})
	reach := func() (map[fwtest.ClassProbe]bool, map[fwtest.ClassProbe]bool) {
		return n.ClassReach(t, peer), n.ClassReachFrom(t, ctr, fromCtr)
	}
	beforePeer, beforeCtr := reach()
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, want := range []string{
		fmt.Sprintf(`iifname %q meta nfproto ipv4 meta l4proto 1 icmp type 8 accept`, uplink),
		fmt.Sprintf(`iifname %q meta nfproto ipv4 ip saddr @input_ip_gre_ip_from meta l4proto 47 accept`, uplink),
		`iifname != "docker0" meta nfproto ipv6 meta l4proto 58 icmpv6 type 128 accept`,
	} {
		if !strings.Contains(d.Text(), want) {
			t.Errorf("the mesh's table does not carry %q", want)
		}
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	afterPeer, afterCtr := reach()
	// A container's packet has the fate of its class in on docker0.
	var ctrFates Preview
	for _, f := range p.Fates {
		if f.Opening.In == "docker0" {
			f.Opening.In = ""
			ctrFates.Fates = append(ctrFates.Fates, f)
		}
	}
	mismatches, kept, passedBefore, passedAfter, sent := 0, 0, 0, 0, 0
	for _, l := range []struct {
		probes        []fwtest.ClassProbe
		before, after map[fwtest.ClassProbe]bool
		fates         Preview
	}{{peer, beforePeer, afterPeer, p}, {fromCtr, beforeCtr, afterCtr, ctrFates}} {
		for _, pr := range l.probes {
			sent += 2
			b, a := l.before[pr], l.after[pr]
			passedBefore += btoi(b)
			passedAfter += btoi(a)
			fate := classFateOf(l.fates, pr)
			switch {
			case a && !b:
				mismatches++
				t.Errorf("%v passes after the flip and did not before (fate %+v)", pr, fate)
			case b && (fate == nil || fate.Fate != FateKept):
				mismatches++
				t.Errorf("%v passed before the flip with fate %+v: want kept", pr, fate)
			case b:
				kept++
				if !a {
					mismatches++
					t.Errorf("%v is kept by the preview and does not pass after the flip", pr)
				}
			}
		}
	}
	fmt.Printf("classes on some interfaces: %d packets sent (before and after, 3 times each), %d passed before, %d pass after, %d kept, %d mismatches\n",
		sent, passedBefore, passedAfter, kept, mismatches)
	if kept == 0 || passedBefore == len(peer)+len(fromCtr) {
		t.Errorf("%d kept of %d passing before: the test wants kept classes and packets dropped by interface", kept, passedBefore)
	}
	for _, pr := range fromCtr {
		if beforeCtr[pr] != (pr.Name == "ip gre to node") {
			t.Errorf("before the flip %v passed %v: the fixture is not what the test needs", pr, beforeCtr[pr])
		}
	}
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
