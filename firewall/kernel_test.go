package firewall

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/internal/testenv"
)

// The kernel is the oracle here: rulesets are loaded into a fresh network
// namespace ("node"), real connections come from a peer namespace over a veth
// pair, and what got through is compared with OpenPorts. Addresses are from
// 198.18.0.0/15 (RFC 2544 benchmarking) and fd00::/8 (ULA) and never leave the
// two namespaces this test creates. The host's own firewall is not touched.

const (
	nodeV4  = "198.18.0.1"
	peerV4a = "198.18.0.2"
	peerV4b = "198.18.0.3"
	nodeV6  = "fd00:f0::1"
	peerV6a = "fd00:f0::2"
	peerV6b = "fd00:f0::3"
)

type testNet struct {
	node, peer string // namespace names
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "creates network namespaces")
	testenv.NeedTools(t, "ip", "nft")
}

func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func newTestNet(t *testing.T) *testNet { return newNamedNet(t, "fwtest-", "fw", "00") }

// newNamedNet builds a node and a peer namespace joined by a veth: names
// start with prefix (namespaces) and dev (interfaces), and octet keeps the
// MACs apart from other files' nets.
func newNamedNet(t *testing.T, prefix, dev, octet string) *testNet {
	t.Helper()
	requireRoot(t)
	b := make([]byte, 4)
	rand.Read(b)
	id := hex.EncodeToString(b)
	n := &testNet{node: prefix + id + "-n", peer: prefix + id + "-p"}
	run(t, "", "ip", "netns", "add", n.node)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.node).Run() })
	run(t, "", "ip", "netns", "add", n.peer)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.peer).Run() })
	nodeMAC, peerMAC := "02:00:c6:12:"+octet+":01", "02:00:c6:12:"+octet+":02"
	nd, pd := dev+"n"+id[:4], dev+"p"+id[:4]
	run(t, "", "ip", "link", "add", nd, "netns", n.node, "address", nodeMAC, "type", "veth",
		"peer", "name", pd, "netns", n.peer, "address", peerMAC)
	for _, s := range []struct {
		ns, dev string
		addrs   []string
	}{
		{n.node, nd, []string{nodeV4 + "/24", nodeV6 + "/64"}},
		{n.peer, pd, []string{peerV4a + "/24", peerV4b + "/24", peerV6a + "/64", peerV6b + "/64"}},
	} {
		run(t, "", "ip", "-n", s.ns, "link", "set", "lo", "up")
		for _, a := range s.addrs {
			args := []string{"-n", s.ns, "addr", "add", a, "dev", s.dev}
			if strings.Contains(a, ":") {
				args = append(args, "nodad")
			}
			run(t, "", "ip", args...)
		}
		run(t, "", "ip", "-n", s.ns, "link", "set", s.dev, "up")
	}
	// Permanent neighbour entries: a ruleset under test that drops ICMPv6
	// must not break neighbour discovery, or every IPv6 probe would fail
	// for a reason the evaluator does not model.
	for _, a := range []string{peerV4a, peerV4b, peerV6a, peerV6b} {
		run(t, "", "ip", "-n", n.node, "neigh", "replace", a, "lladdr", peerMAC, "nud", "permanent", "dev", nd)
	}
	for _, a := range []string{nodeV4, nodeV6} {
		run(t, "", "ip", "-n", n.peer, "neigh", "replace", a, "lladdr", nodeMAC, "nud", "permanent", "dev", pd)
	}
	return n
}

func (n *testNet) nft(t *testing.T, ruleset string) {
	t.Helper()
	run(t, ruleset, "ip", "netns", "exec", n.node, "nft", "-f", "-")
}

func (n *testNet) path(ns string) string { return filepath.Join("/run/netns", ns) }

// inNetns runs f on a thread switched into the namespace ns, and switches
// back before the thread is returned. Sockets made by f stay in ns.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// serve listens on ports (TCP accepting, UDP echoing) in the node namespace
// on both families, until the test ends.
func (n *testNet) serve(t *testing.T, ports []uint16) { t.Helper(); serveIn(t, n.node, ports) }

// serveIn is serve in namespace ns.
func serveIn(t *testing.T, ns string, ports []uint16) {
	t.Helper()
	var closers []func() error
	err := inNetns(ns, func() error {
		for _, p := range ports {
			l, err := net.Listen("tcp", fmt.Sprintf("[::]:%d", p))
			if err != nil {
				return err
			}
			closers = append(closers, l.Close)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			pc, err := net.ListenPacket("udp", fmt.Sprintf("[::]:%d", p))
			if err != nil {
				return err
			}
			closers = append(closers, pc.Close)
			go func() {
				buf := make([]byte, 64)
				for {
					k, addr, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					pc.WriteTo(buf[:k], addr)
				}
			}()
		}
		return nil
	})
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
	})
	if err != nil {
		t.Fatalf("listening in %s: %v", ns, err)
	}
}

