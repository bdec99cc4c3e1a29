package marks

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
)

// Root tests of marks beside the found firewall's source denies: a source
// it denies ("ufw deny from", "ufw route deny from", a blocklist by ipset
// in the same chain) stays denied on a port a mark opens, while any other
// source gets through; the kernel decides, with real connections from the
// peer namespace.

// The sources the blocklists hold: the peer gets these addresses besides
// newNamedNet's two per family.
const (
	listedV4 = "198.18.0.4"
	listedV6 = "fd00:f0::4"
)

// peerAddr gives the peer namespace one more address on its veth, with the
// permanent neighbour entry in the node that newNamedNet makes for the
// others.
func peerAddr(n *fwtest.TestNet, t *testing.T, addr string) {
	t.Helper()
	f := strings.Fields(fwtest.Run(t, "", "ip", "-n", n.Peer, "-o", "link", "show", "type", "veth"))
	if len(f) < 2 {
		t.Fatalf("no veth in %s", n.Peer)
	}
	dev, mac := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"), ""
	for i := range f {
		if f[i] == "link/ether" && i+1 < len(f) {
			mac = f[i+1]
		}
	}
	route := strings.Fields(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "route", "get", fwtest.PeerV4a))
	nodeDev := ""
	for i := range route {
		if route[i] == "dev" && i+1 < len(route) {
			nodeDev = route[i+1]
		}
	}
	if mac == "" || nodeDev == "" {
		t.Fatalf("peer veth %q mac %q, node's device %q", dev, mac, nodeDev)
	}
	args := []string{"-n", n.Peer, "addr", "add", addr + "/24", "dev", dev}
	if strings.Contains(addr, ":") {
		args = []string{"-n", n.Peer, "addr", "add", addr + "/64", "dev", dev, "nodad"}
	}
	fwtest.Run(t, "", "ip", args...)
	fwtest.Run(t, "", "ip", "-n", n.Node, "neigh", "replace", addr, "lladdr", mac, "nud", "permanent", "dev", nodeDev)
}

// blocklists makes the ipsets bl4 (holding listedV4) and bl6 (listedV6) in
// the node namespace, for rules "-m set --match-set bl4 src -j DROP".
func blocklists(n *fwtest.TestNet, t *testing.T) {
	t.Helper()
	testenv.NeedTools(t, "ipset")
	for _, c := range [][]string{
		{"create", "bl4", "hash:ip", "family", "inet"}, {"add", "bl4", listedV4},
		{"create", "bl6", "hash:ip", "family", "inet6"}, {"add", "bl6", listedV6},
	} {
		fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node, "ipset"}, c...)...)
	}
}

// denyProbes are a connection to port from every source: an allowed one,
// one a ufw deny names and one a blocklist holds, per family.
func denyProbes(port uint16) (allowed, denied []fwtest.Probe) {
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV6a} {
		allowed = append(allowed, fwtest.Probe{Proto: "tcp", Src: s, Port: port})
	}
	for _, s := range []string{fwtest.PeerV4b, listedV4, fwtest.PeerV6b, listedV6} {
		denied = append(denied, fwtest.Probe{Proto: "tcp", Src: s, Port: port})
	}
	return allowed, denied
}

// expectProbes fails where the kernel let a probe through other than want.
func expectProbes(n *fwtest.TestNet, t *testing.T, when string, want bool, ps []fwtest.Probe) {
	t.Helper()
	for p, ok := range n.Reach(t, ps) {
		if ok != want {
			t.Errorf("%s: %v reached=%v, want %v", when, p, ok, want)
		}
	}
}

// The real ufw denies 198.18.0.3 and fd00:f0::3 ("ufw deny from", which
// ufw writes after the allow rules added before it) and a blocklist by
// ipset is dropped at the end of ufw's input chain: a mark opening 9750/tcp
// goes after both, so the denied sources stay denied while another source
// gets through; a release gives back the ruleset byte for byte.
func TestKernelMarksAfterSourceDenies(t *testing.T) {
	n := fwtest.NewNamedNet(t, "sd-", "sd", "0e")
	testenv.NeedTools(t, "ufw", "iptables", "ip6tables", "iptables-save", "ip6tables-save")
	n.Ufw(t,
		[]string{"--force", "reset"},
		[]string{"default", "deny", "incoming"},
		[]string{"default", "deny", "routed"},
		[]string{"allow", "22/tcp"},
		[]string{"deny", "from", fwtest.PeerV4b},
		[]string{"deny", "from", fwtest.PeerV6b},
		[]string{"--force", "enable"},
	)
	blocklists(n, t)
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables", "-A", "ufw-user-input", "-m", "set", "--match-set", "bl4", "src", "-j", "DROP")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ip6tables", "-A", "ufw6-user-input", "-m", "set", "--match-set", "bl6", "src", "-j", "DROP")
	peerAddr(n, t, listedV4)
	peerAddr(n, t, listedV6)
	n.Serve(t, []uint16{22, 9750})
	allowed, denied := denyProbes(9750)
	before := n.Listing(t)
	expectProbes(n, t, "before opening", false, append(allowed, denied...))
	expectProbes(n, t, "before opening, 22/tcp", true, []fwtest.Probe{{Proto: "tcp", Src: listedV4, Port: 22}, {Proto: "tcp", Src: listedV6, Port: 22}})

	m := marker(n, t)
	added, _, err := m.Open("n1", "web", fwtest.Ports("9750/tcp"))
	if err != nil || len(added) != 2 {
		t.Fatalf("Open: %v, %v; want ufw-user-input and ufw6-user-input", added, err)
	}
	for _, r := range added {
		if r.Placement != "" {
			t.Errorf("%v: placement %q; want nothing undecided", r, r.Placement)
		}
	}
	expectProbes(n, t, "after opening", true, allowed)
	expectProbes(n, t, "after opening", false, denied)
	for _, s := range []struct{ save, chain, deny, set string }{
		{n.Quiet(t, "iptables-save"), "ufw-user-input", "-A ufw-user-input -s " + fwtest.PeerV4b + "/32 -j DROP", "--match-set bl4 src -j DROP"},
		{n.Quiet(t, "ip6tables-save"), "ufw6-user-input", "-A ufw6-user-input -s " + fwtest.PeerV6b + "/128 -j DROP", "--match-set bl6 src -j DROP"},
	} {
		i, j, k := strings.Index(s.save, s.deny), strings.Index(s.save, s.set), strings.Index(s.save, "adoption:n1:web:9750/tcp")
		if i < 0 || j < 0 || k < i || k < j {
			t.Errorf("%s: the mark is not after the deny and the blocklist:\n%s", s.chain, fwtest.GrepLines(s.save, "-A "+s.chain+" "))
		}
	}

	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs from before opening:\n%s", fwtest.Diff(before, after))
	}
	expectProbes(n, t, "after release", false, allowed)
}

