package sandbox

// EngineNode: a node with a Docker engine of its own, for the cutover's
// port hold measured as a client outside the node sees it. A
// network namespace runs its own dockerd (FIELD-NOTES, "A node with its own
// Docker engine"), which publishes ports there through its own DNAT; a peer
// namespace, joined by a veth pair, is the client. Nothing of the host's
// network or firewall is touched, and the host's engine is only read from
// (images are copied with docker save | docker load).
//
// The reference node (its own dockerd, ufw with routed rules, the agent on
// the node) is built separately; this is the smallest node the hold can be
// measured on. Both run their engine the same way (engine.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"adoption/netns"
)

// EngineNode is up once StartEngineNode returns.
type EngineNode struct {
	Netns, Peer    string // names as in `ip netns`
	Addr, PeerAddr string
	Dir            string
	Host           string // DOCKER_HOST of the node's engine
	engine         dockerd
}

// NetnsPath is the node's namespace path.
func (n *EngineNode) NetnsPath() string { return "/run/netns/" + n.Netns }

// PeerPath is the client's namespace path.
func (n *EngineNode) PeerPath() string { return "/run/netns/" + n.Peer }

// StartEngineNode creates namespaces adh-<name> and adh-<name>-peer
// (198.19.<index>.1 and .2), and starts a dockerd in the first, with its
// state under dir. It needs root, ip, nsenter and dockerd, and names the
// one missing; the engine uses the host engine's storage driver.
func StartEngineNode(ctx context.Context, name string, index int, dir string) (*EngineNode, error) {
	for _, tool := range []string{"ip", "nsenter", "dockerd", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("a node with its own Docker engine needs %s: %w", tool, err)
		}
	}
	if index < 1 || index > 250 || len(name) > 8 {
		return nil, fmt.Errorf("engine node %q index %d: name of at most 8 characters, index 1-250", name, index)
	}
	n := &EngineNode{Netns: "adh-" + name, Peer: "adh-" + name + "-peer", Dir: dir,
		Addr: fmt.Sprintf("198.19.%d.1", index), PeerAddr: fmt.Sprintf("198.19.%d.2", index)}
	n.removeNamespaces()
	veth, peerVeth := "vhn"+name, "vhp"+name
	for _, s := range [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "netns", "add", n.Peer},
		{"ip", "link", "add", veth, "netns", n.Netns, "type", "veth", "peer", "name", peerVeth, "netns", n.Peer},
		{"ip", "-n", n.Netns, "addr", "add", n.Addr + "/30", "dev", veth},
		{"ip", "-n", n.Peer, "addr", "add", n.PeerAddr + "/30", "dev", peerVeth},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
		{"ip", "-n", n.Peer, "link", "set", "lo", "up"},
		{"ip", "-n", n.Netns, "link", "set", veth, "up"},
		{"ip", "-n", n.Peer, "link", "set", peerVeth, "up"},
	} {
		if err := runCmd(nil, s...); err != nil {
			n.removeNamespaces()
			return nil, err
		}
	}
	// Its own containerd namespaces: the host's containerd may be shared.
	n.engine = dockerd{netns: n.Netns, dataRoot: filepath.Join(dir, "data"), runDir: dir, logPath: filepath.Join(dir, "dockerd.log"),
		extra: []string{"--containerd-namespace", n.Netns, "--containerd-plugins-namespace", n.Netns + "-plugins"}}
	n.Host = n.engine.host()
	if err := n.engine.start(); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// Load copies images from the host's engine into the node's.
func (n *EngineNode) Load(ctx context.Context, refs ...string) error {
	return n.engine.load(ctx, refs...)
}

// Close removes the engine's containers, stops it and deletes the
// namespaces and its state.
func (n *EngineNode) Close() error {
	err := n.engine.stop()
	n.removeNamespaces()
	unmountUnder(n.Dir)
	return errors.Join(err, os.RemoveAll(n.Dir))
}

func (n *EngineNode) removeNamespaces() {
	_ = exec.Command("ip", "netns", "del", n.Netns).Run()
	_ = exec.Command("ip", "netns", "del", n.Peer).Run()
}

// DialFrom connects to addr (TCP) from the network namespace at nsPath, as
// a client there would. The calling thread enters the namespace for the
// dial only.
func DialFrom(ctx context.Context, nsPath, addr string) (net.Conn, error) {
	return netns.Dial(ctx, nsPath, &net.Dialer{}, addr)
}

// ClientStats is what clients in the peer namespace saw.
type ClientStats struct {
	Attempts, OK, Failed int
	// LongestWait is the longest connect of an attempt that succeeded: how
	// long a held client waited for the new container.
	LongestWait time.Duration
	// Gap is the longest span in which no fresh connection was answered
	// promptly (within 200 ms): from the start of the first attempt that
	// failed or waited to the start of the next prompt one.
	Gap time.Duration
	// P50Wait and P99Wait are the median and 99th percentile connect of
	// the attempts that succeeded after the warm-up.
	P50Wait, P99Wait time.Duration
	// LongestHandshake is the longest handshake the client's kernel
	// measured (SYN sent to SYN-ACK received: TCP_INFO's first RTT sample)
	// of the connects that succeeded after the warm-up: what the node made
	// the client wait, without the time the client process itself waited
	// for a CPU. SynRetransmitted counts those connects whose SYN the
	// kernel had to send again (a SYN dropped or held past its timer).
	LongestHandshake time.Duration
	SynRetransmitted int
	FirstFail        string
	Versions         map[string]int // what the service answered, by body
}

