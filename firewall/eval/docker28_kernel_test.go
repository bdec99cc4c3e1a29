package eval

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Root tests of a Docker 28 node: Docker 28's chains as iptables-nft
// writes them, with the raw table's drop of each container's address
// reached other than through its bridge, a DNAT to a port range, and a
// ufw-like INPUT allowing 22/tcp. The evaluator decides the raw drops
// against the node's own addresses (a client of the node never sends to
// the container's), so nothing is uncertain; real packets from the peer
// check every opening it reports, and packets routed to the container's
// address directly check RoutedTo.

func TestKernelDocker28(t *testing.T) {
	n := fwtest.NewNamedNet(t, "d28-", "d8", "0c")
	fwtest.RequireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "iptables-nft", "sysctl")
	ctr := n.Container(t)
	fwtest.Run(t, fwtest.Docker28Rules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, fwtest.Docker28Rules6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	fwtest.ServeIn(t, ctr, []uint16{8080, 8053, 9100, 18102, 18103, 18104, 18105})
	host := []uint16{22, 8080, 18080, 18053, 18090, 19100}
	for p := uint16(18099); p <= 18111; p++ {
		host = append(host, p)
	}
	n.Serve(t, host)
	ports := fwtest.RandomPorts(host, 6)
	srcs := []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a}
	open, node, rs := fwtest.DnatOracle(n, t, OpenPortsOn, ports, srcs, []string{"tcp", "udp"})
	for _, fam := range []string{firewall.FamilyIP, firewall.FamilyIP6} {
		fwtest.AssertOpen(t, open, firewall.Opening{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: fam})
	}
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8080"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18053, Proto: "udp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8053"})
	// The port range: 18100-18101 and 18106-18110 go to the range's first
	// port, 18102-18105 keep theirs; DOCKER accepts 18102 and 18104.
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18100, PortEnd: 18102, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18102"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18104, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18104"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18106, PortEnd: 18110, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18102"})
	// Published on the uplink's address only: reached there, and not at
	// docker0's address (the node's input drops 18090).
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18090, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, To: fwtest.NodeV4, Via: "172.17.0.2:8080"})
	for _, o := range open {
		if o.Uncertain {
			t.Errorf("uncertain opening on a Docker 28 node: %+v", o)
		}
		if o.Port <= 18090 && 18090 <= firewall.PortEnd(o) && o.To != fwtest.NodeV4 {
			t.Errorf("18090 open at another address: %+v", o)
		}
	}
	if os.Getenv("FW_SAVE_FIXTURES") != "" {
		saveFixture(t, "docker28", rs, node)
	}

	// The container's address sent to directly, routed through the node:
	// the raw drop stops it before Docker's DOCKER chain would accept it.
	fwtest.Run(t, "", "ip", "-n", n.Peer, "route", "add", "172.17.0.0/16", "via", fwtest.NodeV4)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", "fd00:17::/64", "via", fwtest.NodeV6)
	direct := []netip.AddrPort{netip.MustParseAddrPort("172.17.0.2:8080"), netip.MustParseAddrPort("172.17.0.2:9100"), netip.MustParseAddrPort("[fd00:17::2]:8080")}
	checked := len(ports) * len(srcs) * 2
	checked += routedOracle(t, n, rs, node, direct, map[string]bool{})
	// docker0's own address, 172.17.0.1, is the node's too: 18090 is not
	// published there, and the node's input drops it; 22 is open there.
	for _, w := range []struct {
		port uint16
		want bool
	}{{18090, false}, {22, true}} {
		d := netip.AddrPortFrom(netip.MustParseAddr("172.17.0.1"), w.port)
		got := dialFromPeer(t, n, d)
		predicted := false
		for _, o := range open {
			if o.Family == firewall.FamilyIP && o.Proto == "tcp" && o.Port <= w.port && w.port <= firewall.PortEnd(o) && (o.To == "" || o.To == "172.17.0.1") {
				predicted = !o.Uncertain
			}
		}
		if got != w.want || predicted != got {
			t.Errorf("to %s: kernel reach=%v, predicted %v, want %v", d, got, predicted, w.want)
		}
		checked++
	}
	// Without the raw drops the kernel lets 8080 through to the container
	// (DOCKER accepts it whatever the address the client used), and the
	// evaluator must say so too: the oracle tells the two apart.
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-t", "raw", "-F", "PREROUTING")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ip6tables-nft", "-t", "raw", "-F", "PREROUTING")
	checked += routedOracle(t, n, n.List(t), node, direct, map[string]bool{"172.17.0.2:8080": true, "[fd00:17::2]:8080": true})
	t.Logf("Docker 28 node: %d packets checked against the kernel in all", checked)
}

