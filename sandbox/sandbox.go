// Package sandbox builds a throwaway node for the demo and the end-to-end
// tests: a network namespace with a predecessor-style default-deny firewall
// (iptables-nft, laid out as ufw lays it out), listeners on the ports it
// serves, a peer namespace to send real traffic from, and a files root with
// the files a predecessor's configuration sync writes. It never touches the
// host's own firewall: everything lives in namespaces it creates.
package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"adoption/config"
	"adoption/internal/ufwfixture"
)

// Spec describes a sandbox node.
type Spec struct {
	Name    string        // node name; the namespace is adopt-<name>, its peer adopt-<name>-peer
	Role    string        // control or member (default)
	Index   int           // 1-250: picks the veth subnet 198.19.<index>.0/30 (RFC 2544 benchmark range)
	Dir     string        // where the files root, state_dir, config and pid files live
	Allowed []config.Port // ports the found firewall allows (and a listener serves)
	Closed  []config.Port // ports a listener serves but the firewall does not allow
	// AllowedOnly are allowed by the firewall with no listener in the
	// namespace (a container on the host serves them).
	AllowedOnly []config.Port
	Files       map[string]string
	// Sandbox binary used to serve the listeners inside the namespace.
	Binary string
	// CodecKeyFile, when set, is written as temporal.codec_key_file.
	CodecKeyFile string
	// Fleet, when set, is written as authority.fleet: the fleet whose
	// workflow may read the node's plan.
	Fleet string
	// Namespace is temporal.namespace; empty, default.
	Namespace string
	// TLS, when its CA is set, is written as temporal.tls: a real
	// cluster's mTLS (make cluster) instead of the dev server's plain text.
	TLS config.TLS
}

// temporalLines are the temporal section's lines after its address: the
// namespace, the TLS settings (plain text said explicitly when plain is
// set and no TLS is), the codec key file.
func (s Spec) temporalLines(plain bool) string {
	ns := s.Namespace
	if ns == "" {
		ns = "default"
	}
	out := fmt.Sprintf("  namespace: %s\n", ns)
	switch {
	case s.TLS.CA != "":
		out += fmt.Sprintf("  tls: {ca: %q, cert: %q, key: %q, server_name: %q}\n", s.TLS.CA, s.TLS.Cert, s.TLS.Key, s.TLS.ServerName)
	case plain:
		out += "  tls: off # the dev server through the management link's relay: plain text, said explicitly\n"
	}
	return out + s.codecKeyLine()
}

// codecKeyLine is the temporal.codec_key_file line of a written
// configuration, or nothing.
func (s Spec) codecKeyLine() string {
	if s.CodecKeyFile == "" {
		return ""
	}
	return fmt.Sprintf("  codec_key_file: %q\n", s.CodecKeyFile)
}

// Node is a sandbox that is up.
type Node struct {
	Spec
	Netns     string // name, as in `ip netns`
	Peer      string
	Addr      string // the node's address, reachable from the peer
	PeerAddr  string
	Root      string
	StateDir  string
	ConfigDir string
}

// NetnsPath is the namespace's path for node.netns.
func (n *Node) NetnsPath() string { return "/run/netns/" + n.Netns }

// New names a sandbox's parts without creating anything.
func New(s Spec) *Node {
	if abs, err := filepath.Abs(s.Dir); err == nil {
		s.Dir = abs // the config needs absolute paths
	}
	return &Node{
		Spec:      s,
		Netns:     "adopt-" + s.Name,
		Peer:      "adopt-" + s.Name + "-peer",
		Addr:      fmt.Sprintf("198.19.%d.1", s.Index),
		PeerAddr:  fmt.Sprintf("198.19.%d.2", s.Index),
		Root:      filepath.Join(s.Dir, "root"),
		StateDir:  filepath.Join(s.Dir, "state"),
		ConfigDir: s.Dir,
	}
}

