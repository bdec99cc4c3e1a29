package sandbox

// This file holds the reference node: the predecessor's node as it really is. It
// has its own Docker engine inside the node's network namespace (engine.go),
// the real ufw with the ufw-docker arrangement as its firewall (ufw.go),
// services that are containers of that engine with published ports, a host
// service or two listening on the node itself (IPv4 and IPv6), a peer
// namespace whose addresses are outside the private ranges (so clients there
// are the public), and a management link from the host's namespace over
// which the agent, run on the node, reaches Temporal (relay.go).

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"adoption/config"
)

// Service is a container of the node's own engine with one published port.
type Service struct {
	Name      string      // container name (validated)
	Image     string      // a local image, moved into the node's engine
	Cmd       []string    // arguments after the image's entrypoint
	Host      config.Port // published on the node: what clients connect to
	Container config.Port // inside the container: what ufw's routed rules name
	// Routed opens the container port with `ufw route allow`; a published
	// but unrouted port is closed to the public (ufw-docker's drop).
	Routed bool
	// RoutedFrom, when set (an address prefix), opens the container port
	// with `ufw route allow from RoutedFrom` instead: reachable from those
	// sources only.
	RoutedFrom string
	// Volumes are docker -v arguments (a named volume NAME:/path only).
	Volumes []string
}

// RefSpec describes a reference node. Spec's Allowed and Closed are the
// host services (ufw allows the first, not the second); AllowedOnly is not
// used: containers serve through published ports.
type RefSpec struct {
	Spec
	Services []Service
	// Images are moved into the node's engine besides the services' own
	// (e.g. the image a module migrates to).
	Images []string
	// Temporal is the host's Temporal frontend (HOST:PORT, usually
	// 127.0.0.1:7233): a relay on the management link's host end forwards
	// to it, so an agent on the node reaches it. Empty: no relay.
	Temporal string
}

// RefNode is a reference node that is up (or named to be).
type RefNode struct {
	*Node
	Services []Service
	Images   []string
	Temporal string

	Addr6, PeerAddr6   string // the node's and the peer's IPv6 addresses (2001:2::/48, RFC 5180)
	MgmtHost, MgmtNode string // the management link's ends, 198.18.INDEX.1 (host) and .2 (node)
	RunDir             string // short per-name directory: the engine's socket, exec root, pid files
}

// runBase keeps the engine's unix sockets under the 108-byte limit whatever
// Dir is: the exec root holds containerd's sockets a few levels deeper.
const runBase = "/run/adopt-sb"

// NewRef names a reference node's parts without creating anything.
func NewRef(s RefSpec) *RefNode {
	n := New(s.Spec)
	return &RefNode{
		Node:      n,
		Services:  s.Services,
		Images:    s.Images,
		Temporal:  s.Temporal,
		Addr6:     fmt.Sprintf("2001:2:0:%x::1", s.Index),
		PeerAddr6: fmt.Sprintf("2001:2:0:%x::2", s.Index),
		MgmtHost:  fmt.Sprintf("198.18.%d.1", s.Index),
		MgmtNode:  fmt.Sprintf("198.18.%d.2", s.Index),
		RunDir:    filepath.Join(runBase, s.Name),
	}
}

// DockerHost is the node's engine, as DOCKER_HOST or docker.host spell it.
func (n *RefNode) DockerHost() string { return "unix://" + filepath.Join(n.RunDir, "docker.sock") }

// TemporalAddr is the address an agent on the node dials for Temporal.
func (n *RefNode) TemporalAddr() string {
	_, port, err := net.SplitHostPort(n.Temporal)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(n.MgmtHost, port)
}

// OnNode returns a command run on the node as a node's own process runs:
// in its network namespace only (nsenter --net), so it keeps the host's
// mounts and cgroups, which dockerd and the agent need; with DOCKER_HOST
// naming the node's engine.
func (n *RefNode) OnNode(args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=" + n.NetnsPath(), "--"}, args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+n.DockerHost())
	return cmd
}

// InPeer returns a command run by a client in the peer namespace.
func (n *RefNode) InPeer(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + n.Peer, "--"}, args...)...)
}

func (n *RefNode) check() error {
	if !config.ValidName(n.Name) || n.Index < 1 || n.Index > 250 {
		return fmt.Errorf("sandbox name %q or index %d invalid: name %s, index 1-250", n.Name, n.Index, config.NameRule)
	}
	for _, s := range n.Services {
		if !config.ValidName(s.Name) {
			return fmt.Errorf("service name %q invalid: %s", s.Name, config.NameRule)
		}
		for _, v := range s.Volumes {
			vol, _, ok := strings.Cut(v, ":")
			if !ok || !config.ValidName(vol) {
				return fmt.Errorf("service %s: volume %q is not NAME:/path with a valid name", s.Name, v)
			}
		}
	}
	return nil
}

