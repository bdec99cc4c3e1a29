package fwtest

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
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/testenv"
)

const (
	NodeV4  = "198.18.0.1"
	PeerV4a = "198.18.0.2"
	PeerV4b = "198.18.0.3"
	NodeV6  = "fd00:f0::1"
	PeerV6a = "fd00:f0::2"
	PeerV6b = "fd00:f0::3"
)

type TestNet struct {
	Node, Peer string // namespace names
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "creates network namespaces")
	testenv.NeedTools(t, "ip", "nft")
}

func Run(t *testing.T, stdin string, name string, args ...string) string {
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

func NewTestNet(t *testing.T) *TestNet { return NewNamedNet(t, "fwtest-", "fw", "00") }

// newNamedNet builds a node and a peer namespace joined by a veth: names
// start with prefix (namespaces) and dev (interfaces), and octet keeps the
// MACs apart from other files' nets.
func NewNamedNet(t *testing.T, prefix, dev, octet string) *TestNet {
	t.Helper()
	requireRoot(t)
	b := make([]byte, 4)
	rand.Read(b)
	id := hex.EncodeToString(b)
	n := &TestNet{Node: prefix + id + "-n", Peer: prefix + id + "-p"}
	Run(t, "", "ip", "netns", "add", n.Node)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.Node).Run() })
	Run(t, "", "ip", "netns", "add", n.Peer)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.Peer).Run() })
	nodeMAC, peerMAC := "02:00:c6:12:"+octet+":01", "02:00:c6:12:"+octet+":02"
	nd, pd := dev+"n"+id[:4], dev+"p"+id[:4]
	Run(t, "", "ip", "link", "add", nd, "netns", n.Node, "address", nodeMAC, "type", "veth",
		"peer", "name", pd, "netns", n.Peer, "address", peerMAC)
	for _, s := range []struct {
		ns, dev string
		addrs   []string
	}{
		{n.Node, nd, []string{NodeV4 + "/24", NodeV6 + "/64"}},
		{n.Peer, pd, []string{PeerV4a + "/24", PeerV4b + "/24", PeerV6a + "/64", PeerV6b + "/64"}},
	} {
		Run(t, "", "ip", "-n", s.ns, "link", "set", "lo", "up")
		for _, a := range s.addrs {
			args := []string{"-n", s.ns, "addr", "add", a, "dev", s.dev}
			if strings.Contains(a, ":") {
				args = append(args, "nodad")
			}
			Run(t, "", "ip", args...)
		}
		Run(t, "", "ip", "-n", s.ns, "link", "set", s.dev, "up")
	}
	// Permanent neighbour entries: a ruleset under test that drops ICMPv6
	// must not break neighbour discovery, or every IPv6 probe would fail
	// for a reason the evaluator does not model.
	for _, a := range []string{PeerV4a, PeerV4b, PeerV6a, PeerV6b} {
		Run(t, "", "ip", "-n", n.Node, "neigh", "replace", a, "lladdr", peerMAC, "nud", "permanent", "dev", nd)
	}
	for _, a := range []string{NodeV4, NodeV6} {
		Run(t, "", "ip", "-n", n.Peer, "neigh", "replace", a, "lladdr", nodeMAC, "nud", "permanent", "dev", pd)
	}
	return n
}

