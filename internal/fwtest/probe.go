// This file holds the kernel as the oracle: probes sent from the peer
// namespace, and how their outcome is compared with the evaluator's.

package fwtest

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/firewall"
	"adoption/vocab"
)

type Probe struct {
	Proto string
	Src   string // peer address
	Port  uint16
	// Dst, when set, is an address beyond the node the probe is routed to
	// through it (a container's); "": the node's own address.
	Dst string
}

func (p Probe) Family() string {
	if strings.Contains(p.Src, ":") {
		return firewall.FamilyIP6
	}
	return firewall.FamilyIP
}

func (p Probe) dst() string {
	if p.Dst != "" {
		return p.Dst
	}
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

func attempt(p Probe) bool { return attemptTo(p.Proto, p.Src, p.dst(), p.Port) }

// Patience for one attempt: the first round is quick; a packet that did not
// get through is tried once more, longer (attemptAgain). The firewall drops
// a packet again the same way, while one lost to a loaded host's scheduling
// (150 probes at once on two busy cores) gets through the second time.
const (
	firstTimeout = 400 * time.Millisecond
	againTimeout = 2 * time.Second
)

// attemptTo says whether a new connection from src (an address of the
// calling thread's namespace) to dst:port gets through: a TCP handshake
// completed, or a UDP echo came back. One that does not is tried again.
func attemptTo(proto, src, dst string, port uint16) bool {
	return attemptWithin(proto, src, dst, port, firstTimeout) || attemptWithin(proto, src, dst, port, againTimeout)
}

// attemptWithin is one attempt of attemptTo, waiting at most timeout.
func attemptWithin(proto, src, dst string, port uint16, timeout time.Duration) bool {
	local := &net.TCPAddr{IP: net.ParseIP(src)}
	addr := net.JoinHostPort(dst, fmt.Sprint(port))
	if proto == "tcp" {
		d := net.Dialer{Timeout: timeout, LocalAddr: local}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}
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

// expectReach probes every (proto, port) from both peer families and fails
// where the kernel disagrees with want.
func (n *TestNet) ExpectReach(t *testing.T, when string, want bool, ps ...vocab.Port) {
	t.Helper()
	var probes []Probe
	for _, p := range ps {
		for _, src := range BothFamilies {
			probes = append(probes, Probe{Proto: p.Proto, Src: src, Port: p.Num})
		}
	}
	got := n.Reach(t, probes)
	for _, p := range probes {
		if got[p] != want {
			t.Errorf("%s: %v reached=%v, want %v", when, p, got[p], want)
		}
	}
}

// predictedAny is predicted for any direction: a published port's opening
// is at the forward hook, by the host port.
func predictedAny(open []firewall.Opening, p Probe) (reach, uncertain bool) {
	src := netip.MustParseAddr(p.Src)
	for _, o := range open {
		if o.Proto != p.Proto || o.Family != p.Family() || p.Port < o.Port || p.Port > firewall.PortEnd(o) {
			continue
		}
		// A routed opening is for a probe routed into its network, any
		// other for a probe to the node.
		if o.Routed() != (p.Dst != "") {
			continue
		}
		if o.Routed() && !RoutedInto(o, p.Dst) {
			continue
		}
		if o.From != "" && !netip.MustParsePrefix(o.From).Contains(src) {
			continue
		}
		if o.To != "" && o.To != p.dst() {
			continue // reached at another of the node's addresses
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
				probes = append(probes, Probe{Proto: proto, Src: s, Port: p})
			}
		}
	}
	got := n.Reach(t, probes)
	defer func() {
		if t.Failed() {
			t.Logf("ruleset as decoded:\n%s", firewall.Render(rs))
		}
	}()
	bad, reached := 0, 0
	for _, p := range probes {
		if got[p] {
			reached++
		}
		want, unc := predictedAny(open, p)
		if unc {
			bad++
			t.Errorf("%v: predicted uncertain, kernel says reach=%v", p, got[p])
			continue
		}
		if want != got[p] {
			bad++
			t.Errorf("%v: predicted reach=%v, kernel says %v", p, want, got[p])
		}
	}
	t.Logf("kernel oracle: %d packets checked (%d reached, %d dropped), %d mismatches", len(probes), reached, len(probes)-reached, bad)
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

// RoutedInto reports whether routed opening o's network (Via) holds dst;
// an opening with no Via (a node known by its ruleset alone) holds any.
func RoutedInto(o firewall.Opening, dst string) bool {
	if o.Via == "" {
		return true
	}
	pfx, err := netip.ParsePrefix(o.Via)
	return err == nil && pfx.Contains(netip.MustParseAddr(dst))
}