// ClientWarmup is how long Clients runs before it measures waits and gaps:
// a client's very first SYNs after idle may wait for neighbour resolution,
// which is no part of any swap. Failures count from the start.
const ClientWarmup = 1500 * time.Millisecond

// Clients runs k clients in the peer namespace until stop is closed, each
// connecting to addr in a loop (a connect may wait up to connectTimeout),
// sending GET path over HTTP/1.0 and reading the answer. A failure is a
// connect or a request that did not get a 200. Callers start what they
// measure ClientWarmup after calling it.
func (n *EngineNode) Clients(ctx context.Context, addr, path string, k int, connectTimeout time.Duration, stop <-chan struct{}) ClientStats {
	measureFrom := time.Now().Add(ClientWarmup)
	type attempt struct {
		start time.Time
		wait  time.Duration
		hs    time.Duration // the kernel's SYN to SYN-ACK
		synRe int           // SYNs sent again
		ok    bool
		body  string
		err   string
	}
	out := make(chan []attempt, k)
	for i := 0; i < k; i++ {
		go func(i int) {
			var as []attempt
			time.Sleep(time.Duration(i) * 5 * time.Millisecond) // staggered
			for {
				select {
				case <-stop:
					out <- as
					return
				default:
				}
				a := attempt{start: time.Now()}
				dctx, cancel := context.WithTimeout(ctx, connectTimeout)
				c, err := DialFrom(dctx, n.PeerPath(), addr)
				cancel()
				a.wait = time.Since(a.start)
				if err == nil {
					a.hs, a.synRe = handshake(c)
					a.body, err = httpGet(c, path)
					c.Close()
				}
				if err != nil {
					a.err = err.Error()
				} else {
					a.ok = true
				}
				as = append(as, a)
				time.Sleep(10 * time.Millisecond)
			}
		}(i)
	}
	var all []attempt
	for i := 0; i < k; i++ {
		all = append(all, <-out...)
	}
	sortAttempts := func() {
		for i := 1; i < len(all); i++ {
			for j := i; j > 0 && all[j].start.Before(all[j-1].start); j-- {
				all[j], all[j-1] = all[j-1], all[j]
			}
		}
	}
	sortAttempts()
	s := ClientStats{Attempts: len(all), Versions: map[string]int{}}
	var since time.Time
	var waits []time.Duration
	for _, a := range all {
		if a.ok {
			s.OK++
			s.Versions[a.body]++
		} else {
			s.Failed++
			if s.FirstFail == "" {
				s.FirstFail = a.err
			}
		}
		if a.start.Before(measureFrom) {
			continue
		}
		if a.ok {
			s.LongestWait = max(s.LongestWait, a.wait)
			s.LongestHandshake = max(s.LongestHandshake, a.hs)
			if a.synRe > 0 {
				s.SynRetransmitted++
			}
			waits = append(waits, a.wait)
		}
		prompt := a.ok && a.wait < 200*time.Millisecond
		switch {
		case !prompt && since.IsZero():
			since = a.start
		case prompt && !since.IsZero():
			s.Gap = max(s.Gap, a.start.Sub(since))
			since = time.Time{}
		}
	}
	slices.Sort(waits)
	if len(waits) > 0 {
		s.P50Wait, s.P99Wait = waits[len(waits)/2], waits[(len(waits)*99)/100]
	}
	return s
}

// handshake is the handshake c's kernel measured, SYN sent to SYN-ACK
// received (TCP_INFO's round trip right after the connect: its first
// sample), and how many times it sent the SYN again (no data was sent yet,
// so every retransmission is the SYN's).
func handshake(c net.Conn) (time.Duration, int) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, 0
	}
	var info *unix.TCPInfo
	if err := rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || info == nil {
		return 0, 0
	}
	return time.Duration(info.Rtt) * time.Microsecond, int(info.Total_retrans)
}

// httpGet sends a minimal HTTP/1.0 GET and returns the body of a 200.
func httpGet(c net.Conn, path string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: svc\r\n\r\n", path); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		return "", err
	}
	head, body, _ := strings.Cut(string(b), "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.0 200") && !strings.HasPrefix(head, "HTTP/1.1 200") {
		return "", fmt.Errorf("answer %.40q", head)
	}
	return strings.TrimSpace(body), nil
}

// Get fetches path from addr as a client in the peer namespace: the body
// of a 200.
func (n *EngineNode) Get(ctx context.Context, addr, path string) (string, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := DialFrom(dctx, n.PeerPath(), addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return httpGet(c, path)
}
