package sandbox

// This file holds the reference node's firewall: the real ufw, run in the
// node's namespace with its own /etc/ufw and /etc/default/ufw (`ip netns
// exec` bind-mounts /etc/netns/NODE/* over /etc, so the host's ufw files are
// never read or written), with the ufw-docker arrangement that ufw hosts
// running Docker use so that ufw's routed rules decide what reaches a
// container: DOCKER-USER hands forwarded traffic to ufw-user-forward,
// returns replies and private sources, and drops new connections to the
// private ranges (the containers' networks) otherwise.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// UFWDocker is the block ufw-docker appends to /etc/ufw/after.rules
// (github.com/chaifeng/ufw-docker, its current form).
const UFWDocker = `
# BEGIN UFW AND DOCKER
*filter
:ufw-user-forward - [0:0]
:ufw-docker-logging-deny - [0:0]
:DOCKER-USER - [0:0]
-A DOCKER-USER -j ufw-user-forward

-A DOCKER-USER -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN
-A DOCKER-USER -m conntrack --ctstate INVALID -j DROP
-A DOCKER-USER -i docker0 -o docker0 -j ACCEPT

-A DOCKER-USER -j RETURN -s 10.0.0.0/8
-A DOCKER-USER -j RETURN -s 172.16.0.0/12
-A DOCKER-USER -j RETURN -s 192.168.0.0/16

-A DOCKER-USER -j ufw-docker-logging-deny -m conntrack --ctstate NEW -d 10.0.0.0/8
-A DOCKER-USER -j ufw-docker-logging-deny -m conntrack --ctstate NEW -d 172.16.0.0/12
-A DOCKER-USER -j ufw-docker-logging-deny -m conntrack --ctstate NEW -d 192.168.0.0/16

-A DOCKER-USER -j RETURN

-A ufw-docker-logging-deny -j DROP

COMMIT
# END UFW AND DOCKER
`

// ufwTemplates is where Debian's ufw package keeps its pristine rules:
// the node starts from them, not from whatever the host's /etc/ufw holds.
const ufwTemplates = "/usr/share/ufw/iptables"

func (n *RefNode) etcDir() string { return filepath.Join("/etc/netns", n.Netns) }

// ufwCmd runs the real ufw in the node's namespace, on the node's files.
func (n *RefNode) ufwCmd(args ...string) error {
	return runCmd(nil, append([]string{"ip", "netns", "exec", n.Netns, "ufw"}, args...)...)
}

// ufw lays out the node's /etc/ufw from the package's templates with the
// ufw-docker block, sets ufw's defaults (deny incoming, allow outgoing,
// deny routed), allows the host services and enables it. Run after the
// engine started, as on a node where Docker came first.
func (n *RefNode) ufw() error {
	if _, err := exec.LookPath("ufw"); err != nil {
		return fmt.Errorf("the reference node's firewall is ufw's: ufw not found (apt-get install ufw): %w", err)
	}
	etc := n.etcDir()
	if err := os.RemoveAll(etc); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(etc, "default"), 0o755); err != nil {
		return err
	}
	if err := runCmd(nil, "cp", "-a", "/etc/ufw", filepath.Join(etc, "ufw")); err != nil {
		return fmt.Errorf("copy ufw's configuration: %w", err)
	}
	for _, f := range []string{"before.rules", "before6.rules", "after.rules", "after6.rules", "user.rules", "user6.rules"} {
		b, err := os.ReadFile(filepath.Join(ufwTemplates, f))
		if err != nil {
			return fmt.Errorf("ufw's template %s: %w", f, err)
		}
		if f == "after.rules" {
			b = append(b, UFWDocker...)
		}
		if err := os.WriteFile(filepath.Join(etc, "ufw", f), b, 0o640); err != nil {
			return err
		}
	}
	conf := "ENABLED=no\nLOGLEVEL=off\n"
	if err := os.WriteFile(filepath.Join(etc, "ufw", "ufw.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	def := `IPV6=yes
DEFAULT_INPUT_POLICY="DROP"
DEFAULT_OUTPUT_POLICY="ACCEPT"
DEFAULT_FORWARD_POLICY="DROP"
DEFAULT_APPLICATION_POLICY="SKIP"
MANAGE_BUILTINS=no
IPT_SYSCTL=/etc/ufw/sysctl.conf
IPT_MODULES=""
`
	if err := os.WriteFile(filepath.Join(etc, "default", "ufw"), []byte(def), 0o644); err != nil {
		return err
	}
	// While disabled, each command only writes the node's rules files;
	// enable loads them once.
	for _, p := range n.Allowed {
		if err := n.ufwCmd("allow", strconv.Itoa(int(p.Num))+"/"+p.Proto); err != nil {
			return err
		}
	}
	if err := n.ufwCmd("--force", "enable"); err != nil {
		return fmt.Errorf("enable ufw in %s: %w", n.Netns, err)
	}
	return nil
}