// routedOracle sends a TCP connection from the peer to each of dsts (the
// container's addresses, routed through the node) and compares the kernel
// with RoutedTo; want says which are expected through. It returns how
// many it checked.
func routedOracle(t *testing.T, n *fwtest.TestNet, rs *firewall.Ruleset, node firewall.Node, dsts []netip.AddrPort, want map[string]bool) int {
	t.Helper()
	bad := 0
	for _, d := range dsts {
		open, unc, why := RoutedTo(rs, node, d, "tcp")
		got := dialFromPeer(t, n, d)
		switch {
		case unc:
			bad++
			t.Errorf("routed to %s: uncertain (%s), kernel says reach=%v", d, why, got)
		case open != got:
			bad++
			t.Errorf("routed to %s: predicted reach=%v, kernel says %v", d, open, got)
		case got != want[d.String()]:
			t.Errorf("routed to %s: reach=%v, want %v", d, got, want[d.String()])
		}
	}
	t.Logf("kernel oracle, routed to the container: %d packets checked, %d mismatches", len(dsts), bad)
	return len(dsts)
}

// Docker 28.0-28.1 matched the container bridges with an ipset
// (docker-ext-bridges-v4), which iptables-nft writes as an xt set match.
// The set's members are not visible through nftables; the listing reads
// them through ipset's own netlink (nft.IPSets), and the match is decided: the
// published ports are open, checked against the kernel. With an element
// the evaluator does not read (nomatch), the match stays undecided, named,
// and the published port is uncertain, never surely open or closed.
func TestKernelDocker280Ipset(t *testing.T) {
	n := fwtest.NewNamedNet(t, "d28-", "d9", "0d")
	fwtest.RequireTools(t, "iptables-nft-restore", "iptables-nft", "ipset")
	ctr := n.Container(t)
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "create", "docker-ext-bridges-v4", "hash:net")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "add", "docker-ext-bridges-v4", "172.17.0.0/16")
	fwtest.Run(t, fwtest.Docker28Rules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-F", "DOCKER-FORWARD")
	for _, r := range fwtest.Docker280Forward {
		fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node, "iptables-nft"}, r...)...)
	}
	fwtest.ServeIn(t, ctr, []uint16{8080, 8053, 18102, 18104})
	host := []uint16{22, 18080, 18053, 18100, 18103, 18104, 18110}
	n.Serve(t, host)
	open, node, rs := fwtest.DnatOracle(n, t, OpenPortsOn, host, []string{fwtest.PeerV4a, fwtest.PeerV4b}, []string{"tcp", "udp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"})
	decoded, _ := findCond(rs, func(c *firewall.Cond) bool {
		return c.Kind == firewall.CondDaddr && len(c.Prefixes) == 1 && c.Prefixes[0].String() == "172.17.0.0/16"
	})
	if decoded != "DOCKER-FORWARD" {
		t.Errorf("the xt set match was not decoded to its ipset's members (ip daddr 172.17.0.0/16) in DOCKER-FORWARD")
	}

	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "add", "docker-ext-bridges-v4", "172.17.9.0/24", "nomatch")
	rs = n.List(t)
	_, reason := findCond(rs, func(c *firewall.Cond) bool {
		return c.Kind == firewall.CondUndecidable && strings.Contains(c.Reason, "ipset")
	})
	if !strings.Contains(reason, "match on ipset docker-ext-bridges-v4: it holds nomatch entries") {
		t.Errorf("the xt set match with a nomatch element decoded as %q; want it undecided, the set named", reason)
	}
	open = OpenPortsOn(rs, node)
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080", Uncertain: true})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP})
	got := n.Reach(t, []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18080}})
	if !got[fwtest.Probe{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18080}] {
		t.Errorf("kernel: 18080 not reached; the ipset's nomatch element is elsewhere")
	}
	t.Logf("undecided: %s (18080 uncertain, reached by the kernel)", reason)
}

