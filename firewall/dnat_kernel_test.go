package firewall

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Root tests of the evaluator through DNAT: the node namespace gets a
// container bridge docker0 and a "container" namespace behind it (a veth
// enslaved to the bridge), a nat table that DNATs published host ports to
// the container, and a filter table deciding what is forwarded. Clients
// in the peer namespace connect to the node's own address on the host
// port; the kernel decides, and OpenPortsOn must say the same. No Docker
// is needed: the rules are the ones Docker and the ufw-docker arrangement
// write (the full node with its own dockerd is the reference node's).

// dnatOracle lists the node, reads its interfaces and forwarding, evaluates,
// probes every (proto, source, host port) from the peer and fails on any
// disagreement; an uncertain prediction fails too (none is expected here).
func dnatOracle(n *testNet, t *testing.T, ports []uint16, srcs, protos []string) ([]Opening, Node, *Ruleset) {
	t.Helper()
	rs := n.list(t)
	node, err := ReadNode(n.path(n.node))
	if err != nil {
		t.Fatal(err)
	}
	open := OpenPortsOn(rs, node)
	for _, o := range open {
		t.Logf("open: %+v", o)
	}
	var probes []probe
	for _, proto := range protos {
		for _, s := range srcs {
			for _, p := range ports {
				probes = append(probes, probe{proto, s, p})
			}
		}
	}
	got := n.reach(t, probes)
	defer func() {
		if t.Failed() {
			t.Logf("ruleset as decoded:\n%s", Render(rs))
		}
	}()
	for _, p := range probes {
		want, unc := predictedAny(open, p)
		if unc {
			t.Errorf("%v: predicted uncertain, kernel says reach=%v", p, got[p])
			continue
		}
		if want != got[p] {
			t.Errorf("%v: predicted reach=%v, kernel says %v", p, want, got[p])
		}
	}
	return open, node, rs
}

// predictedAny is predicted for any direction: a published port's opening
// is at the forward hook, by the host port.
func predictedAny(open []Opening, p probe) (reach, uncertain bool) {
	src := netip.MustParseAddr(p.src)
	for _, o := range open {
		if o.Proto != p.proto || o.Family != p.family() || p.port < o.Port || p.port > portEnd(o) {
			continue
		}
		if o.From != "" && !netip.MustParsePrefix(o.From).Contains(src) {
			continue
		}
		if !o.Uncertain {
			return true, false
		}
		reach, uncertain = true, true
	}
	return reach, uncertain
}

