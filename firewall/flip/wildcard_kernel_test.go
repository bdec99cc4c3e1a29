package flip

import (
	"fmt"
	"strings"
	"testing"

	"adoption/internal/fwtest"
)

// wildcardFound lets ports in by wildcard input interfaces: 8080 on any
// "br-*" interface, 8081 on them from one address per family only, 8082
// on "eth*" (none of the node's), 8083 on the concrete uplink alone,
// which "br-*" also matches; 8084 anywhere but "br-*" and 8085 on
// "br-*" but from 198.18.0.3 by ufw's spelling (iptables' "-i br-+");
// 8086 on "br-*" but the uplink (which it matches); 8087 anywhere, which
// the plan drops; 8088 anywhere but "br-*", and on the uplink.
const wildcardFound = `table inet found {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		iif lo accept
		tcp dport 22 accept
		iifname "br-*" tcp dport 8080 accept
		iifname "br-*" ip saddr 198.18.0.2 tcp dport 8081 accept
		iifname "br-*" ip6 saddr fd00:f0::2 tcp dport 8081 accept
		iifname "eth*" tcp dport 8082 accept
		iifname "UPLINK" tcp dport 8083 accept
		iifname != "br-*" tcp dport 8084 accept
		tcp dport 8085 accept
		iifname "UPLINK" tcp dport 8086 drop
		iifname "br-*" tcp dport 8086 accept
		tcp dport 8087 accept
		iifname "UPLINK" tcp dport 8088 accept
		iifname "br-*" tcp dport 8088 drop
		tcp dport 8088 accept
	}
}
`

// The kernel as the oracle for restrictions to wildcard input interfaces:
// the node's uplink is named like Docker's bridges (br-w...), a veth, not
// a bridge. The mesh's table carries each restriction as the wildcard
// match (iifname "br-*"), so every probe fares as before: kept where it
// passed, dropped where it did not, and nothing widens.
func TestKernelFlipCarriesWildcardInterfaces(t *testing.T) {
	fwtest.RequireTools(t, "iptables-nft")
	n := fwtest.NewNamedNet(t, "bw-", "br-w", "5d")
	uplink := uplinkOf(t, n)
	if !strings.HasPrefix(uplink, "br-w") {
		t.Fatalf("the node's uplink is %q, want one named br-w...", uplink)
	}
	n.Nft(t, strings.ReplaceAll(wildcardFound, "UPLINK", uplink))
	// ufw's spelling of the wildcard, in an iptables-nft table of its own
	// that lets everything but 8085 through to the native table.
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-A", "INPUT", "-p", "tcp", "--dport", "8085", "-i", "br-+", "!", "-s", fwtest.PeerV4b, "-j", "DROP")
	ports := []uint16{22, 8080, 8081, 8082, 8083, 8084, 8085, 8086, 8087, 8088}
	n.Serve(t, ports)
	var probes []fwtest.Probe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		for _, port := range ports {
			probes = append(probes, fwtest.Probe{Proto: "tcp", Src: s, Port: port})
		}
	}
	before := n.Reach(t, probes)
	for _, c := range []struct {
		src  string
		port uint16
		want bool
	}{{fwtest.PeerV4a, 8080, true}, {fwtest.PeerV4a, 8081, true}, {fwtest.PeerV4b, 8081, false}, {fwtest.PeerV4a, 8082, false}, {fwtest.PeerV4a, 8083, true}, {fwtest.PeerV4a, 8084, false}, {fwtest.PeerV4a, 8086, false}, {fwtest.PeerV4a, 8087, true}, {fwtest.PeerV4a, 8088, true}} {
		if got := before[fwtest.Probe{Proto: "tcp", Src: c.src, Port: c.port}]; got != c.want {
			t.Fatalf("before the flip: tcp from %s to %d reached=%v, want %v (the fixture is not what the test needs)", c.src, c.port, got, c.want)
		}
	}
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8081/tcp", "8082/tcp", "8083/tcp", "8084/tcp", "8085/tcp", "8086/tcp", "8088/tcp")...)}
	spec.Drop = fwtest.Ports("8087/tcp") // closing, on purpose
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, s := range []string{`iifname "br-*" meta nfproto ipv4 meta l4proto tcp th dport 8080`, `iifname "br-*" meta nfproto ipv4 ip saddr @`,
		fmt.Sprintf(`iifname "br-*" iifname != %q meta nfproto ipv4 meta l4proto tcp th dport 8086`, uplink),
		`iifname != "br-*" meta nfproto ipv4 meta l4proto tcp th dport 8088`, fmt.Sprintf(`iifname %q meta nfproto ipv4 meta l4proto tcp th dport 8088 counter accept comment "adoption:n1:web:8088/tcp"`, uplink)} {
		if !strings.Contains(d.Text(), s) {
			t.Errorf("the derived table does not hold %q", s)
		}
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := n.Reach(t, probes)
	var pkts []fwtest.Packet
	bp, ap := map[fwtest.Packet]bool{}, map[fwtest.Packet]bool{}
	claims := map[fwtest.Packet]fwtest.Claim{}
	for _, pr := range probes {
		pk := fwtest.Packet{Class: fmt.Sprintf("tcp %d", pr.Port), Proto: pr.Proto, Src: pr.Src, Port: pr.Port}
		pkts = append(pkts, pk)
		bp[pk], ap[pk] = before[pr], after[pr]
		c := fwtest.Claim{What: "none"}
		if fate := probeFate(p, pr); fate != nil {
			c = fwtest.Claim{Known: true, Kept: fate.Fate == FateKept, Closing: fate.Fate == FateClosing, Declared: fate.Declared, What: fate.Fate}
		}
		claims[pk] = c
	}
	tally := fwtest.CheckFlip(t, "flip carrying wildcard interfaces", pkts, bp, ap, func(pk fwtest.Packet) fwtest.Claim { return claims[pk] })
	if tally.Kept == 0 || tally.Closing == 0 || tally.PassedBefore == len(pkts) {
		t.Errorf("%d kept and %d closing of %d passing before, of %d: the test wants packets kept, closing and dropped", tally.Kept, tally.Closing, tally.PassedBefore, len(pkts))
	}
	revertThenBoot(t, n, f, plan, d)
}