// Up creates the namespaces, the firewall, the listeners and the files.
// It first removes what a previous sandbox of the same name left.
func (n *Node) Up() error {
	if !config.ValidName(n.Name) || n.Index < 1 || n.Index > 250 {
		return fmt.Errorf("sandbox name %q or index %d invalid", n.Name, n.Index)
	}
	_ = n.Down()
	veth, peerVeth := "vad"+n.Name, "vap"+n.Name
	if len(veth) > 15 {
		veth, peerVeth = veth[:15], peerVeth[:15]
	}
	steps := [][]string{
		{"ip", "netns", "add", n.Netns},
		{"ip", "netns", "add", n.Peer},
		{"ip", "link", "add", veth, "netns", n.Netns, "type", "veth", "peer", "name", peerVeth, "netns", n.Peer},
		{"ip", "-n", n.Netns, "addr", "add", n.Addr + "/30", "dev", veth},
		{"ip", "-n", n.Peer, "addr", "add", n.PeerAddr + "/30", "dev", peerVeth},
		{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
		{"ip", "-n", n.Peer, "link", "set", "lo", "up"},
		{"ip", "-n", n.Netns, "link", "set", veth, "up"},
		{"ip", "-n", n.Peer, "link", "set", peerVeth, "up"},
	}
	for _, s := range steps {
		if err := runCmd(nil, s...); err != nil {
			return err
		}
	}
	for _, fam := range []string{"iptables-restore", "ip6tables-restore"} {
		if err := runCmd([]byte(ufwfixture.DefaultDeny(append(append([]config.Port{}, n.Allowed...), n.AllowedOnly...))), "ip", "netns", "exec", n.Netns, fam); err != nil {
			return fmt.Errorf("load the predecessor firewall: %w", err)
		}
	}
	if err := n.writeFiles(); err != nil {
		return err
	}
	return n.startListeners()
}

func (n *Node) writeFiles() error {
	if err := DebianBoot(n.Root); err != nil {
		return err
	}
	for p, content := range n.Files {
		full := filepath.Join(n.Root, filepath.Clean("/"+p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o640); err != nil {
			return err
		}
	}
	return nil
}

// DebianBoot lays out under root what a Debian node's boot loads its
// firewall with: nftables.service installed and enabled (the link
// `systemctl enable nftables` writes), so a commit finds the mesh's table
// will load at boot.
func DebianBoot(root string) error {
	unit := filepath.Join(root, "lib/systemd/system/nftables.service")
	if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(unit, []byte(debianNftablesUnit), 0o644); err != nil {
		return err
	}
	link := filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/lib/systemd/system/nftables.service", link); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}

// debianNftablesUnit is Debian 12's nftables.service.
const debianNftablesUnit = `[Unit]
Description=nftables
Documentation=man:nft(8) http://wiki.nftables.org
Wants=network-pre.target
Before=network-pre.target shutdown.target
Conflicts=shutdown.target
DefaultDependencies=no

[Service]
Type=oneshot
RemainAfterExit=yes
StandardInput=null
ProtectSystem=full
ProtectHome=true
ExecStart=/usr/sbin/nft -f /etc/nftables.conf
ExecReload=/usr/sbin/nft -f /etc/nftables.conf
ExecStop=/usr/sbin/nft flush ruleset

[Install]
WantedBy=sysinit.target
`

func (n *Node) pidFile() string { return filepath.Join(n.Dir, "listeners.pid") }

// startListeners runs `adopt-sandbox serve` inside the namespace, detached,
// so the listeners outlive the command that raised the sandbox.
func (n *Node) startListeners() error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	args := []string{"netns", "exec", n.Netns, n.Binary, "serve", "--name", n.Name}
	for _, p := range append(append([]config.Port{}, n.Allowed...), n.Closed...) {
		args = append(args, p.String())
	}
	logf, err := os.Create(filepath.Join(n.Dir, "listeners.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start listeners: %w", err)
	}
	if err := os.WriteFile(n.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped if the caller lives on
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(n.Dir, "listeners.log"))
		if bytes.Contains(b, []byte("serving")) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(n.Dir, "listeners.log"))
	return fmt.Errorf("listeners did not start: %s", b)
}

// Down stops the listeners and deletes the namespaces. Files stay for
// inspection; the caller removes Dir when it wants.
func (n *Node) Down() error {
	if b, err := os.ReadFile(n.pidFile()); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(n.pidFile())
	}
	var firstErr error
	for _, ns := range []string{n.Netns, n.Peer} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if err := runCmd(nil, "ip", "netns", "del", ns); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// WriteConfig writes the node's configuration for the worker and the CLI.
func (n *Node) WriteConfig(temporalAddr string, modules string) (string, error) {
	path := filepath.Join(n.ConfigDir, "config.yaml")
	var mgmt []string
	for _, p := range n.Allowed {
		if p.Num == 22 {
			mgmt = append(mgmt, `"22/tcp"`)
		}
	}
	body := fmt.Sprintf(`# sandbox node %s, written by adopt-sandbox
temporal:
  address: %s
%snode:
  name: %s
  role: %s
  netns: %s
  root: %s
  state_dir: %s
  management_ports: [%s]
predecessor:
  control: ["predecessor-sync"]
%s`, n.Name, temporalAddr, n.temporalLines(false), n.Name, n.role(), n.NetnsPath(), n.Root, n.StateDir, strings.Join(mgmt, ", "), modules)
	body, err := n.withWitness(body)
	if err != nil {
		return "", err
	}
	body, err = withOperator(body, n.Fleet)
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(body), 0o600)
}

// withWitness confirms the node's flips from its peer namespace, where its
// clients are: the orchestrator, in the host's namespace, has no route to
// the node. The node takes the witness's verdicts signed by the run's
// witness key (WitnessKey).
func (n *Node) withWitness(body string) (string, error) {
	return withWitnessKey(body, fmt.Sprintf("address: %q, netns: %q, ", n.Addr, "/run/netns/"+n.Peer))
}

// withWitnessKey writes flip.witness into a configuration's body: the
// settings given (where the witness dials from) and the run's witness key,
// whose verdicts the node takes.
func withWitnessKey(body, settings string) (string, error) {
	k, err := WitnessKey()
	if err != nil {
		return "", err
	}
	w := fmt.Sprintf("  witness: {%skey: %q}\n", settings, k.Public)
	if i := strings.Index(body, "\nflip:\n"); i >= 0 {
		at := i + len("\nflip:\n")
		return body[:at] + w + body[at:], nil
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + "flip:\n" + w, nil
}

func (n *Node) role() string {
	if n.Role == "" {
		return "member"
	}
	return n.Role
}

func runCmd(stdin []byte, args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
