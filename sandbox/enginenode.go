package sandbox

// EngineNode: a node with a Docker engine of its own, for the cutover's
// port hold (issue 13) measured as a client outside the node sees it. A
// network namespace runs its own dockerd (FIELD-NOTES, "A node with its own
// Docker engine"), which publishes ports there through its own DNAT; a peer
// namespace, joined by a veth pair, is the client. Nothing of the host's
// network or firewall is touched, and the host's engine is only read from
// (images are copied with docker save | docker load).
//
// The reference node (its own dockerd, ufw with routed rules, the agent on
// the node) is built separately; this is the smallest node the hold can be
// measured on.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"adoption/netns"
)

// EngineNode is up once StartEngineNode returns.
type EngineNode struct {
	Netns, Peer    string // names as in `ip netns`
	Addr, PeerAddr string
	Dir            string
	Host           string // DOCKER_HOST of the node's engine
	pid            int
}

// NetnsPath is the node's namespace path.
func (n *EngineNode) NetnsPath() string { return "/run/netns/" + n.Netns }

// PeerPath is the client's namespace path.
func (n *EngineNode) PeerPath() string { return "/run/netns/" + n.Peer }

// StartEngineNode creates namespaces adh-<name> and adh-<name>-peer
// (198.19.<index>.1 and .2), and starts a dockerd in the first, with its
// state under dir. It needs root, ip, nsenter, dockerd and fuse-overlayfs,
// and names the one missing.
func StartEngineNode(ctx context.Context, name string, index int, dir string) (*EngineNode, error) {
	for _, tool := range []string{"ip", "nsenter", "dockerd", "docker", "fuse-overlayfs"} {
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The host's daemon.json sets data-root; a flag would conflict with it.
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "docker.sock")
	n.Host = "unix://" + sock
	logf, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--net="+n.NetnsPath(), "dockerd",
		"--config-file", filepath.Join(dir, "daemon.json"), "--storage-driver", "fuse-overlayfs",
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"-H", n.Host, "--pidfile", filepath.Join(dir, "docker.pid"),
		"--containerd-namespace", n.Netns, "--containerd-plugins-namespace", n.Netns+"-plugins")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.removeNamespaces()
		return nil, fmt.Errorf("start dockerd in %s: %w", n.Netns, err)
	}
	n.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, "docker", "-H", n.Host, "version", "--format", "{{.Server.Version}}").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
			_ = n.Close()
			return nil, fmt.Errorf("dockerd in %s did not answer: %v: %s\n%s", n.Netns, err, out, tail(log, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n, nil
}

// Load copies images from the host's engine into the node's.
func (n *EngineNode) Load(ctx context.Context, refs ...string) error {
	save := exec.CommandContext(ctx, "docker", append([]string{"save"}, refs...)...)
	load := exec.CommandContext(ctx, "docker", "-H", n.Host, "load")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	load.Stdin = pipe
	var serr, lerr strings.Builder
	save.Stderr, load.Stderr = &serr, &lerr
	if err := save.Start(); err != nil {
		return err
	}
	if err := load.Run(); err != nil {
		_ = save.Wait()
		return fmt.Errorf("docker load into %s: %w: %s", n.Netns, err, lerr.String())
	}
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %v: %w: %s", refs, err, serr.String())
	}
	return nil
}

// Close removes the engine's containers, stops it and deletes the
// namespaces and its state.
func (n *EngineNode) Close() error {
	var errs []error
	if out, err := exec.Command("docker", "-H", n.Host, "ps", "-aq").Output(); err == nil {
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"-H", n.Host, "rm", "-f", "-v"}, ids...)...).Run()
		}
	}
	if n.pid > 0 {
		pid := n.pid
		if b, err := os.ReadFile(filepath.Join(n.Dir, "docker.pid")); err == nil {
			if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				pid = p
			}
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(n.pid, syscall.SIGKILL)
	}
	n.removeNamespaces()
	// fuse-overlayfs mounts may linger under data; unmount before removing.
	if out, err := exec.Command("sh", "-c", "grep -o ' "+n.Dir+"[^ ]*' /proc/mounts | sort -r").Output(); err == nil {
		for _, m := range strings.Fields(string(out)) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
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
	Gap       time.Duration
	FirstFail string
	Versions  map[string]int // what the service answered, by body
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
	return s
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