// findCond returns the chain and reason of the last condition in rs that
// match holds for.
func findCond(rs *firewall.Ruleset, match func(*firewall.Cond) bool) (chain, reason string) {
	for _, tb := range rs.Tables {
		for _, ch := range tb.Chains {
			for _, r := range ch.Rules {
				for i := range r.Conds {
					if match(&r.Conds[i]) {
						chain, reason = ch.Name, r.Conds[i].Reason
					}
				}
			}
		}
	}
	return chain, reason
}

// A native "dnat to ADDR:LO-HI": the kernel keeps a client's port inside
// the range and sends any other to the range's first; with "random" it
// picks any port of the range, so the evaluator follows every one of them
// (all accepted here: surely open; some: uncertain, named).
func TestKernelDNATPortRangeNative(t *testing.T) {
	n := fwtest.NewNamedNet(t, "d28-", "da", "0e")
	fwtest.RequireTools(t, "sysctl")
	ctr := n.Container(t)
	n.Nft(t, `
table ip host {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		fib daddr type local tcp dport 18200-18210 dnat to 172.17.0.2:18202-18205
		fib daddr type local tcp dport 18300 dnat to 172.17.0.2:18302-18303 random
		fib daddr type local tcp dport 18400 dnat to 172.17.0.2:18402-18403 random
	}
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		tcp dport 22 accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		oifname "docker0" tcp dport { 18202, 18204, 18302, 18303, 18402 } accept
	}
}`)
	fwtest.ServeIn(t, ctr, []uint16{18202, 18203, 18204, 18205, 18302, 18303, 18402, 18403})
	ports := []uint16{22, 18199, 18300}
	for p := uint16(18200); p <= 18211; p++ {
		ports = append(ports, p)
	}
	n.Serve(t, append(ports, 18400))
	open, _, _ := fwtest.DnatOracle(n, t, OpenPortsOn, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b}, []string{"tcp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18200, PortEnd: 18202, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18202"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18204, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18204"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18206, PortEnd: 18210, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18202"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18300, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18302-18303"})
	half := fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 18400)
	if len(half) != 1 || !half[0].Uncertain || !strings.Contains(half[0].Reason, "at random") {
		t.Errorf("18400 to 18402-18403 at random, only 18402 accepted: %+v; want uncertain, named", half)
	}
	// Where the port picked at random is dropped, the kernel drops the
	// connection: some of 20 tries get through, some do not.
	probe := fwtest.Probe{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18400}
	through := 0
	for i := 0; i < 20; i++ {
		if n.Reach(t, []fwtest.Probe{probe})[probe] {
			through++
		}
	}
	t.Logf("18400 (random between an accepted and a dropped port): %d of 20 connections through", through)
	if through == 0 || through == 20 {
		t.Errorf("18400: %d of 20 through; the kernel picks either port", through)
	}
}

// dialFromPeer reports whether a TCP connection from the peer to d
// completes.
func dialFromPeer(t *testing.T, n *fwtest.TestNet, d netip.AddrPort) bool {
	t.Helper()
	got := false
	err := fwtest.InNetns(n.Peer, func() error {
		c, err := net.DialTimeout("tcp", d.String(), 400*time.Millisecond)
		if err == nil {
			got = true
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