func TestKernelDNATUfwDocker(t *testing.T) {
	n := newNamedNet(t, "dn-", "dn", "0a")
	requireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "sysctl")
	ctr := n.container(t)
	run(t, ufwDockerRules, "ip", "netns", "exec", n.node, "iptables-nft-restore")
	run(t, ufwDockerRules6, "ip", "netns", "exec", n.node, "ip6tables-nft-restore")
	// The services listen in the container on their container ports; the
	// node itself listens on 22 and on the host ports (a client that got
	// through to a host port without the DNAT would be answered too).
	serveIn(t, ctr, []uint16{8080, 8081, 8082, 8083, 8053, 9100})
	n.serve(t, []uint16{22, 18080, 18081, 18082, 18083, 18053, 19100})
	ports := []uint16{22, 18080, 18081, 18082, 18083, 18053, 19100, 8080}
	open, node, rs := dnatOracle(n, t, ports, []string{peerV4a, peerV4b, peerV6a}, []string{"tcp", "udp"})
	assertOpen(t, open, Opening{Port: 18080, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8080"})
	assertOpen(t, open, Opening{Port: 18081, Proto: "tcp", Direction: HookForward, Family: FamilyIP, From: "198.18.0.3/32", Via: "172.17.0.2:8081"})
	assertOpen(t, open, Opening{Port: 18083, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8083"})
	assertOpen(t, open, Opening{Port: 18053, Proto: "udp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8053"})
	assertOpen(t, open, Opening{Port: 18080, Proto: "tcp", Direction: HookForward, Family: FamilyIP6, Via: "[fd00:17::2]:8080"})
	if node.Forwarding[FamilyIP] != true || node.Forwarding[FamilyIP6] != true {
		t.Errorf("forwarding read as %v, want on for both", node.Forwarding)
	}
	if os.Getenv("FW_SAVE_FIXTURES") != "" {
		saveFixture(t, "ufw-docker", rs, node)
	}

	// The same node not forwarding: nothing published is reachable, and
	// the evaluator, reading ip_forward, says so.
	run(t, "", "ip", "netns", "exec", n.node, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
	open, _, _ = dnatOracle(n, t, ports, []string{peerV4a, peerV4b, peerV6a}, []string{"tcp"})
	for _, o := range open {
		if o.Direction == HookForward {
			t.Errorf("forward opening %+v on a node that does not forward", o)
		}
	}
}

func TestKernelDNATNative(t *testing.T) {
	n := newNamedNet(t, "dn-", "dn", "0b")
	requireTools(t, "sysctl")
	ctr := n.container(t)
	n.nft(t, `
table inet host {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		fib daddr type local tcp dport 18080 dnat ip to 172.17.0.2:8080
		fib daddr type local tcp dport 18090 dnat ip to 172.17.0.2:8090
		fib daddr type local tcp dport 18091 dnat ip to 172.17.0.2
		fib daddr type local tcp dport 18081 redirect to :22
		fib daddr type local tcp dport 18082 dnat ip6 to [fd00:17::2]:8080
	}
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		meta l4proto ipv6-icmp accept
		tcp dport 22 accept
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "docker0" accept
		ct status dnat meta l4proto tcp ct original proto-dst { 18080, 18082 } accept
		oifname "docker0" ip daddr 172.17.0.2 tcp dport 18091 accept
	}
}`)
	serveIn(t, ctr, []uint16{8080, 8090, 18091})
	n.serve(t, []uint16{22, 18080, 18081, 18082, 18090, 18091})
	open, _, _ := dnatOracle(n, t, []uint16{22, 18080, 18081, 18082, 18090, 18091}, []string{peerV4a, peerV6a}, []string{"tcp"})
	assertOpen(t, open, Opening{Port: 18080, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8080"})
	assertOpen(t, open, Opening{Port: 18081, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Via: ":22"})
	assertOpen(t, open, Opening{Port: 18082, Proto: "tcp", Direction: HookForward, Family: FamilyIP6, Via: "[fd00:17::2]:8080"})
	assertOpen(t, open, Opening{Port: 18091, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:18091"})
}

// saveFixture writes the listed ruleset and the node's interfaces as the
// unit tests' testdata (FW_SAVE_FIXTURES=1).
func saveFixture(t *testing.T, name string, rs *Ruleset, node Node) {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Ruleset *Ruleset `json:"ruleset"`
		Node    Node     `json:"node"`
	}{rs, node}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "dnat", name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKernelForwardMarks: on the ufw-docker node, a module whose container
// publishes 18082 and 19100 (not routed by ufw, so closed) gets forward
// marks; clients then reach both, a source denied by the found firewall in
// the same chain stays denied, iptables-save still reads the ruleset, the
// evaluator agrees with the packets, and a release gives back the ruleset
// byte for byte.
func TestKernelForwardMarks(t *testing.T) {
	n := newNamedNet(t, "dn-", "dn", "0c")
	requireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "iptables-save", "sysctl")
	ctr := n.container(t)
	rules := strings.Replace(ufwDockerRules, "-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT\n",
		"-A ufw-user-forward -s 198.18.0.3/32 -j DROP\n-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT\n", 1)
	run(t, rules, "ip", "netns", "exec", n.node, "iptables-nft-restore")
	run(t, ufwDockerRules6, "ip", "netns", "exec", n.node, "ip6tables-nft-restore")
	serveIn(t, ctr, []uint16{8080, 8082, 9100})
	before := n.listing(t)
	all := []uint16{18080, 18082, 19100}
	open, _, _ := dnatOracle(n, t, all, []string{peerV4a, peerV6a}, []string{"tcp"})
	for _, o := range find(open, HookForward, FamilyIP, "tcp", 18082) {
		if o.From == "" {
			t.Fatalf("18082 open to anyone before any mark: %+v", o)
		}
	}

	m := marker(n, t)
	added, present, err := m.OpenForward("n1", "web", ports("18082/tcp", "19100/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 4 || len(present) != 0 { // 18082 and 19100 in ufw-user-forward and ufw6-user-forward
		t.Errorf("added %v, present %v; want 4 added", added, present)
	}
	for _, r := range added {
		if r.Chain != "ufw-user-forward" && r.Chain != "ufw6-user-forward" {
			t.Errorf("forward mark in %s, want ufw's forward chain: %v", r.Chain, r)
		}
	}
	save := n.quiet(t, "iptables-save")
	if !strings.Contains(save, `--ctstate DNAT --ctorigdstport 18082 -m comment --comment "adoption:n1:web:18082/tcp" -j ACCEPT`) {
		t.Errorf("iptables-save does not show the forward mark as iptables writes it:\n%s", grepLines(save, "adoption:"))
	}
	if i, j := strings.Index(save, "-A ufw-user-forward -s 198.18.0.3/32 -j DROP"), strings.Index(save, "adoption:n1:web:18082/tcp"); i < 0 || j < i {
		t.Errorf("the mark is not after the source deny:\n%s", grepLines(save, "ufw-user-forward"))
	}
	// Again: nothing added, everything present.
	if again, present, err := m.OpenForward("n1", "web", ports("18082/tcp", "19100/tcp")); err != nil || len(again) != 0 || len(present) != len(added) {
		t.Errorf("second OpenForward: added %v, present %v, %v", again, present, err)
	}
	// An opening to any source does not list the sources the ruleset
	// singles out for a drop: 198.18.0.3, denied before the marks, is
	// checked on its own.
	open, _, _ = dnatOracle(n, t, all, []string{peerV4a, peerV6a}, []string{"tcp"})
	for p, ok := range n.reach(t, []probe{{"tcp", peerV4b, 18082}, {"tcp", peerV4b, 19100}}) {
		if ok {
			t.Errorf("%v: the found firewall's source deny no longer holds after the mark", p)
		}
	}
	assertOpen(t, open, Opening{Port: 18082, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8082"})
	assertOpen(t, open, Opening{Port: 19100, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:9100"})
	assertOpen(t, open, Opening{Port: 18082, Proto: "tcp", Direction: HookForward, Family: FamilyIP6, Via: "[fd00:17::2]:8082"})

	removed, err := m.Release("n1")
	if err != nil || len(removed) != len(added) {
		t.Fatalf("release: removed %v, %v; want the %d added", removed, err, len(added))
	}
	if after := n.listing(t); after != before {
		t.Errorf("release did not give back the ruleset:\n%s", diff(before, after))
	}
}
