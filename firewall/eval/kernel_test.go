package eval

import (
	"net/netip"
	"os"
	"testing"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
)

// The kernel is the oracle here: rulesets are loaded into a fresh network
// namespace ("node"), real connections come from a peer namespace over a veth
// pair, and what got through is compared with OpenPorts. Addresses are from
// 198.18.0.0/15 (RFC 2544 benchmarking) and fd00::/8 (ULA) and never leave the
// two namespaces this test creates. The host's own firewall is not touched.

// predicted says whether OpenPorts reports the probe's port open at input for
// its source, and whether that is uncertain.
func predicted(open []firewall.Opening, p fwtest.Probe) (reach, uncertain bool) {
	src := netip.MustParseAddr(p.Src)
	for _, o := range open {
		if o.Direction != firewall.HookInput || o.Proto != p.Proto || o.Family != p.Family() {
			continue
		}
		end := o.Port
		if o.PortEnd != 0 {
			end = o.PortEnd
		}
		if p.Port < o.Port || p.Port > end {
			continue
		}
		if o.From != "" && !netip.MustParsePrefix(o.From).Contains(src) {
			continue
		}
		if !o.Uncertain {
			return true, false
		}
		reach, uncertain = true, true
	}
	return reach, uncertain
}

// oracle lists the node's ruleset, evaluates it, probes the kernel with
// every (proto, source, port) combination and fails on any disagreement.
// Ports the evaluator calls uncertain are probed but not compared; want
// lists ports that must be predicted uncertain.
func oracle(n *fwtest.TestNet, t *testing.T, ports []uint16, srcs []string, protos []string, wantUncertain ...fwtest.Probe) []firewall.Opening {
	t.Helper()
	rs := n.List(t)
	open := OpenPorts(rs)
	for _, o := range open {
		if o.Direction == firewall.HookInput {
			t.Logf("open: %+v", o)
		}
	}
	var probes []fwtest.Probe
	for _, proto := range protos {
		for _, s := range srcs {
			for _, p := range ports {
				probes = append(probes, fwtest.Probe{Proto: proto, Src: s, Port: p})
			}
		}
	}
	got := n.Reach(t, probes)
	for _, p := range probes {
		want, unc := predicted(open, p)
		isWantUnc := false
		for _, w := range wantUncertain {
			if w == p {
				isWantUnc = true
			}
		}
		if isWantUnc != unc {
			t.Errorf("%v: predicted uncertain=%v, want %v", p, unc, isWantUnc)
		}
		if unc {
			t.Logf("%v: uncertain, kernel says reach=%v", p, got[p])
			continue
		}
		if want != got[p] {
			t.Errorf("%v: predicted reach=%v, kernel says %v", p, want, got[p])
		}
	}
	return open
}

func TestKernelNativeInetSetsAndRanges(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet host {
	set tcp_open { type inet_service; elements = { 22, 443 } }
	set udp_open { type inet_service; flags interval; elements = { 5000-5010, 6000 } }
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		ct state invalid drop
		iifname "lo" accept
		meta l4proto { icmp, ipv6-icmp } accept
		tcp dport @tcp_open accept
		udp dport @udp_open accept
		tcp dport 8000-8010 accept
		meta nfproto ipv4 tcp dport 9000 accept
		tcp dport { 7000, 7100-7102 } accept
		tcp dport 7001 accept
	}
}`)
	ports := fwtest.RandomPorts([]uint16{22, 443, 5000, 5005, 5010, 5011, 6000, 7000, 7001, 7100, 7102, 7103, 8000, 8005, 8010, 8011, 9000, 9001}, 6)
	n.Serve(t, ports)
	open := oracle(n, t, ports, fwtest.BothFamilies, []string{"tcp", "udp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 8000, PortEnd: 8010, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 5000, PortEnd: 5010, Proto: "udp", Direction: firewall.HookInput, Family: firewall.FamilyIP6})
}

func TestKernelJumpReturn(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table ip t {
	chain services {
		tcp dport 8080 return
		tcp dport 8000-8100 accept
		udp dport 53 accept
	}
	chain screen {
		tcp dport 2000 drop
		return
		tcp dport 2001 accept
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		jump screen
		tcp dport 2000-2002 accept
		jump services
		tcp dport 8080 accept
		goto last
		tcp dport 3000 accept
	}
	chain last {
		tcp dport 4000 accept
	}
}`)
	ports := fwtest.RandomPorts([]uint16{53, 2000, 2001, 2002, 3000, 4000, 8000, 8080, 8081, 8100, 8101}, 4)
	n.Serve(t, ports)
	oracle(n, t, ports, []string{fwtest.PeerV4a}, []string{"tcp", "udp"})
}

