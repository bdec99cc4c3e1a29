package fwtest

// The class probes' oracle itself against the kernel: a packet the node
// forwards and rewrites on the way (Docker's masquerade of its
// containers' egress) is still the probe it was, and one the node drops
// is not received.

import (
	"regexp"
	"strconv"
	"testing"
)

// A container pings out of the uplink through a masquerade, as Docker
// writes one for its bridge's network: the peer receives the echo request
// from the node's address, not the container's, and the probe has passed.
// With the forward hook dropping, it has not.
func TestClassReachThroughMasquerade(t *testing.T) {
	RequireTools(t, "nft", "sysctl")
	n := NewNamedNet(t, "cm-", "cm", "9c")
	ctr := n.Container(t)
	n.Nft(t, `table inet masq {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		oifname != "docker0" ip saddr 172.17.0.0/16 counter masquerade
		oifname != "docker0" ip6 saddr fd00:17::/64 counter masquerade
	}
}
`)
	out := []ClassProbe{
		{Name: "ip icmp type 8", Src: ContainerV4, Dst: PeerV4a, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128", Src: ContainerV6, Dst: PeerV6a, Proto: 58, Type: 128},
	}
	FlushConntrack(t, n.Node)
	got := ClassReachTo(t, ctr, n.Peer, out)
	for _, p := range out {
		if !got[p] {
			t.Errorf("%v: not received through the masquerade", p)
		}
	}
	// The masquerade did rewrite them: each rule counted its family's.
	listing := Run(t, "", "ip", "netns", "exec", n.Node, "nft", "list", "table", "inet", "masq")
	for _, m := range regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(listing, -1) {
		if k, _ := strconv.Atoi(m[1]); k == 0 {
			t.Errorf("a masquerade rule counted no packet: the probes were not rewritten, the test judges nothing:\n%s", listing)
		}
	}
	n.Nft(t, "table inet stop { chain forward { type filter hook forward priority filter; policy drop; }; }\n")
	FlushConntrack(t, n.Node)
	got = ClassReachTo(t, ctr, n.Peer, out)
	for _, p := range out {
		if got[p] {
			t.Errorf("%v: received with the forward hook dropping", p)
		}
	}
}
