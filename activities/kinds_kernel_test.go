package activities

import (
	"context"
	"strings"
	"testing"

	"adoption/config"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
)

// Adoption itself refuses a firewall the product does not speak, as the
// agent reads it from a fresh node namespace: the refusal names the table,
// the chain and the reason, and the node is not marked adopted. The drops
// themselves are shown real by firewall/eval's kind kernel tests.
func TestKernelAdoptRefusesUnspokenFirewall(t *testing.T) {
	testenv.NeedRoot(t, "network namespaces")
	for _, c := range []struct {
		name  string
		rules func(dev string) string
		want  []string
	}{
		{"netdev-ingress-drop", func(dev string) string {
			return "table netdev edge {\n chain in {\n  type filter hook ingress device \"" + dev + "\" priority 0; policy accept;\n  tcp dport 9400 drop\n }\n}"
		}, []string{"table netdev edge, chain in hooked at ingress", "would read as an open port"}},
		{"inet-ingress-chain", func(dev string) string {
			return "table inet edge {\n chain early {\n  type filter hook ingress device \"" + dev + "\" priority 0; policy accept;\n  udp dport 53 drop\n }\n chain input {\n  type filter hook input priority 0; policy accept;\n }\n}"
		}, []string{"table inet edge, chain early hooked at ingress", "drops"}},
		{"netdev-egress-drop", func(dev string) string {
			return "table netdev edge {\n chain out {\n  type filter hook egress device \"" + dev + "\" priority 0; policy accept;\n  tcp sport 22 drop\n }\n}"
		}, []string{"table netdev edge, chain out hooked at egress", "drops"}},
		{"arp-drop", func(string) string {
			return "table arp guard {\n chain in {\n  type filter hook input priority 0; policy accept;\n  arp operation request drop\n }\n}"
		}, []string{"table arp guard, chain in hooked at input", "drops", "ARP"}},
		{"foreign-manager", func(string) string {
			return "table inet firewalld {\n chain filter_INPUT {\n  type filter hook input priority filter + 10; policy accept;\n  tcp dport 22 accept\n }\n}"
		}, []string{"chain filter_INPUT, written by firewalld", "rewrites its rules on every reload"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fwtest.NewTestNet(t)
			out := fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show", "type", "veth")
			f := strings.Fields(out)
			if len(f) < 2 {
				t.Fatalf("no veth in namespace %s: %q", n.Node, out)
			}
			dev, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			n.Nft(t, c.rules(dev))
			a, _ := newActs(t)
			a.Firewall = eval.Inspector{Netns: n.Path(n.Node)}
			plan := withPlan(a, config.Plan{Node: "n1"})
			_, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
			msg := appErr(t, err, ErrUnsupportedFW)
			for _, w := range append(c.want, "not supported", "nothing was changed") {
				if !strings.Contains(msg, w) {
					t.Errorf("adoption refusal %q lacks %q", msg, w)
				}
			}
			if _, adopted, _ := a.State.Adopted(); adopted {
				t.Error("a refused adoption marked the node adopted")
			}
		})
	}
}

