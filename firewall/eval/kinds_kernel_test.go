package eval

import (
	"context"
	"strings"
	"testing"

	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
)

// Root tests of the kinds the product speaks and refuses, as the probe
// reads them: each firewall is loaded into a fresh node namespace, and a
// refused one must be named in Report.Unsupported (adoption refuses on it)
// with its table, chain and reason. For the ingress drops the kernel shows
// first that the drop is real: a served port is unreachable from the peer.

// nodeDevice is the node namespace's veth, the device an ingress hook
// binds to.
func nodeDevice(t *testing.T, n *fwtest.TestNet) string {
	t.Helper()
	out := fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show", "type", "veth")
	f := strings.Fields(out)
	if len(f) < 2 {
		t.Fatalf("no veth in namespace %s: %q", n.Node, out)
	}
	name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
	return name
}

func inspect(t *testing.T, n *fwtest.TestNet) Report {
	t.Helper()
	r, err := Inspector{Netns: n.Path(n.Node)}.Inspect(context.Background())
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return r
}

func wantRefused(t *testing.T, r Report, names ...string) {
	t.Helper()
	if r.Unsupported == "" {
		t.Fatalf("probe took the firewall as kind %q with %d open port(s); want it refused naming %v", r.Kind, len(r.Open), names)
	}
	for _, s := range append(names, "not supported", "nothing was changed") {
		if !strings.Contains(r.Unsupported, s) {
			t.Errorf("refusal %q does not name %q", r.Unsupported, s)
		}
	}
	t.Logf("refused: %s", r.Unsupported)
}

// dropsServedPort serves port on the node and checks the kernel drops it
// from the peer (IPv4 and IPv6, TCP).
func dropsServedPort(t *testing.T, n *fwtest.TestNet, port uint16) {
	t.Helper()
	n.Serve(t, []uint16{port})
	probes := []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4a, Port: port}, {Proto: "tcp", Src: fwtest.PeerV6a, Port: port}}
	for p, ok := range n.Reach(t, probes) {
		if ok {
			t.Fatalf("%v reached the node: the ingress drop does not drop, so the test proves nothing", p)
		}
	}
}

func TestKernelKindRefusesNetdevIngressDrop(t *testing.T) {
	n := fwtest.NewTestNet(t)
	dev := nodeDevice(t, n)
	n.Nft(t, `
table netdev edge {
	chain in {
		type filter hook ingress device "`+dev+`" priority 0; policy accept;
		tcp dport 9400 drop
	}
}`)
	dropsServedPort(t, n, 9400)
	wantRefused(t, inspect(t, n), "netdev edge", "chain in", "ingress")
}

func TestKernelKindRefusesInetIngressChain(t *testing.T) {
	n := fwtest.NewTestNet(t)
	dev := nodeDevice(t, n)
	n.Nft(t, `
table inet edge {
	chain early {
		type filter hook ingress device "`+dev+`" priority 0; policy accept;
		tcp dport 9401 drop
	}
	chain input {
		type filter hook input priority 0; policy accept;
	}
}`)
	dropsServedPort(t, n, 9401)
	wantRefused(t, inspect(t, n), "inet edge", "chain early", "ingress")
}

func TestKernelKindRefusesForeignManagers(t *testing.T) {
	for _, c := range []struct {
		name, tool, chain string
		iptables, nft     string
	}{
		{name: "shorewall", tool: "Shorewall", chain: "net2fw", iptables: `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:net2fw - [0:0]
:shorewall - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -j net2fw
-A net2fw -p tcp --dport 22 -j ACCEPT
COMMIT
`},
		{name: "csf", tool: "CSF", chain: "LOCALINPUT", iptables: `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:LOCALINPUT - [0:0]
:ALLOWIN - [0:0]
-A INPUT -j LOCALINPUT
-A INPUT -j ALLOWIN
-A ALLOWIN -p tcp --dport 22 -j ACCEPT
COMMIT
`},
		{name: "firewalld", tool: "firewalld", chain: "filter_INPUT", nft: `
table inet firewalld {
	chain filter_INPUT {
		type filter hook input priority filter + 10; policy accept;
		ct state established,related accept
		tcp dport 22 accept
		reject with icmpx admin-prohibited
	}
}`},
		{name: "nixos", tool: "NixOS", chain: "nixos-fw", nft: `
table inet nixos-fw {
	chain input-allow {
		tcp dport 22 accept
	}
	chain input {
		type filter hook input priority filter; policy drop;
		jump input-allow
	}
}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fwtest.NewTestNet(t)
			if c.iptables != "" {
				testenv.NeedTools(t, "iptables-nft-restore")
				fwtest.Run(t, c.iptables, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
			} else {
				n.Nft(t, c.nft)
			}
			wantRefused(t, inspect(t, n), c.tool, c.chain)
		})
	}
}

// The kinds the product speaks are still taken, with no refusal.
func TestKernelKindSpokenStillAdopt(t *testing.T) {
	for _, c := range []struct {
		name, want string
		load       func(t *testing.T, n *fwtest.TestNet)
	}{
		{"ufw", nft.KindIptablesNft, func(t *testing.T, n *fwtest.TestNet) {
			testenv.NeedTools(t, "ufw")
			n.Ufw(t, []string{"--force", "reset"}, []string{"default", "deny", "incoming"}, []string{"allow", "22/tcp"}, []string{"--force", "enable"})
		}},
		{"ufw-docker", nft.KindIptablesNft, func(t *testing.T, n *fwtest.TestNet) {
			// ufw's chains with Docker's and the ufw-docker arrangement
			// in DOCKER-USER, as a node running ufw-docker has them.
			testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
			fwtest.Run(t, fwtest.UfwDockerRules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
			fwtest.Run(t, fwtest.UfwDockerRules6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
		}},
		{"plain-iptables-nft", nft.KindIptablesNft, func(t *testing.T, n *fwtest.TestNet) {
			testenv.NeedTools(t, "iptables-nft-restore")
			fwtest.Run(t, "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n", "ip", "netns", "exec", n.Node, "iptables-nft-restore")
		}},
		{"native", nft.KindNftables, func(t *testing.T, n *fwtest.TestNet) {
			n.Nft(t, "table inet host {\n chain input {\n  type filter hook input priority 0; policy drop;\n  tcp dport 22 accept\n }\n}")
		}},
		{"none", nft.KindNone, func(t *testing.T, n *fwtest.TestNet) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fwtest.NewTestNet(t)
			c.load(t, n)
			r := inspect(t, n)
			if r.Unsupported != "" || r.Kind != c.want {
				t.Fatalf("kind %q, refused %q; want %q and no refusal", r.Kind, r.Unsupported, c.want)
			}
		})
	}
}
