package firewall

import (
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
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

const (
	bridgeV4 = "172.17.0.1"
	ctrV4    = "172.17.0.2"
	bridgeV6 = "fd00:17::1"
	ctrV6    = "fd00:17::2"
)

// container adds docker0 (172.17.0.1/16, fd00:17::1/64) to the node and a
// namespace behind it holding 172.17.0.2 and fd00:17::2, routed back
// through the node, and turns forwarding on in the node. It returns the
// container namespace's name.
func (n *testNet) container(t *testing.T) string {
	t.Helper()
	ctr := n.node + "-c"
	run(t, "", "ip", "netns", "add", ctr)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ctr).Run() })
	hostEnd := "vh" + n.node[len(n.node)-6:]
	run(t, "", "ip", "-n", n.node, "link", "add", "docker0", "type", "bridge")
	run(t, "", "ip", "-n", n.node, "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ctr)
	run(t, "", "ip", "-n", n.node, "link", "set", hostEnd, "master", "docker0")
	for _, a := range []string{bridgeV4 + "/16", bridgeV6 + "/64"} {
		args := []string{"-n", n.node, "addr", "add", a, "dev", "docker0"}
		if a == bridgeV6+"/64" {
			args = append(args, "nodad")
		}
		run(t, "", "ip", args...)
	}
	run(t, "", "ip", "-n", n.node, "link", "set", "docker0", "up")
	run(t, "", "ip", "-n", n.node, "link", "set", hostEnd, "up")
	run(t, "", "ip", "-n", ctr, "link", "set", "lo", "up")
	run(t, "", "ip", "-n", ctr, "addr", "add", ctrV4+"/16", "dev", "eth0")
	run(t, "", "ip", "-n", ctr, "addr", "add", ctrV6+"/64", "dev", "eth0", "nodad")
	run(t, "", "ip", "-n", ctr, "link", "set", "eth0", "up")
	run(t, "", "ip", "-n", ctr, "route", "add", "default", "via", bridgeV4)
	run(t, "", "ip", "-n", ctr, "-6", "route", "add", "default", "via", bridgeV6)
	// Static neighbours on the container link: neighbour discovery is not
	// what these tests are about.
	mac := func(ns, dev string) string {
		out := run(t, "", "ip", "-n", ns, "-br", "link", "show", dev)
		f := strings.Fields(out)
		if len(f) < 3 {
			t.Fatalf("no address of %s in %s: %q", dev, ns, out)
		}
		return f[2]
	}
	bridgeMAC, ctrMAC := mac(n.node, "docker0"), mac(ctr, "eth0")
	run(t, "", "ip", "-n", n.node, "neigh", "replace", ctrV6, "lladdr", ctrMAC, "nud", "permanent", "dev", "docker0")
	run(t, "", "ip", "-n", n.node, "neigh", "replace", ctrV4, "lladdr", ctrMAC, "nud", "permanent", "dev", "docker0")
	run(t, "", "ip", "-n", ctr, "neigh", "replace", bridgeV6, "lladdr", bridgeMAC, "nud", "permanent", "dev", "eth0")
	run(t, "", "ip", "-n", ctr, "neigh", "replace", bridgeV4, "lladdr", bridgeMAC, "nud", "permanent", "dev", "eth0")
	run(t, "", "ip", "netns", "exec", n.node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	return ctr
}

// ufwDockerRules is what Docker writes for a container publishing 18080,
// 18081, 18082, 18083/tcp, 18053/udp and 19100/tcp (in nat POSTROUTING,
// its network's masquerade and, per published port, the hairpin masquerade
// that lets the container reach itself through the host port), with the
// ufw-docker arrangement in DOCKER-USER and these routed rules in
// ufw-user-forward:
// 8080 to anyone, 8081 only from 198.18.0.3, 8053/udp to anyone, and the
// published host port 18083 by conntrack's original port (how a mark keys
// a forward rule). 8082 and 9100 are not routed: published but closed.
const ufwDockerRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8080 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8081 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8082 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 8083 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p udp -m udp --dport 8053 -j MASQUERADE
-A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 9100 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination 172.17.0.2:8080
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18081 -j DNAT --to-destination 172.17.0.2:8081
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18082 -j DNAT --to-destination 172.17.0.2:8082
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18083 -j DNAT --to-destination 172.17.0.2:8083
-A DOCKER ! -i docker0 -p udp -m udp --dport 18053 -j DNAT --to-destination 172.17.0.2:8053
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 19100 -j DNAT --to-destination 172.17.0.2:9100
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-ISOLATION-STAGE-1 - [0:0]
:DOCKER-ISOLATION-STAGE-2 - [0:0]
:DOCKER-USER - [0:0]
:ufw-user-forward - [0:0]
:ufw-docker-logging-deny - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -o docker0 -j DOCKER
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-A FORWARD -i docker0 -o docker0 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8080 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8081 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8082 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8083 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p udp -m udp --dport 8053 -j ACCEPT
-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 9100 -j ACCEPT
-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-1 -j RETURN
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP
-A DOCKER-ISOLATION-STAGE-2 -j RETURN
-A DOCKER-USER -j ufw-user-forward
-A DOCKER-USER -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN
-A DOCKER-USER -s 10.0.0.0/8 -j RETURN
-A DOCKER-USER -s 172.16.0.0/12 -j RETURN
-A DOCKER-USER -s 192.168.0.0/16 -j RETURN
-A DOCKER-USER -p udp -m udp --sport 53 --dport 1024:65535 -j RETURN
-A DOCKER-USER -d 192.168.0.0/16 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 10.0.0.0/8 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 172.16.0.0/12 -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny
-A DOCKER-USER -d 192.168.0.0/16 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -d 10.0.0.0/8 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -d 172.16.0.0/12 -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny
-A DOCKER-USER -j RETURN
-A ufw-docker-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW DOCKER BLOCK] "
-A ufw-docker-logging-deny -j DROP
-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT
-A ufw-user-forward -s 198.18.0.3/32 -p tcp -m tcp --dport 8081 -j ACCEPT
-A ufw-user-forward -p udp -m udp --dport 8053 -j ACCEPT
-A ufw-user-forward -p tcp -m conntrack --ctstate DNAT --ctorigdstport 18083 -j ACCEPT
COMMIT
`

// ufwDockerRules6 is the IPv6 side: Docker's DNAT into the container's
// ULA, ufw's routed rules deciding (the private-source exception of
// ufw-docker would let the test's ULA clients through, so it is left out).
const ufwDockerRules6 = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s fd00:17::/64 ! -o docker0 -j MASQUERADE
-A POSTROUTING -s fd00:17::2/128 -d fd00:17::2/128 -p tcp -m tcp --dport 8080 -j MASQUERADE
-A POSTROUTING -s fd00:17::2/128 -d fd00:17::2/128 -p tcp -m tcp --dport 8082 -j MASQUERADE
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18080 -j DNAT --to-destination [fd00:17::2]:8080
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 18082 -j DNAT --to-destination [fd00:17::2]:8082
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:ufw6-user-forward - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -i docker0 -j ACCEPT
-A FORWARD -j ufw6-user-forward
-A ufw6-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT
COMMIT
`