type probe struct {
	proto string
	src   string // peer address
	port  uint16
}

func (p probe) family() string {
	if strings.Contains(p.src, ":") {
		return FamilyIP6
	}
	return FamilyIP
}

func (p probe) dst() string {
	if p.family() == FamilyIP6 {
		return nodeV6
	}
	return nodeV4
}

func (p probe) String() string {
	return fmt.Sprintf("%s %s->%s port %d", p.proto, p.src, p.dst(), p.port)
}

// reach tries every probe from the peer namespace at once and reports which
// got through: a TCP handshake completed, or a UDP echo came back.
func (n *testNet) reach(t *testing.T, probes []probe) map[probe]bool {
	t.Helper()
	got := map[probe]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := false
			err := inNetns(n.peer, func() error {
				ok = attempt(p)
				return nil
			})
			if err != nil {
				t.Errorf("probe %v: %v", p, err)
			}
			mu.Lock()
			got[p] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

func attempt(p probe) bool {
	const timeout = 400 * time.Millisecond
	local := &net.TCPAddr{IP: net.ParseIP(p.src)}
	addr := net.JoinHostPort(p.dst(), fmt.Sprint(p.port))
	if p.proto == "tcp" {
		d := net.Dialer{Timeout: timeout, LocalAddr: local}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(p.src)}}
	c, err := d.Dial("udp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	buf := make([]byte, 8)
	// Two tries: the first datagram may wait for neighbour discovery.
	for i := 0; i < 2; i++ {
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(timeout / 2))
		if k, err := c.Read(buf); err == nil && string(buf[:k]) == "ping" {
			return true
		}
	}
	return false
}