// Up raises the node: namespaces and links, its engine, ufw with the
// ufw-docker arrangement, the services, the host listeners, the files and
// the management relay. It first removes what a previous reference node of
// the same name left (found by name under RunDir, whatever its Dir was).
// On failure it removes what it raised.
func (n *RefNode) Up() (err error) {
	if err := n.check(); err != nil {
		return err
	}
	_ = n.Down()
	defer func() {
		if err != nil {
			_ = n.Down()
		}
	}()
	if err := os.MkdirAll(n.RunDir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	if err := n.links(); err != nil {
		return err
	}
	if err := n.engine().start(); err != nil {
		return err
	}
	if err := n.loadImages(); err != nil {
		return err
	}
	if err := n.ufw(); err != nil {
		return err
	}
	for _, s := range n.Services {
		if err := n.runService(s); err != nil {
			return err
		}
	}
	if err := n.writeFiles(); err != nil {
		return err
	}
	if err := n.startListeners(); err != nil {
		return err
	}
	if n.Temporal != "" {
		if err := n.startRelay(); err != nil {
			return err
		}
	}
	return nil
}

// links creates the node and its peer, the client link (IPv4 in
// 198.19.INDEX.0/30, IPv6 in 2001:2:0:INDEX::/64) and the management link
// from the host's namespace (198.18.INDEX.0/30). Both ranges are reserved
// for benchmarking: outside the private ranges, like the public.
func (n *RefNode) links() error {
	veth, peerVeth := ifname("vad", n.Name), ifname("vap", n.Name)
	mgHost, mgNode := ifname("vmh", n.Name), ifname("vmn", n.Name)
	steps := [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "netns", "add", n.Peer},
		{"ip", "link", "add", veth, "netns", n.Netns, "type", "veth", "peer", "name", peerVeth, "netns", n.Peer},
		{"ip", "-n", n.Netns, "addr", "add", n.Addr + "/30", "dev", veth},
		{"ip", "-n", n.Peer, "addr", "add", n.PeerAddr + "/30", "dev", peerVeth},
		{"ip", "-n", n.Netns, "addr", "add", n.Addr6 + "/64", "dev", veth, "nodad"},
		{"ip", "-n", n.Peer, "addr", "add", n.PeerAddr6 + "/64", "dev", peerVeth, "nodad"},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
		{"ip", "-n", n.Peer, "link", "set", "lo", "up"},
		{"ip", "-n", n.Netns, "link", "set", veth, "up"},
		{"ip", "-n", n.Peer, "link", "set", peerVeth, "up"},
		{"ip", "link", "add", mgHost, "type", "veth", "peer", "name", mgNode, "netns", n.Netns},
		{"ip", "addr", "add", n.MgmtHost + "/30", "dev", mgHost},
		{"ip", "-n", n.Netns, "addr", "add", n.MgmtNode + "/30", "dev", mgNode},
		{"ip", "link", "set", mgHost, "up"},
		{"ip", "-n", n.Netns, "link", "set", mgNode, "up"},
	}
	for _, s := range steps {
		if err := runCmd(nil, s...); err != nil {
			return err
		}
	}
	return nil
}

// ifname is a veth name: at most 15 bytes, as the kernel wants.
func ifname(prefix, name string) string {
	s := prefix + name
	if len(s) > 15 {
		s = s[:15]
	}
	return s
}

// runService starts one service in the node's engine, its port published
// on every address of the node, and opens its container port with ufw's
// routed rule when it is routed.
func (n *RefNode) runService(s Service) error {
	args := []string{"docker", "-H", n.DockerHost(), "run", "-d", "--name", s.Name,
		"-p", fmt.Sprintf("%d:%d/%s", s.Host.Num, s.Container.Num, s.Container.Proto)}
	for _, v := range s.Volumes {
		args = append(args, "-v", v)
	}
	args = append(args, s.Image)
	args = append(args, s.Cmd...)
	if err := runCmd(nil, args...); err != nil {
		return fmt.Errorf("service %s: %w", s.Name, err)
	}
	switch {
	case s.RoutedFrom != "":
		src, err := netip.ParsePrefix(s.RoutedFrom)
		if err != nil {
			return fmt.Errorf("service %s: routed_from %q: want an address prefix such as 192.0.2.0/24: %w", s.Name, s.RoutedFrom, err)
		}
		return n.ufwCmd("route", "allow", "proto", s.Container.Proto, "from", src.String(), "to", "any", "port", strconv.Itoa(int(s.Container.Num)))
	case s.Routed:
		return n.Route(s.Container)
	}
	return nil
}