// dnatOracle lists the node, reads its interfaces and forwarding, evaluates,
// probes every (proto, source, host port) from the peer and fails on any
// disagreement; an uncertain prediction fails too (none is expected here).
func (n *testNet) dnatOracle(t *testing.T, ports []uint16, srcs, protos []string) ([]Opening, Node, *Ruleset) {
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

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, b := range tools {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("needs %s: %v (apt-get install iptables)", b, err)
		}
	}
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
	open, node, rs := n.dnatOracle(t, ports, []string{peerV4a, peerV4b, peerV6a}, []string{"tcp", "udp"})
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
	open, _, _ = n.dnatOracle(t, ports, []string{peerV4a, peerV4b, peerV6a}, []string{"tcp"})
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
	open, _, _ := n.dnatOracle(t, []uint16{22, 18080, 18081, 18082, 18090, 18091}, []string{peerV4a, peerV6a}, []string{"tcp"})
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
	open, _, _ := n.dnatOracle(t, all, []string{peerV4a, peerV6a}, []string{"tcp"})
	for _, o := range find(open, HookForward, FamilyIP, "tcp", 18082) {
		if o.From == "" {
			t.Fatalf("18082 open to anyone before any mark: %+v", o)
		}
	}

	m := n.marker(t)
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
	open, _, _ = n.dnatOracle(t, all, []string{peerV4a, peerV6a}, []string{"tcp"})
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