func TestKernelTwoBaseChainsEarlierDropIsFinal(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet late {
	chain input {
		type filter hook input priority 10; policy drop;
		ct state established,related accept
		tcp dport { 22, 80, 443 } accept
	}
}
table inet early {
	chain input {
		type filter hook input priority -10; policy accept;
		tcp dport 80 drop
		tcp dport 22 accept
	}
}
table inet same {
	chain input {
		type filter hook input priority 10; policy accept;
		tcp dport 443 reject with tcp reset
	}
}`)
	ports := fwtest.RandomPorts([]uint16{22, 80, 443}, 4)
	n.Serve(t, ports)
	open := oracle(n, t, ports, fwtest.BothFamilies, []string{"tcp"})
	for _, o := range open {
		if o.Direction == firewall.HookInput && o.Proto == "tcp" && o.Port != 22 {
			t.Errorf("unexpected opening %+v", o)
		}
	}
}

func TestKernelSourceRestricted(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet host {
	set admins6 { type ipv6_addr; flags interval; elements = { fd00:f0::3/128 } }
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		ip saddr 198.18.0.3 tcp dport 7000 accept
		ip6 saddr @admins6 tcp dport 7000 accept
		ip saddr 198.18.0.0/24 ip saddr != 198.18.0.2 udp dport 7001 accept
		tcp dport 80 accept
	}
}`)
	ports := fwtest.RandomPorts([]uint16{80, 7000, 7001}, 3)
	n.Serve(t, ports)
	open := oracle(n, t, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b}, []string{"tcp", "udp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 7000, Proto: "tcp", Direction: firewall.HookInput, From: "198.18.0.3/32", Family: firewall.FamilyIP})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 7000, Proto: "tcp", Direction: firewall.HookInput, From: "fd00:f0::3/128", Family: firewall.FamilyIP6})
}

func TestKernelIptablesNft(t *testing.T) {
	n := fwtest.NewTestNet(t)
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	rules := `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:svc - [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -m addrtype --dst-type MULTICAST -j DROP
-A INPUT -p tcp -m multiport --dports 9100,9200:9202 -j ACCEPT
-A INPUT -m limit --limit 3/min -j LOG --log-prefix "x "
-A INPUT -j svc
-A svc -p tcp --dport 22 -m comment --comment "ssh" -j ACCEPT
-A svc -p udp --dport 1194 -j ACCEPT
-A svc -p tcp --dport 25 -j REJECT
COMMIT
`
	fwtest.Run(t, rules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, rules, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	ports := fwtest.RandomPorts([]uint16{22, 25, 1194, 9100, 9101, 9200, 9202, 9203}, 4)
	n.Serve(t, ports)
	rs := n.List(t)
	if k, err := nft.Kind(rs, nil); err != nil || k != nft.KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, nft.KindIptablesNft)
	}
	oracle(n, t, ports, fwtest.BothFamilies, []string{"tcp", "udp"})
}

func TestKernelUfw(t *testing.T) {
	n := fwtest.NewTestNet(t)
	testenv.NeedTools(t, "ufw")
	// Start from ufw's shipped defaults whatever the host's copy says.
	n.Ufw(t,
		[]string{"--force", "reset"},
		[]string{"default", "deny", "incoming"},
		[]string{"default", "deny", "routed"},
		[]string{"allow", "22/tcp"},
		[]string{"allow", "8000:8010/tcp"},
		[]string{"allow", "60000:60010/udp"},
		[]string{"allow", "from", fwtest.PeerV4b, "to", "any", "port", "7000", "proto", "tcp"},
		[]string{"allow", "from", fwtest.PeerV6b, "to", "any", "port", "7000", "proto", "tcp"},
		[]string{"limit", "2222/tcp"},
		[]string{"deny", "9000/tcp"},
		[]string{"route", "allow", "proto", "tcp", "to", "any", "port", "8443"},
		[]string{"--force", "enable"},
	)
	if os.Getenv("FW_UFW_SAVE") != "" {
		os.WriteFile("/tmp/ufw4.rules", []byte(fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-save")), 0o644)
		os.WriteFile("/tmp/ufw6.rules", []byte(fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ip6tables-save")), 0o644)
	}
	rs := n.List(t)
	if k, err := nft.Kind(rs, nil); err != nil || k != nft.KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, nft.KindIptablesNft)
	}
	ports := fwtest.RandomPorts([]uint16{22, 2222, 7000, 8000, 8010, 8011, 9000, 60000, 60010, 60011}, 6)
	n.Serve(t, ports)
	var unc []fwtest.Probe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		unc = append(unc, fwtest.Probe{Proto: "tcp", Src: s, Port: 2222})
	}
	open := oracle(n, t, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b}, []string{"tcp", "udp"}, unc...)
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 7000, Proto: "tcp", Direction: firewall.HookInput, From: fwtest.PeerV4b + "/32", Family: firewall.FamilyIP})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 8443, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6})
}

func TestKernelVerdictMapAndNamedIntervalSets(t *testing.T) {
	n := fwtest.NewTestNet(t)
	n.Nft(t, `
table inet host {
	set nets4 { type ipv4_addr; flags interval; elements = { 198.18.0.2/32, 10.0.0.0/8 } }
	chain svc {
		tcp dport 3000 accept
	}
	chain input {
		type filter hook input priority 0; policy drop;
		ct state vmap { established : accept, related : accept, invalid : drop }
		iif lo accept
		iifname { "lo" } accept
		tcp dport vmap { 22 : accept, 2000-2010 : jump svc, 3000 : jump svc, 4000 : drop }
		ip saddr @nets4 tcp dport 4000-4001 accept
		fib daddr type local tcp dport 5000 accept
	}
}`)
	ports := fwtest.RandomPorts([]uint16{22, 2000, 3000, 4000, 4001, 5000}, 4)
	n.Serve(t, ports)
	open := oracle(n, t, ports, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a}, []string{"tcp"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 4001, Proto: "tcp", Direction: firewall.HookInput, From: "198.18.0.2/32", Family: firewall.FamilyIP})
}
