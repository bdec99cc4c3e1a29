// This file holds the kernel tests' network: a node namespace and a peer
// namespace joined by a veth pair, with commands run in them. Addresses
// are from 198.18.0.0/15 and fd00::/8 and never leave the two namespaces.

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
	"testing"

	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/testenv"
	"adoption/vocab"
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

func Ports(specs ...string) []vocab.Port {
	var out []vocab.Port
	for _, s := range specs {
		p, err := vocab.ParsePort(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
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

const (
	bridgeV4 = "172.17.0.1"
	ctrV4    = "172.17.0.2"
	bridgeV6 = "fd00:17::1"
	ctrV6    = "fd00:17::2"
)

// ContainerV4 and ContainerV6 are the addresses of the namespace behind
// docker0 that Container adds.
const (
	ContainerV4 = ctrV4
	ContainerV6 = ctrV6
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

// LanV4 and LanV6 are the host of the network behind the node's second
// interface (Lan).
const (
	LanV4 = "192.168.77.2"
	LanV6 = "fd00:77::2"
)

// VpnV4 and VpnV6 are the host of the routed prefix behind the node's
// VPN-like interface wg0 (Vpn).
const (
	VpnV4 = "100.96.0.2"
	VpnV6 = "fd00:96::2"
)

// Lan adds a second interface to the node, a plain link (not a bridge) to
// a network behind it (192.168.77.1/24, fd00:77::1/64) holding a host
// (LanV4, LanV6) routed back through the node, routes the peer to it
// through the node and turns forwarding on. It returns the host's
// namespace and the node's interface.
func (n *TestNet) Lan(t *testing.T) (string, string) {
	t.Helper()
	dev := "ln" + n.Node[len(n.Node)-6:len(n.Node)-2]
	return n.behind(t, "-l", dev, "192.168.77.1", "fd00:77::1", LanV4, LanV6, 24), dev
}

// Vpn adds what a VPN looks like to the node: an interface named wg0 (a
// veth, not WireGuard: the firewall only sees its name and addresses)
// with a routed prefix behind it (100.96.0.0/24, fd00:96::/64) holding a
// host (VpnV4, VpnV6), routed like Lan's. It returns the host's namespace.
func (n *TestNet) Vpn(t *testing.T) string {
	t.Helper()
	return n.behind(t, "-w", "wg0", "100.96.0.1", "fd00:96::1", VpnV4, VpnV6, 24)
}

// behind links the node's interface dev to a new namespace (the node's
// name and suffix) holding host4 and host6, the node holding gw4/bits and
// gw6/64 on dev; the host routes back through the node, the peer reaches
// the host's networks through the node, and forwarding is on.
func (n *TestNet) behind(t *testing.T, suffix, dev, gw4, gw6, host4, host6 string, bits int) string {
	t.Helper()
	host := n.Node + suffix
	Run(t, "", "ip", "netns", "add", host)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", host).Run() })
	Run(t, "", "ip", "-n", n.Node, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", host)
	Run(t, "", "ip", "-n", n.Node, "addr", "add", fmt.Sprintf("%s/%d", gw4, bits), "dev", dev)
	Run(t, "", "ip", "-n", n.Node, "addr", "add", gw6+"/64", "dev", dev, "nodad")
	Run(t, "", "ip", "-n", n.Node, "link", "set", dev, "up")
	Run(t, "", "ip", "-n", host, "link", "set", "lo", "up")
	Run(t, "", "ip", "-n", host, "addr", "add", fmt.Sprintf("%s/%d", host4, bits), "dev", "eth0")
	Run(t, "", "ip", "-n", host, "addr", "add", host6+"/64", "dev", "eth0", "nodad")
	Run(t, "", "ip", "-n", host, "link", "set", "eth0", "up")
	Run(t, "", "ip", "-n", host, "route", "add", "default", "via", gw4)
	Run(t, "", "ip", "-n", host, "-6", "route", "add", "default", "via", gw6)
	mac := func(ns, d string) string {
		f := strings.Fields(Run(t, "", "ip", "-n", ns, "-br", "link", "show", d))
		if len(f) < 3 {
			t.Fatalf("no address of %s in %s: %q", d, ns, f)
		}
		return f[2]
	}
	nodeMAC, hostMAC := mac(n.Node, dev), mac(host, "eth0")
	Run(t, "", "ip", "-n", n.Node, "neigh", "replace", host4, "lladdr", hostMAC, "nud", "permanent", "dev", dev)
	Run(t, "", "ip", "-n", n.Node, "neigh", "replace", host6, "lladdr", hostMAC, "nud", "permanent", "dev", dev)
	Run(t, "", "ip", "-n", host, "neigh", "replace", gw4, "lladdr", nodeMAC, "nud", "permanent", "dev", "eth0")
	Run(t, "", "ip", "-n", host, "neigh", "replace", gw6, "lladdr", nodeMAC, "nud", "permanent", "dev", "eth0")
	net4 := netip.MustParsePrefix(fmt.Sprintf("%s/%d", gw4, bits)).Masked().String()
	net6 := netip.MustParsePrefix(gw6 + "/64").Masked().String()
	Run(t, "", "ip", "-n", n.Peer, "route", "add", net4, "via", NodeV4)
	Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", net6, "via", NodeV6)
	Run(t, "", "ip", "netns", "exec", n.Node, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	return host
}

func RequireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, b := range tools {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("needs %s: %v (apt-get install iptables)", b, err)
		}
	}
}