// On the ufw-docker node, ufw's forward chain denies 198.18.0.3 and
// fd00:f0::3 ("ufw route deny from", after ufw's routed allows) and then
// drops a blocklist by ipset: a forward mark for the published 18082 goes
// after both, so a denied source stays denied on the container's port
// while another source reaches it; a release gives back the ruleset byte
// for byte. A source deny in DOCKER-USER after its jump to ufw's chain,
// which the mark skips, is said in the mark's placement.
func TestKernelForwardMarksAfterBlocklists(t *testing.T) {
	n := fwtest.NewNamedNet(t, "dn-", "dn", "0d")
	fwtest.RequireTools(t, "iptables-nft-restore", "ip6tables-nft-restore", "iptables", "iptables-save", "ip6tables-save", "sysctl")
	ctr := n.Container(t)
	blocklists(n, t)
	denies := func(rules, chain, src, set string) string {
		commit := strings.LastIndex(rules, "COMMIT\n")
		return rules[:commit] + "-A " + chain + " -s " + src + " -j DROP\n" +
			"-A " + chain + " -m set --match-set " + set + " src -j DROP\n" + rules[commit:]
	}
	fwtest.Run(t, denies(fwtest.UfwDockerRules, "ufw-user-forward", fwtest.PeerV4b+"/32", "bl4"), "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, denies(fwtest.UfwDockerRules6, "ufw6-user-forward", fwtest.PeerV6b+"/128", "bl6"), "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	peerAddr(n, t, listedV4)
	peerAddr(n, t, listedV6)
	fwtest.ServeIn(t, ctr, []uint16{8080, 8082})
	allowed, denied := denyProbes(18082)
	before := n.Listing(t)
	expectProbes(n, t, "before opening", false, append(allowed, denied...))
	expectProbes(n, t, "before opening, 18080/tcp", true, []fwtest.Probe{{Proto: "tcp", Src: listedV4, Port: 18080}, {Proto: "tcp", Src: listedV6, Port: 18080}})

	m := marker(n, t)
	added, _, err := m.OpenForward("n1", "web", fwtest.Ports("18082/tcp"))
	if err != nil || len(added) != 2 {
		t.Fatalf("OpenForward: %v, %v; want ufw-user-forward and ufw6-user-forward", added, err)
	}
	for _, r := range added {
		if r.Placement != "" {
			t.Errorf("%v: placement %q; want nothing undecided", r, r.Placement)
		}
	}
	expectProbes(n, t, "after opening", true, allowed)
	expectProbes(n, t, "after opening", false, denied)
	save := n.Quiet(t, "iptables-save")
	if i, k := strings.Index(save, "--match-set bl4 src -j DROP"), strings.Index(save, "adoption:n1:web:18082/tcp"); i < 0 || k < i {
		t.Errorf("the forward mark is not after the blocklist:\n%s", fwtest.GrepLines(save, "-A ufw-user-forward "))
	}
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("after Release the ruleset differs from before opening:\n%s", fwtest.Diff(before, after))
	}

	// A deny put into DOCKER-USER after its jump to ufw-user-forward: the
	// mark cannot keep it, and says so.
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables", "-I", "DOCKER-USER", "2", "-s", "198.18.0.9", "-j", "DROP")
	added, _, err = m.OpenForward("n1", "web", fwtest.Ports("18082/tcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range added {
		if r.Family == firewall.FamilyIP && !strings.Contains(r.Placement, "DOCKER-USER") {
			t.Errorf("%v: placement %q; want the deny in DOCKER-USER named", r, r.Placement)
		}
	}
	if _, err := m.Release("n1"); err != nil {
		t.Fatal(err)
	}
}