func (n *TestNet) Nft(t *testing.T, ruleset string) {
	t.Helper()
	Run(t, ruleset, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
}

func (n *TestNet) Path(ns string) string { return filepath.Join("/run/netns", ns) }

// inNetns runs f on a thread switched into the namespace ns, and switches
// back before the thread is returned. Sockets made by f stay in ns.
func InNetns(ns string, f func() error) error {
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
func (n *TestNet) Serve(t *testing.T, ports []uint16) { t.Helper(); ServeIn(t, n.Node, ports) }

// serveIn is serve in namespace ns.
func ServeIn(t *testing.T, ns string, ports []uint16) {
	t.Helper()
	var closers []func() error
	err := InNetns(ns, func() error {
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

type Probe struct {
	Proto string
	Src   string // peer address
	Port  uint16
}

func (p Probe) Family() string {
	if strings.Contains(p.Src, ":") {
		return firewall.FamilyIP6
	}
	return firewall.FamilyIP
}

func (p Probe) dst() string {
	if p.Family() == firewall.FamilyIP6 {
		return NodeV6
	}
	return NodeV4
}

func (p Probe) String() string {
	return fmt.Sprintf("%s %s->%s port %d", p.Proto, p.Src, p.dst(), p.Port)
}

// reach tries every probe from the peer namespace at once and reports which
// got through: a TCP handshake completed, or a UDP echo came back.
func (n *TestNet) Reach(t *testing.T, probes []Probe) map[Probe]bool {
	t.Helper()
	got := map[Probe]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := false
			err := InNetns(n.Peer, func() error {
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

func attempt(p Probe) bool {
	const timeout = 400 * time.Millisecond
	local := &net.TCPAddr{IP: net.ParseIP(p.Src)}
	addr := net.JoinHostPort(p.dst(), fmt.Sprint(p.Port))
	if p.Proto == "tcp" {
		d := net.Dialer{Timeout: timeout, LocalAddr: local}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(p.Src)}}
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

func (n *TestNet) List(t *testing.T) *firewall.Ruleset {
	t.Helper()
	c, closeNS, err := nft.Dial(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	rs, err := nft.List(c)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// randomPorts adds k ports picked at random (excluding those already there).
func RandomPorts(base []uint16, k int) []uint16 {
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

var BothFamilies = []string{PeerV4a, PeerV6a}

// ufwNet makes the node namespace a ufw node with its own copy of /etc/ufw
// and /etc/default (ip netns exec bind-mounts /etc/netns/NS/* over /etc), so
// the host's ufw configuration is never read or written.
func (n *TestNet) Ufw(t *testing.T, cmds ...[]string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", n.Node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	Run(t, "", "cp", "-a", "/etc/ufw", filepath.Join(dir, "ufw"))
	Run(t, "", "cp", "-a", "/etc/default", filepath.Join(dir, "default"))
	// No kernel modules loaded on the host's behalf (IPT_MODULES), IPv6 on.
	Run(t, "", "sed", "-i", "-e", `s/^IPT_MODULES=.*/IPT_MODULES=""/`, "-e", "s/^IPV6=.*/IPV6=yes/", filepath.Join(dir, "default", "ufw"))
	for _, c := range cmds {
		Run(t, "", "ip", append([]string{"netns", "exec", n.Node, "ufw"}, c...)...)
	}
}

var Counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// listing is "nft list ruleset" in the node namespace, counters stripped: the
// form in which a release must give back exactly what was found.
func (n *TestNet) Listing(t *testing.T) string {
	t.Helper()
	out := n.Quiet(t, "nft", "list", "ruleset")
	return Counters.ReplaceAllString(out, "counter")
}

// quiet runs a command in the node namespace and fails if it writes
// anything to stderr: a warning from iptables-save or ufw is a failure here.
func (n *TestNet) Quiet(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Node, name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// nft notes on stderr that iptables-nft owns a table; that is nft's
	// standing remark on any iptables-nft ruleset, not a complaint.
	rest := regexp.MustCompile(`(?m)^# Warning: table \S+ \S+ is managed by iptables-nft, do not touch!\n?`).ReplaceAllString(stderr.String(), "")
	if err != nil || (rest != "" && name != "nft") {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func Ports(specs ...string) []config.Port {
	var out []config.Port
	for _, s := range specs {
		p, err := config.ParsePort(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}

// expectReach probes every (proto, port) from both peer families and fails
// where the kernel disagrees with want.
func (n *TestNet) ExpectReach(t *testing.T, when string, want bool, ps ...config.Port) {
	t.Helper()
	var probes []Probe
	for _, p := range ps {
		for _, src := range BothFamilies {
			probes = append(probes, Probe{p.Proto, src, p.Num})
		}
	}
	got := n.Reach(t, probes)
	for _, p := range probes {
		if got[p] != want {
			t.Errorf("%s: %v reached=%v, want %v", when, p, got[p], want)
		}
	}
}

func GrepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func Diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y))
			if len(out) > 10 {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// restoreUfw loads the ufw layout that TestKernelUfwLayout restores: ufw's
// own chains without needing ufw installed, in well under a second.
func RestoreUfw(t *testing.T, n *TestNet) {
	t.Helper()
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	Run(t, UfwSave4, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	Run(t, UfwSave6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
}

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
func (n *TestNet) Container(t *testing.T) string {
	t.Helper()
	ctr := n.Node + "-c"
	Run(t, "", "ip", "netns", "add", ctr)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ctr).Run() })
	hostEnd := "vh" + n.Node[len(n.Node)-6:]
	Run(t, "", "ip", "-n", n.Node, "link", "add", "docker0", "type", "bridge")
	Run(t, "", "ip", "-n", n.Node, "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ctr)
	Run(t, "", "ip", "-n", n.Node, "link", "set", hostEnd, "master", "docker0")
	for _, a := range []string{bridgeV4 + "/16", bridgeV6 + "/64"} {
		args := []string{"-n", n.Node, "addr", "add", a, "dev", "docker0"}
		if a == bridgeV6+"/64" {
			args = append(args, "nodad")
		}
		Run(t, "", "ip", args...)
	}
	Run(t, "", "ip", "-n", n.Node, "link", "set", "docker0", "up")
	Run(t, "", "ip", "-n", n.Node, "link", "set", hostEnd, "up")
	Run(t, "", "ip", "-n", ctr, "link", "set", "lo", "up")
	Run(t, "", "ip", "-n", ctr, "addr", "add", ctrV4+"/16", "dev", "eth0")
	Run(t, "", "ip", "-n", ctr, "addr", "add", ctrV6+"/64", "dev", "eth0", "nodad")
	Run(t, "", "ip", "-n", ctr, "link", "set", "eth0", "up")
	Run(t, "", "ip", "-n", ctr, "route", "add", "default", "via", bridgeV4)
	Run(t, "", "ip", "-n", ctr, "-6", "route", "add", "default", "via", bridgeV6)
	// Static neighbours on the container link: neighbour discovery is not
	// what these tests are about.
	mac := func(ns, dev string) string {
		out := Run(t, "", "ip", "-n", ns, "-br", "link", "show", dev)
		f := strings.Fields(out)
		if len(f) < 3 {
			t.Fatalf("no address of %s in %s: %q", dev, ns, out)
		}
		return f[2]
	}
	bridgeMAC, ctrMAC := mac(n.Node, "docker0"), mac(ctr, "eth0")
	Run(t, "", "ip", "-n", n.Node, "neigh", "replace", ctrV6, "lladdr", ctrMAC, "nud", "permanent", "dev", "docker0")
	Run(t, "", "ip", "-n", n.Node, "neigh", "replace", ctrV4, "lladdr", ctrMAC, "nud", "permanent", "dev", "docker0")
	Run(t, "", "ip", "-n", ctr, "neigh", "replace", bridgeV6, "lladdr", bridgeMAC, "nud", "permanent", "dev", "eth0")
	Run(t, "", "ip", "-n", ctr, "neigh", "replace", bridgeV4, "lladdr", bridgeMAC, "nud", "permanent", "dev", "eth0")
	Run(t, "", "ip", "netns", "exec", n.Node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	return ctr
}

func RequireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, b := range tools {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("needs %s: %v (apt-get install iptables)", b, err)
		}
	}
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
const UfwDockerRules = `*nat
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
const UfwDockerRules6 = `*nat
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

// ufwSave4 and ufwSave6 are iptables-save and ip6tables-save of a ufw 0.36
// node (Debian 12, iptables 1.8.9 nf_tables) made with the real ufw in a
// namespace by TestKernelUfw (FW_UFW_SAVE=1): default deny incoming and
// routed; allow 22/tcp, 8000:8010/tcp, 60000:60010/udp; 7000/tcp from
// 198.18.0.3 and fd00:f0::3; limit 2222/tcp; deny 9000/tcp; route allow
// 8443/tcp. Restoring them reproduces ufw's chain layout where ufw itself is
// not installed.
const UfwSave4 = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:ufw-after-forward - [0:0]
:ufw-after-input - [0:0]
:ufw-after-logging-forward - [0:0]
:ufw-after-logging-input - [0:0]
:ufw-after-logging-output - [0:0]
:ufw-after-output - [0:0]
:ufw-before-forward - [0:0]
:ufw-before-input - [0:0]
:ufw-before-logging-forward - [0:0]
:ufw-before-logging-input - [0:0]
:ufw-before-logging-output - [0:0]
:ufw-before-output - [0:0]
:ufw-logging-allow - [0:0]
:ufw-logging-deny - [0:0]
:ufw-not-local - [0:0]
:ufw-reject-forward - [0:0]
:ufw-reject-input - [0:0]
:ufw-reject-output - [0:0]
:ufw-skip-to-policy-forward - [0:0]
:ufw-skip-to-policy-input - [0:0]
:ufw-skip-to-policy-output - [0:0]
:ufw-track-forward - [0:0]
:ufw-track-input - [0:0]
:ufw-track-output - [0:0]
:ufw-user-forward - [0:0]
:ufw-user-input - [0:0]
:ufw-user-limit - [0:0]
:ufw-user-limit-accept - [0:0]
:ufw-user-logging-forward - [0:0]
:ufw-user-logging-input - [0:0]
:ufw-user-logging-output - [0:0]
:ufw-user-output - [0:0]
-A INPUT -j ufw-before-logging-input
-A INPUT -j ufw-before-input
-A INPUT -j ufw-after-input
-A INPUT -j ufw-after-logging-input
-A INPUT -j ufw-reject-input
-A INPUT -j ufw-track-input
-A FORWARD -j ufw-before-logging-forward
-A FORWARD -j ufw-before-forward
-A FORWARD -j ufw-after-forward
-A FORWARD -j ufw-after-logging-forward
-A FORWARD -j ufw-reject-forward
-A FORWARD -j ufw-track-forward
-A OUTPUT -j ufw-before-logging-output
-A OUTPUT -j ufw-before-output
-A OUTPUT -j ufw-after-output
-A OUTPUT -j ufw-after-logging-output
-A OUTPUT -j ufw-reject-output
-A OUTPUT -j ufw-track-output
-A ufw-after-input -p udp -m udp --dport 137 -j ufw-skip-to-policy-input
-A ufw-after-input -p udp -m udp --dport 138 -j ufw-skip-to-policy-input
-A ufw-after-input -p tcp -m tcp --dport 139 -j ufw-skip-to-policy-input
-A ufw-after-input -p tcp -m tcp --dport 445 -j ufw-skip-to-policy-input
-A ufw-after-input -p udp -m udp --dport 67 -j ufw-skip-to-policy-input
-A ufw-after-input -p udp -m udp --dport 68 -j ufw-skip-to-policy-input
-A ufw-after-input -m addrtype --dst-type BROADCAST -j ufw-skip-to-policy-input
-A ufw-after-logging-forward -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw-after-logging-input -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw-before-forward -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw-before-forward -p icmp -m icmp --icmp-type 3 -j ACCEPT
-A ufw-before-forward -p icmp -m icmp --icmp-type 11 -j ACCEPT
-A ufw-before-forward -p icmp -m icmp --icmp-type 12 -j ACCEPT
-A ufw-before-forward -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A ufw-before-forward -j ufw-user-forward
-A ufw-before-input -i lo -j ACCEPT
-A ufw-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw-before-input -m conntrack --ctstate INVALID -j ufw-logging-deny
-A ufw-before-input -m conntrack --ctstate INVALID -j DROP
-A ufw-before-input -p icmp -m icmp --icmp-type 3 -j ACCEPT
-A ufw-before-input -p icmp -m icmp --icmp-type 11 -j ACCEPT
-A ufw-before-input -p icmp -m icmp --icmp-type 12 -j ACCEPT
-A ufw-before-input -p icmp -m icmp --icmp-type 8 -j ACCEPT
-A ufw-before-input -p udp -m udp --sport 67 --dport 68 -j ACCEPT
-A ufw-before-input -j ufw-not-local
-A ufw-before-input -d 224.0.0.251/32 -p udp -m udp --dport 5353 -j ACCEPT
-A ufw-before-input -d 239.255.255.250/32 -p udp -m udp --dport 1900 -j ACCEPT
-A ufw-before-input -j ufw-user-input
-A ufw-before-output -o lo -j ACCEPT
-A ufw-before-output -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw-before-output -j ufw-user-output
-A ufw-logging-allow -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW ALLOW] "
-A ufw-logging-deny -m conntrack --ctstate INVALID -m limit --limit 3/min --limit-burst 10 -j RETURN
-A ufw-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw-not-local -m addrtype --dst-type LOCAL -j RETURN
-A ufw-not-local -m addrtype --dst-type MULTICAST -j RETURN
-A ufw-not-local -m addrtype --dst-type BROADCAST -j RETURN
-A ufw-not-local -m limit --limit 3/min --limit-burst 10 -j ufw-logging-deny
-A ufw-not-local -j DROP
-A ufw-skip-to-policy-forward -j DROP
-A ufw-skip-to-policy-input -j DROP
-A ufw-skip-to-policy-output -j ACCEPT
-A ufw-track-output -p tcp -m conntrack --ctstate NEW -j ACCEPT
-A ufw-track-output -p udp -m conntrack --ctstate NEW -j ACCEPT
-A ufw-user-forward -p tcp -m tcp --dport 8443 -j ACCEPT
-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT
-A ufw-user-input -p tcp -m multiport --dports 8000:8010 -j ACCEPT
-A ufw-user-input -p udp -m multiport --dports 60000:60010 -j ACCEPT
-A ufw-user-input -s 198.18.0.3/32 -p tcp -m tcp --dport 7000 -j ACCEPT
-A ufw-user-input -p tcp -m tcp --dport 2222 -m conntrack --ctstate NEW -m recent --set --name DEFAULT --mask 255.255.255.255 --rsource
-A ufw-user-input -p tcp -m tcp --dport 2222 -m conntrack --ctstate NEW -m recent --update --seconds 30 --hitcount 6 --name DEFAULT --mask 255.255.255.255 --rsource -j ufw-user-limit
-A ufw-user-input -p tcp -m tcp --dport 2222 -j ufw-user-limit-accept
-A ufw-user-input -p tcp -m tcp --dport 9000 -j DROP
-A ufw-user-limit -m limit --limit 3/min -j LOG --log-prefix "[UFW LIMIT BLOCK] "
-A ufw-user-limit -j REJECT --reject-with icmp-port-unreachable
-A ufw-user-limit-accept -j ACCEPT
COMMIT
`

const UfwSave6 = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:ufw6-after-forward - [0:0]
:ufw6-after-input - [0:0]
:ufw6-after-logging-forward - [0:0]
:ufw6-after-logging-input - [0:0]
:ufw6-after-logging-output - [0:0]
:ufw6-after-output - [0:0]
:ufw6-before-forward - [0:0]
:ufw6-before-input - [0:0]
:ufw6-before-logging-forward - [0:0]
:ufw6-before-logging-input - [0:0]
:ufw6-before-logging-output - [0:0]
:ufw6-before-output - [0:0]
:ufw6-logging-allow - [0:0]
:ufw6-logging-deny - [0:0]
:ufw6-reject-forward - [0:0]
:ufw6-reject-input - [0:0]
:ufw6-reject-output - [0:0]
:ufw6-skip-to-policy-forward - [0:0]
:ufw6-skip-to-policy-input - [0:0]
:ufw6-skip-to-policy-output - [0:0]
:ufw6-track-forward - [0:0]
:ufw6-track-input - [0:0]
:ufw6-track-output - [0:0]
:ufw6-user-forward - [0:0]
:ufw6-user-input - [0:0]
:ufw6-user-limit - [0:0]
:ufw6-user-limit-accept - [0:0]
:ufw6-user-logging-forward - [0:0]
:ufw6-user-logging-input - [0:0]
:ufw6-user-logging-output - [0:0]
:ufw6-user-output - [0:0]
-A INPUT -j ufw6-before-logging-input
-A INPUT -j ufw6-before-input
-A INPUT -j ufw6-after-input
-A INPUT -j ufw6-after-logging-input
-A INPUT -j ufw6-reject-input
-A INPUT -j ufw6-track-input
-A FORWARD -j ufw6-before-logging-forward
-A FORWARD -j ufw6-before-forward
-A FORWARD -j ufw6-after-forward
-A FORWARD -j ufw6-after-logging-forward
-A FORWARD -j ufw6-reject-forward
-A FORWARD -j ufw6-track-forward
-A OUTPUT -j ufw6-before-logging-output
-A OUTPUT -j ufw6-before-output
-A OUTPUT -j ufw6-after-output
-A OUTPUT -j ufw6-after-logging-output
-A OUTPUT -j ufw6-reject-output
-A OUTPUT -j ufw6-track-output
-A ufw6-after-input -p udp -m udp --dport 137 -j ufw6-skip-to-policy-input
-A ufw6-after-input -p udp -m udp --dport 138 -j ufw6-skip-to-policy-input
-A ufw6-after-input -p tcp -m tcp --dport 139 -j ufw6-skip-to-policy-input
-A ufw6-after-input -p tcp -m tcp --dport 445 -j ufw6-skip-to-policy-input
-A ufw6-after-input -p udp -m udp --dport 546 -j ufw6-skip-to-policy-input
-A ufw6-after-input -p udp -m udp --dport 547 -j ufw6-skip-to-policy-input
-A ufw6-after-logging-forward -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw6-after-logging-input -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw6-before-forward -m rt --rt-type 0 -j DROP
-A ufw6-before-forward -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 1 -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 2 -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 3 -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 4 -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT
-A ufw6-before-forward -p ipv6-icmp -m icmp6 --icmpv6-type 129 -j ACCEPT
-A ufw6-before-forward -j ufw6-user-forward
-A ufw6-before-input -i lo -j ACCEPT
-A ufw6-before-input -m rt --rt-type 0 -j DROP
-A ufw6-before-input -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 129 -j ACCEPT
-A ufw6-before-input -m conntrack --ctstate INVALID -j ufw6-logging-deny
-A ufw6-before-input -m conntrack --ctstate INVALID -j DROP
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 1 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 2 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 3 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 4 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 133 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 134 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 135 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 136 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 141 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 142 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 130 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 131 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 132 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 143 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 148 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 149 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 151 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 152 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 153 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 144 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 145 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 146 -j ACCEPT
-A ufw6-before-input -p ipv6-icmp -m icmp6 --icmpv6-type 147 -j ACCEPT
-A ufw6-before-input -s fe80::/10 -d fe80::/10 -p udp -m udp --sport 547 --dport 546 -j ACCEPT
-A ufw6-before-input -d ff02::fb/128 -p udp -m udp --dport 5353 -j ACCEPT
-A ufw6-before-input -d ff02::f/128 -p udp -m udp --dport 1900 -j ACCEPT
-A ufw6-before-input -j ufw6-user-input
-A ufw6-before-output -o lo -j ACCEPT
-A ufw6-before-output -m rt --rt-type 0 -j DROP
-A ufw6-before-output -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 1 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 2 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 3 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 4 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 129 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 133 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 136 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 135 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 134 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 141 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 142 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 130 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 131 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 132 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 143 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 148 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -p ipv6-icmp -m icmp6 --icmpv6-type 149 -m hl --hl-eq 255 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 151 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 152 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-output -s fe80::/10 -p ipv6-icmp -m icmp6 --icmpv6-type 153 -m hl --hl-eq 1 -j ACCEPT
-A ufw6-before-output -j ufw6-user-output
-A ufw6-logging-allow -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW ALLOW] "
-A ufw6-logging-deny -m conntrack --ctstate INVALID -m limit --limit 3/min --limit-burst 10 -j RETURN
-A ufw6-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix "[UFW BLOCK] "
-A ufw6-skip-to-policy-forward -j DROP
-A ufw6-skip-to-policy-input -j DROP
-A ufw6-skip-to-policy-output -j ACCEPT
-A ufw6-track-output -p tcp -m conntrack --ctstate NEW -j ACCEPT
-A ufw6-track-output -p udp -m conntrack --ctstate NEW -j ACCEPT
-A ufw6-user-forward -p tcp -m tcp --dport 8443 -j ACCEPT
-A ufw6-user-input -p tcp -m tcp --dport 22 -j ACCEPT
-A ufw6-user-input -p tcp -m multiport --dports 8000:8010 -j ACCEPT
-A ufw6-user-input -p udp -m multiport --dports 60000:60010 -j ACCEPT
-A ufw6-user-input -s fd00:f0::3/128 -p tcp -m tcp --dport 7000 -j ACCEPT
-A ufw6-user-input -p tcp -m tcp --dport 2222 -m conntrack --ctstate NEW -m recent --set --name DEFAULT --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource
-A ufw6-user-input -p tcp -m tcp --dport 2222 -m conntrack --ctstate NEW -m recent --update --seconds 30 --hitcount 6 --name DEFAULT --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -j ufw6-user-limit
-A ufw6-user-input -p tcp -m tcp --dport 2222 -j ufw6-user-limit-accept
-A ufw6-user-input -p tcp -m tcp --dport 9000 -j DROP
-A ufw6-user-limit -m limit --limit 3/min -j LOG --log-prefix "[UFW LIMIT BLOCK] "
-A ufw6-user-limit -j REJECT --reject-with icmp6-port-unreachable
-A ufw6-user-limit-accept -j ACCEPT
COMMIT
`

// predictedAny is predicted for any direction: a published port's opening
// is at the forward hook, by the host port.
func predictedAny(open []firewall.Opening, p Probe) (reach, uncertain bool) {
	src := netip.MustParseAddr(p.Src)
	for _, o := range open {
		if o.Proto != p.Proto || o.Family != p.Family() || p.Port < o.Port || p.Port > firewall.PortEnd(o) {
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

// dnatOracle lists the node, reads its interfaces and forwarding, evaluates
// (with openPortsOn, the evaluator),
// probes every (proto, source, host port) from the peer and fails on any
// disagreement; an uncertain prediction fails too (none is expected here).
func DnatOracle(n *TestNet, t *testing.T, openPortsOn func(*firewall.Ruleset, firewall.Node) []firewall.Opening, ports []uint16, srcs, protos []string) ([]firewall.Opening, firewall.Node, *firewall.Ruleset) {
	t.Helper()
	rs := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	open := openPortsOn(rs, node)
	for _, o := range open {
		t.Logf("open: %+v", o)
	}
	var probes []Probe
	for _, proto := range protos {
		for _, s := range srcs {
			for _, p := range ports {
				probes = append(probes, Probe{proto, s, p})
			}
		}
	}
	got := n.Reach(t, probes)
	defer func() {
		if t.Failed() {
			t.Logf("ruleset as decoded:\n%s", firewall.Render(rs))
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

// AssertOpen fails t unless open holds want.
func AssertOpen(t *testing.T, open []firewall.Opening, want firewall.Opening) {
	t.Helper()
	for _, o := range open {
		if o == want {
			return
		}
	}
	t.Errorf("missing opening %+v", want)
}