// The kinds the product speaks are still adopted, as the agent reads them.
func TestKernelAdoptSpokenFirewall(t *testing.T) {
	testenv.NeedRoot(t, "network namespaces")
	for _, c := range []struct {
		name, kind string
		load       func(t *testing.T, n *fwtest.TestNet)
	}{
		{"ufw", "iptables-nft", fwtest.RestoreUfw},
		{"ufw-docker", "iptables-nft", func(t *testing.T, n *fwtest.TestNet) {
			testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
			fwtest.Run(t, fwtest.UfwDockerRules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
			fwtest.Run(t, fwtest.UfwDockerRules6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
		}},
		{"plain-iptables-nft", "iptables-nft", func(t *testing.T, n *fwtest.TestNet) {
			testenv.NeedTools(t, "iptables-nft-restore")
			fwtest.Run(t, "*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n", "ip", "netns", "exec", n.Node, "iptables-nft-restore")
		}},
		{"native", "nftables", func(t *testing.T, n *fwtest.TestNet) {
			n.Nft(t, "table inet host {\n chain input {\n  type filter hook input priority 0; policy drop;\n  tcp dport 22 accept\n }\n}")
		}},
		{"none", "none", func(*testing.T, *fwtest.TestNet) {}},
		{"native-with-passthrough", "nftables", func(t *testing.T, n *fwtest.TestNet) {
			// Tables the evaluator does not run that only count, log or
			// accept: nothing there decides a packet's fate.
			n.Nft(t, "table inet host {\n chain input {\n  type filter hook input priority 0; policy drop;\n  tcp dport 22 accept\n }\n}\n"+
				"table bridge count {\n chain in {\n  type filter hook input priority 0; policy accept;\n  tcp dport 22 counter\n  ip saddr 172.17.0.0/16 accept\n }\n}\n"+
				"table arp count {\n chain in {\n  type filter hook input priority 0; policy accept;\n  counter\n }\n}")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fwtest.NewTestNet(t)
			c.load(t, n)
			a, _ := newActs(t)
			a.Firewall = eval.Inspector{Netns: n.Path(n.Node)}
			plan := withPlan(a, config.Plan{Node: "n1"})
			res, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
			if err != nil {
				t.Fatalf("adopt: %v", err)
			}
			if res.Firewall != c.kind {
				t.Errorf("adopted as kind %q, want %q", res.Firewall, c.kind)
			}
		})
	}
}

// A bridge table that drops container to node ssh: the kernel shows the
// drop is real (the container reaches the node's port 22 before it is
// loaded, not after), and the probe and adoption both refuse, naming the
// table, its family, the chain, the hook and the rule, and change nothing.
func TestKernelAdoptRefusesBridgeDrop(t *testing.T) {
	testenv.NeedRoot(t, "network namespaces")
	n := fwtest.NewTestNet(t)
	ctr := n.Container(t)
	n.Serve(t, []uint16{22})
	ssh := []fwtest.Packet{
		{Class: "container to node ssh", Peer: ctr, Proto: "tcp", Src: fwtest.ContainerV4, Dst: "172.17.0.1", Port: 22},
		{Class: "container to node ssh", Peer: ctr, Proto: "tcp", Src: fwtest.ContainerV6, Dst: "fd00:17::1", Port: 22},
	}
	for p, ok := range fwtest.ReachFrom(t, ssh) {
		if !ok {
			t.Fatalf("%v did not get through with no firewall: the test would prove nothing", p)
		}
	}
	n.Nft(t, "table bridge guard {\n chain in {\n  type filter hook input priority 0; policy accept;\n  tcp dport 22 drop\n }\n}")
	for p, ok := range fwtest.ReachFrom(t, ssh) {
		if ok {
			t.Fatalf("%v got through the bridge table's drop: the test would prove nothing", p)
		}
	}
	before := n.Listing(t)
	want := []string{"table bridge guard, chain in hooked at input", "drops", "a bridge table", "not supported", "nothing was changed"}

	r, err := eval.Inspector{Netns: n.Path(n.Node)}.Inspect(context.Background())
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(r.Unsupported, w) {
			t.Errorf("probe refusal %q lacks %q", r.Unsupported, w)
		}
	}
	a, _ := newActs(t)
	a.Firewall = eval.Inspector{Netns: n.Path(n.Node)}
	plan := withPlan(a, config.Plan{Node: "n1"})
	_, err = a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
	msg := appErr(t, err, ErrUnsupportedFW)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("adoption refusal %q lacks %q", msg, w)
		}
	}
	t.Logf("refused: %s", msg)
	if _, adopted, _ := a.State.Adopted(); adopted {
		t.Error("a refused adoption marked the node adopted")
	}
	if after := n.Listing(t); after != before {
		t.Errorf("the refused adoption changed the ruleset:\n%s", fwtest.Diff(before, after))
	}
}
