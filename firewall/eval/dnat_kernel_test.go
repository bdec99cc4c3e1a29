package eval

import (
	"encoding/json"
	"os"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
)

// Root tests of the evaluator through DNAT: the node namespace gets a
// container bridge docker0 and a "container" namespace behind it (a veth
// enslaved to the bridge), a nat table that DNATs published host ports to
// the container, and a filter table deciding what is forwarded. Clients
// in the peer namespace connect to the node's own address on the host
// port; the kernel decides, and OpenPortsOn must say the same. No Docker
// is needed: the rules are the ones Docker and the ufw-docker arrangement
// write (the full node with its own dockerd is the reference node's).

func TestKernelDNATUfwDocker(t *testing.T) {
	n := fwtest.NewNamedNet(t, "dn-", "dn", "0a")
	fwtest.RequireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "sysctl")
	ctr := n.Container(t)
	fwtest.Run(t, fwtest.UfwDockerRules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, fwtest.UfwDockerRules6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	// The services listen in the container on their container ports; the
	// node itself listens on 22 and on the host ports (a client that got
	// through to a host port without the DNAT would be answered too).
	fwtest.ServeIn(t, ctr, []uint16{8080, 8081, 8082, 8083, 8053, 9100})
	n.Serve(t, []uint16{22, 18080, 18081, 18082, 18083, 18053, 19100})
	ports := []uint16{22, 18080, 18081, 18082, 18083, 18053, 19100, 8080}
	open, node, rs := fwtest.DnatOracle(n, t, OpenPortsOn, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a}, []string{"tcp", "udp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18081, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, From: "198.18.0.3/32", Via: "172.17.0.2:8081"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18083, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8083"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18053, Proto: "udp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8053"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8080"})
	if node.Forwarding[firewall.FamilyIP] != true || node.Forwarding[firewall.FamilyIP6] != true {
		t.Errorf("forwarding read as %v, want on for both", node.Forwarding)
	}
	if os.Getenv("FW_SAVE_FIXTURES") != "" {
		saveFixture(t, "ufw-docker", rs, node)
	}

	// The same node not forwarding: nothing published is reachable, and
	// the evaluator, reading ip_forward, says so.
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
	open, _, _ = fwtest.DnatOracle(n, t, OpenPortsOn, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a}, []string{"tcp"})
	for _, o := range open {
		if o.Direction == firewall.HookForward {
			t.Errorf("forward opening %+v on a node that does not forward", o)
		}
	}
}

func TestKernelDNATNative(t *testing.T) {
	n := fwtest.NewNamedNet(t, "dn-", "dn", "0b")
	fwtest.RequireTools(t, "sysctl")
	ctr := n.Container(t)
	n.Nft(t, `
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
	fwtest.ServeIn(t, ctr, []uint16{8080, 8090, 18091})
	n.Serve(t, []uint16{22, 18080, 18081, 18082, 18090, 18091})
	open, _, _ := fwtest.DnatOracle(n, t, OpenPortsOn, []uint16{22, 18080, 18081, 18082, 18090, 18091}, []string{fwtest.PeerV4a, fwtest.PeerV6a}, []string{"tcp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18081, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Via: ":22"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18082, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8080"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18091, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:18091"})
}

// saveFixture writes the listed ruleset and the node's interfaces as the
// unit tests' testdata (FW_SAVE_FIXTURES=1).
func saveFixture(t *testing.T, name string, rs *firewall.Ruleset, node firewall.Node) {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Ruleset *firewall.Ruleset `json:"ruleset"`
		Node    firewall.Node     `json:"node"`
	}{rs, node}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fwtest.FixturePath(name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
