package marks

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// TestKernelForwardMarks: on the ufw-docker node, a module whose container
// publishes 18082 and 19100 (not routed by ufw, so closed) gets forward
// marks; clients then reach both, a source denied by the found firewall in
// the same chain stays denied, iptables-save still reads the ruleset, the
// evaluator agrees with the packets, and a release gives back the ruleset
// byte for byte.
func TestKernelForwardMarks(t *testing.T) {
	n := fwtest.NewNamedNet(t, "dn-", "dn", "0c")
	fwtest.RequireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "iptables-save", "sysctl")
	ctr := n.Container(t)
	rules := strings.Replace(fwtest.UfwDockerRules, "-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT\n",
		"-A ufw-user-forward -s 198.18.0.3/32 -j DROP\n-A ufw-user-forward -p tcp -m tcp --dport 8080 -j ACCEPT\n", 1)
	fwtest.Run(t, rules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, fwtest.UfwDockerRules6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	fwtest.ServeIn(t, ctr, []uint16{8080, 8082, 9100})
	before := n.Listing(t)
	all := []uint16{18080, 18082, 19100}
	open, _, _ := fwtest.DnatOracle(n, t, eval.OpenPortsOn, all, []string{fwtest.PeerV4a, fwtest.PeerV6a}, []string{"tcp"})
	for _, o := range fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 18082) {
		if o.From == "" {
			t.Fatalf("18082 open to anyone before any mark: %+v", o)
		}
	}

	m := marker(n, t)
	added, present, err := m.OpenForward("n1", "web", fwtest.Ports("18082/tcp", "19100/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 4 || len(present) != 0 { // 18082 and 19100 in ufw-user-forward and ufw6-user-forward
		t.Errorf("added %v, present %v; want 4 added", added, present)
	}
	for _, r := range added {
		if r.Chain != "ufw-user-forward" && r.Chain != "ufw6-user-forward" {
			t.Errorf("forward mark in %s, want ufw's forward chain: %v", r.Chain, r)
		}
	}
	save := n.Quiet(t, "iptables-save")
	if !strings.Contains(save, `--ctstate DNAT --ctorigdstport 18082 -m comment --comment "adoption:n1:web:18082/tcp" -j ACCEPT`) {
		t.Errorf("iptables-save does not show the forward mark as iptables writes it:\n%s", fwtest.GrepLines(save, "adoption:"))
	}
	if i, j := strings.Index(save, "-A ufw-user-forward -s 198.18.0.3/32 -j DROP"), strings.Index(save, "adoption:n1:web:18082/tcp"); i < 0 || j < i {
		t.Errorf("the mark is not after the source deny:\n%s", fwtest.GrepLines(save, "ufw-user-forward"))
	}
	// Again: nothing added, everything present.
	if again, present, err := m.OpenForward("n1", "web", fwtest.Ports("18082/tcp", "19100/tcp")); err != nil || len(again) != 0 || len(present) != len(added) {
		t.Errorf("second OpenForward: added %v, present %v, %v", again, present, err)
	}
	// An opening to any source does not list the sources the ruleset
	// singles out for a drop: 198.18.0.3, denied before the marks, is
	// checked on its own.
	open, _, _ = fwtest.DnatOracle(n, t, eval.OpenPortsOn, all, []string{fwtest.PeerV4a, fwtest.PeerV6a}, []string{"tcp"})
	for p, ok := range n.Reach(t, []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4b, Port: 18082}, {Proto: "tcp", Src: fwtest.PeerV4b, Port: 19100}}) {
		if ok {
			t.Errorf("%v: the found firewall's source deny no longer holds after the mark", p)
		}
	}
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18082, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8082"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 19100, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:9100"})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 18082, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8082"})

	removed, err := m.Release("n1")
	if err != nil || len(removed) != len(added) {
		t.Fatalf("release: removed %v, %v; want the %d added", removed, err, len(added))
	}
	if after := n.Listing(t); after != before {
		t.Errorf("release did not give back the ruleset:\n%s", fwtest.Diff(before, after))
	}
}