// predicted says whether OpenPorts reports the probe's port open at input for
// its source, and whether that is uncertain.
func predicted(open []Opening, p probe) (reach, uncertain bool) {
	src := netip.MustParseAddr(p.src)
	for _, o := range open {
		if o.Direction != HookInput || o.Proto != p.proto || o.Family != p.family() {
			continue
		}
		end := o.Port
		if o.PortEnd != 0 {
			end = o.PortEnd
		}
		if p.port < o.Port || p.port > end {
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

func (n *testNet) list(t *testing.T) *Ruleset {
	t.Helper()
	c, closeNS, err := Dial(n.path(n.node))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	rs, err := List(c)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// oracle lists the node's ruleset, evaluates it, probes the kernel with
// every (proto, source, port) combination and fails on any disagreement.
// Ports the evaluator calls uncertain are probed but not compared; want
// lists ports that must be predicted uncertain.
func (n *testNet) oracle(t *testing.T, ports []uint16, srcs []string, protos []string, wantUncertain ...probe) []Opening {
	t.Helper()
	rs := n.list(t)
	open := OpenPorts(rs)
	for _, o := range open {
		if o.Direction == HookInput {
			t.Logf("open: %+v", o)
		}
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
	for _, p := range probes {
		want, unc := predicted(open, p)
		isWantUnc := false
		for _, w := range wantUncertain {
			if w == p {
				isWantUnc = true
			}
		}
		if isWantUnc != unc {
			t.Errorf("%v: predicted uncertain=%v, want %v", p, unc, isWantUnc)
		}
		if unc {
			t.Logf("%v: uncertain, kernel says reach=%v", p, got[p])
			continue
		}
		if want != got[p] {
			t.Errorf("%v: predicted reach=%v, kernel says %v", p, want, got[p])
		}
	}
	return open
}

// randomPorts adds k ports picked at random (excluding those already there).
func randomPorts(base []uint16, k int) []uint16 {
	seen := map[uint16]bool{}
	for _, p := range base {
		seen[p] = true
	}
	out := append([]uint16(nil), base...)
	b := make([]byte, 2)
	for len(out) < len(base)+k {
		rand.Read(b)
		p := uint16(b[0])<<8 | uint16(b[1])
		if p < 1024 || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

var bothFamilies = []string{peerV4a, peerV6a}

func TestKernelNativeInetSetsAndRanges(t *testing.T) {
	n := newTestNet(t)
	n.nft(t, `
table inet host {
	set tcp_open { type inet_service; elements = { 22, 443 } }
	set udp_open { type inet_service; flags interval; elements = { 5000-5010, 6000 } }
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		ct state invalid drop
		iifname "lo" accept
		meta l4proto { icmp, ipv6-icmp } accept
		tcp dport @tcp_open accept
		udp dport @udp_open accept
		tcp dport 8000-8010 accept
		meta nfproto ipv4 tcp dport 9000 accept
		tcp dport { 7000, 7100-7102 } accept
		tcp dport 7001 accept
	}
}`)
	ports := randomPorts([]uint16{22, 443, 5000, 5005, 5010, 5011, 6000, 7000, 7001, 7100, 7102, 7103, 8000, 8005, 8010, 8011, 9000, 9001}, 6)
	n.serve(t, ports)
	open := n.oracle(t, ports, bothFamilies, []string{"tcp", "udp"})
	assertOpen(t, open, Opening{Port: 8000, PortEnd: 8010, Proto: "tcp", Direction: HookInput, Family: FamilyIP})
	assertOpen(t, open, Opening{Port: 5000, PortEnd: 5010, Proto: "udp", Direction: HookInput, Family: FamilyIP6})
}

func assertOpen(t *testing.T, open []Opening, want Opening) {
	t.Helper()
	for _, o := range open {
		if o == want {
			return
		}
	}
	t.Errorf("missing opening %+v", want)
}

func TestKernelJumpReturn(t *testing.T) {
	n := newTestNet(t)
	n.nft(t, `
table ip t {
	chain services {
		tcp dport 8080 return
		tcp dport 8000-8100 accept
		udp dport 53 accept
	}
	chain screen {
		tcp dport 2000 drop
		return
		tcp dport 2001 accept
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		jump screen
		tcp dport 2000-2002 accept
		jump services
		tcp dport 8080 accept
		goto last
		tcp dport 3000 accept
	}
	chain last {
		tcp dport 4000 accept
	}
}`)
	ports := randomPorts([]uint16{53, 2000, 2001, 2002, 3000, 4000, 8000, 8080, 8081, 8100, 8101}, 4)
	n.serve(t, ports)
	n.oracle(t, ports, []string{peerV4a}, []string{"tcp", "udp"})
}

func TestKernelTwoBaseChainsEarlierDropIsFinal(t *testing.T) {
	n := newTestNet(t)
	n.nft(t, `
table inet late {
	chain input {
		type filter hook input priority 10; policy drop;
		ct state established,related accept
		tcp dport { 22, 80, 443 } accept
	}
}
table inet early {
	chain input {
		type filter hook input priority -10; policy accept;
		tcp dport 80 drop
		tcp dport 22 accept
	}
}
table inet same {
	chain input {
		type filter hook input priority 10; policy accept;
		tcp dport 443 reject with tcp reset
	}
}`)
	ports := randomPorts([]uint16{22, 80, 443}, 4)
	n.serve(t, ports)
	open := n.oracle(t, ports, bothFamilies, []string{"tcp"})
	for _, o := range open {
		if o.Direction == HookInput && o.Proto == "tcp" && o.Port != 22 {
			t.Errorf("unexpected opening %+v", o)
		}
	}
}

func TestKernelSourceRestricted(t *testing.T) {
	n := newTestNet(t)
	n.nft(t, `
table inet host {
	set admins6 { type ipv6_addr; flags interval; elements = { fd00:f0::3/128 } }
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		ip saddr 198.18.0.3 tcp dport 7000 accept
		ip6 saddr @admins6 tcp dport 7000 accept
		ip saddr 198.18.0.0/24 ip saddr != 198.18.0.2 udp dport 7001 accept
		tcp dport 80 accept
	}
}`)
	ports := randomPorts([]uint16{80, 7000, 7001}, 3)
	n.serve(t, ports)
	open := n.oracle(t, ports, []string{peerV4a, peerV4b, peerV6a, peerV6b}, []string{"tcp", "udp"})
	assertOpen(t, open, Opening{Port: 7000, Proto: "tcp", Direction: HookInput, From: "198.18.0.3/32", Family: FamilyIP})
	assertOpen(t, open, Opening{Port: 7000, Proto: "tcp", Direction: HookInput, From: "fd00:f0::3/128", Family: FamilyIP6})
}

func TestKernelIptablesNft(t *testing.T) {
	n := newTestNet(t)
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	rules := `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:svc - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -m addrtype --dst-type MULTICAST -j DROP
-A INPUT -p tcp -m multiport --dports 9100,9200:9202 -j ACCEPT
-A INPUT -m limit --limit 3/min -j LOG --log-prefix "x "
-A INPUT -j svc
-A svc -p tcp --dport 22 -m comment --comment "ssh" -j ACCEPT
-A svc -p udp --dport 1194 -j ACCEPT
-A svc -p tcp --dport 25 -j REJECT
COMMIT
`
	run(t, rules, "ip", "netns", "exec", n.node, "iptables-nft-restore")
	run(t, rules, "ip", "netns", "exec", n.node, "ip6tables-nft-restore")
	ports := randomPorts([]uint16{22, 25, 1194, 9100, 9101, 9200, 9202, 9203}, 4)
	n.serve(t, ports)
	rs := n.list(t)
	if k, err := Kind(rs, nil); err != nil || k != KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, KindIptablesNft)
	}
	n.oracle(t, ports, bothFamilies, []string{"tcp", "udp"})
}

// ufwNet makes the node namespace a ufw node with its own copy of /etc/ufw
// and /etc/default (ip netns exec bind-mounts /etc/netns/NS/* over /etc), so
// the host's ufw configuration is never read or written.
func (n *testNet) ufw(t *testing.T, cmds ...[]string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", n.node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	run(t, "", "cp", "-a", "/etc/ufw", filepath.Join(dir, "ufw"))
	run(t, "", "cp", "-a", "/etc/default", filepath.Join(dir, "default"))
	// No kernel modules loaded on the host's behalf (IPT_MODULES), IPv6 on.
	run(t, "", "sed", "-i", "-e", `s/^IPT_MODULES=.*/IPT_MODULES=""/`, "-e", "s/^IPV6=.*/IPV6=yes/", filepath.Join(dir, "default", "ufw"))
	for _, c := range cmds {
		run(t, "", "ip", append([]string{"netns", "exec", n.node, "ufw"}, c...)...)
	}
}

func TestKernelUfw(t *testing.T) {
	n := newTestNet(t)
	testenv.NeedTools(t, "ufw")
	// Start from ufw's shipped defaults whatever the host's copy says.
	n.ufw(t,
		[]string{"--force", "reset"},
		[]string{"default", "deny", "incoming"},
		[]string{"default", "deny", "routed"},
		[]string{"allow", "22/tcp"},
		[]string{"allow", "8000:8010/tcp"},
		[]string{"allow", "60000:60010/udp"},
		[]string{"allow", "from", peerV4b, "to", "any", "port", "7000", "proto", "tcp"},
		[]string{"allow", "from", peerV6b, "to", "any", "port", "7000", "proto", "tcp"},
		[]string{"limit", "2222/tcp"},
		[]string{"deny", "9000/tcp"},
		[]string{"route", "allow", "proto", "tcp", "to", "any", "port", "8443"},
		[]string{"--force", "enable"},
	)
	if os.Getenv("FW_UFW_SAVE") != "" {
		os.WriteFile("/tmp/ufw4.rules", []byte(run(t, "", "ip", "netns", "exec", n.node, "iptables-save")), 0o644)
		os.WriteFile("/tmp/ufw6.rules", []byte(run(t, "", "ip", "netns", "exec", n.node, "ip6tables-save")), 0o644)
	}
	rs := n.list(t)
	if k, err := Kind(rs, nil); err != nil || k != KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, KindIptablesNft)
	}
	ports := randomPorts([]uint16{22, 2222, 7000, 8000, 8010, 8011, 9000, 60000, 60010, 60011}, 6)
	n.serve(t, ports)
	var unc []probe
	for _, s := range []string{peerV4a, peerV4b, peerV6a, peerV6b} {
		unc = append(unc, probe{"tcp", s, 2222})
	}
	open := n.oracle(t, ports, []string{peerV4a, peerV4b, peerV6a, peerV6b}, []string{"tcp", "udp"}, unc...)
	assertOpen(t, open, Opening{Port: 7000, Proto: "tcp", Direction: HookInput, From: peerV4b + "/32", Family: FamilyIP})
	assertOpen(t, open, Opening{Port: 8443, Proto: "tcp", Direction: HookForward, Family: FamilyIP6})
}

func TestKernelVerdictMapAndNamedIntervalSets(t *testing.T) {
	n := newTestNet(t)
	n.nft(t, `
table inet host {
	set nets4 { type ipv4_addr; flags interval; elements = { 198.18.0.2/32, 10.0.0.0/8 } }
	chain svc {
		tcp dport 3000 accept
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ct state vmap { established : accept, related : accept, invalid : drop }
		iif lo accept
		iifname { "lo" } accept
		tcp dport vmap { 22 : accept, 2000-2010 : jump svc, 3000 : jump svc, 4000 : drop }
		ip saddr @nets4 tcp dport 4000-4001 accept
		fib daddr type local tcp dport 5000 accept
	}
}`)
	ports := randomPorts([]uint16{22, 2000, 3000, 4000, 4001, 5000}, 4)
	n.serve(t, ports)
	open := n.oracle(t, ports, []string{peerV4a, peerV4b, peerV6a}, []string{"tcp"})
	assertOpen(t, open, Opening{Port: 4001, Proto: "tcp", Direction: HookInput, From: "198.18.0.2/32", Family: FamilyIP})
}