// Route opens a container port to the public with ufw's routed rule, as
// an operator of the predecessor's node does for a container started by hand.
func (n *RefNode) Route(ctr config.Port) error {
	return n.ufwCmd("route", "allow", "proto", ctr.Proto, "from", "any", "to", "any", "port", strconv.Itoa(int(ctr.Num)))
}

// startListeners serves the host services inside the node's namespace,
// detached, its pid under RunDir so a later Up of the same name finds it.
func (n *RefNode) startListeners() error {
	ports := append(append([]config.Port{}, n.Allowed...), n.Closed...)
	if len(ports) == 0 {
		return nil
	}
	args := []string{n.Binary, "serve", "--name", n.Name}
	for _, p := range ports {
		args = append(args, p.String())
	}
	return n.detach(n.OnNode(args...), "listeners", "serving")
}

// startRelay forwards the management link's host end to Temporal.
func (n *RefNode) startRelay() error {
	_, port, err := net.SplitHostPort(n.Temporal)
	if err != nil {
		return fmt.Errorf("temporal address %q: want HOST:PORT: %w", n.Temporal, err)
	}
	cmd := exec.Command(n.Binary, "relay", "--listen", net.JoinHostPort(n.MgmtHost, port), "--to", n.Temporal)
	return n.detach(cmd, "relay", "relaying")
}

// detach starts cmd in its own session with its output in Dir/NAME.log and
// its pid in RunDir/NAME.pid, and waits until the log says ready.
func (n *RefNode) detach(cmd *exec.Cmd, name, ready string) error {
	logPath := filepath.Join(n.Dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(n.RunDir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), ready) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited: %s", name, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(logPath)
	return fmt.Errorf("%s did not start within 10s: %s", name, b)
}

// killPidFile ends the session whose leader's pid is in RunDir/NAME.pid.
func (n *RefNode) killPidFile(name string) {
	p := filepath.Join(n.RunDir, name+".pid")
	if b, err := os.ReadFile(p); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(p)
	}
}

// Down removes the node: its containers, its engine, the listeners, the
// relay, the namespaces and ufw's files under /etc/netns. Dir stays for
// inspection (the engine's data root in it included); the caller removes it.
// It is safe on a node that is half up or already down.
func (n *RefNode) Down() error {
	if n.RunDir == "" || !config.ValidName(n.Name) {
		return fmt.Errorf("sandbox name %q invalid", n.Name)
	}
	var errs []string
	n.killPidFile("relay")
	n.killPidFile("listeners")
	if err := n.engine().stop(); err != nil {
		errs = append(errs, err.Error())
	}
	for _, ns := range []string{n.Netns, n.Peer} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if err := runCmd(nil, "ip", "netns", "del", ns); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	// The management link's host end dies with the node's namespace,
	// unless a process left behind (an agent) still holds that namespace.
	if mg := ifname("vmh", n.Name); exec.Command("ip", "link", "show", mg).Run() == nil {
		// It may still go with the namespace between the look and the delete.
		if err := runCmd(nil, "ip", "link", "del", mg); err != nil && exec.Command("ip", "link", "show", mg).Run() == nil {
			errs = append(errs, err.Error())
		}
	}
	if err := os.RemoveAll(n.etcDir()); err != nil {
		errs = append(errs, err.Error())
	}
	if err := os.RemoveAll(n.RunDir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox %s down: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}

// WriteConfig writes the configuration of the agent that runs on the node:
// it manages its own namespace (node.netns empty), dials Temporal over the
// management link and the node's engine through docker.host.
func (n *RefNode) WriteConfig(plan string) (string, error) {
	path := filepath.Join(n.ConfigDir, "config.yaml")
	var mgmt []string
	for _, p := range n.Allowed {
		if p.Num == 22 {
			mgmt = append(mgmt, `"22/tcp"`)
		}
	}
	body := fmt.Sprintf(`# reference node %s, written by adopt-sandbox: the agent runs on the node
temporal:
  address: %s
%sdocker:
  host: %s
node:
  name: %s
  role: %s
  netns: ""
  root: %s
  state_dir: %s
  management_ports: [%s]
predecessor:
  control: ["predecessor-sync"]
%s`, n.Name, n.TemporalAddr(), n.temporalLines(true), n.DockerHost(), n.Name, n.role(), n.Root, n.StateDir, strings.Join(mgmt, ", "), plan)
	body, err := withOperator(body, n.Fleet)
	if err != nil {
		return "", err
	}
	if body, err = withWitnessKey(body, ""); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(body), 0o600)
}
