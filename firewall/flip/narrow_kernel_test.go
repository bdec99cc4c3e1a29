package flip

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// Sources of the differential test: inside and outside the prefix ufw lets
// reach ssh, in and out of the deny lists.
var narrowSources = []string{
	"10.9.0.5",    // allowed for ssh
	"10.9.0.200",  // allowed for ssh
	"10.9.0.70",   // allowed for ssh, but denied (10.9.0.64/26)
	"10.8.0.5",    // outside
	"203.0.113.7", // in the ipset blocklist (203.0.113.0/24)
	fwtest.PeerV4a,
	fwtest.PeerV6a,
	fwtest.PeerV6b, // denied (fd00:f0::3)
}

// narrowNet is a ufw node that lets ssh in only from 10.9.0.0/24, 8080
// (tcp and udp) and 9999/tcp from anyone, and denies 10.9.0.64/26 and fd00:f0::3
// everything (ufw's "deny from", inserted first); an ipset blocklist
// (hash:net, 203.0.113.0/24) is dropped at the top of INPUT. The peer holds
// every address of narrowSources.
func narrowNet(t *testing.T) *fwtest.TestNet {
	t.Helper()
	fwtest.RequireTools(t, "ufw", "ipset", "iptables-nft")
	n := fwtest.NewNamedNet(t, "nw-", "nw", "0f")
	dev := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Peer, "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && !strings.HasPrefix(f[1], "lo") {
			dev = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	for _, s := range narrowSources {
		if a := netip.MustParseAddr(s); a.Is4() && !strings.HasPrefix(s, "198.18.") {
			fwtest.Run(t, "", "ip", "-n", n.Peer, "addr", "add", s+"/32", "dev", dev)
		}
	}
	for _, p := range []string{"10.8.0.0/16", "10.9.0.0/16", "203.0.113.0/24"} {
		fwtest.Run(t, "", "ip", "-n", n.Node, "route", "add", p, "via", fwtest.PeerV4a)
	}
	n.Ufw(t,
		[]string{"default", "deny", "incoming"},
		[]string{"deny", "from", "10.9.0.64/26"},
		[]string{"deny", "from", "fd00:f0::3"},
		[]string{"allow", "from", "10.9.0.0/24", "to", "any", "port", "22", "proto", "tcp"},
		[]string{"allow", "8080"},
		[]string{"allow", "9999/tcp"},
		[]string{"--force", "enable"},
	)
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "create", "bl", "hash:net")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "ipset", "add", "bl", "203.0.113.0/24")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "iptables-nft", "-I", "INPUT", "1", "-m", "set", "--match-set", "bl", "src", "-j", "DROP")
	n.Serve(t, []uint16{22, 8080, 9999})
	return n
}

func narrowProbes() []fwtest.Probe {
	var out []fwtest.Probe
	for _, s := range narrowSources {
		for _, pp := range []struct {
			proto string
			port  uint16
		}{{"tcp", 22}, {"tcp", 8080}, {"udp", 8080}, {"tcp", 9999}} {
			out = append(out, fwtest.Probe{Proto: pp.proto, Src: s, Port: pp.port})
		}
	}
	return out
}

// probeFate is the preview's fate for a probe: the fate of the input opening
// of its family, proto and port whose source region holds it.
func probeFate(p Preview, pr fwtest.Probe) *Fate {
	src := netip.MustParseAddr(pr.Src)
	var best *Fate
	for i := range p.Fates {
		f := &p.Fates[i]
		o := f.Opening
		if o.Direction != firewall.HookInput || o.In != "" || o.Family != pr.Family() || o.Proto != pr.Proto || pr.Port < o.Port || pr.Port > firewall.PortEnd(o) {
			continue
		}
		if c, ok := vocab.ClassByName(o.Family, o.Class); o.Class != "" && (!ok || !c.Holds(netip.Addr{}, true)) {
			continue // a region to other destinations than the node's own
		}
		if o.From == "" {
			if best == nil {
				best = f
			}
			continue
		}
		if pfx, err := netip.ParsePrefix(o.From); err == nil && pfx.Contains(src) {
			best = f
		}
	}
	return best
}

// The kernel as the oracle for a node whose ssh ufw lets in from one
// prefix only and whose deny lists drop some sources: TCP and UDP from
// every source to each port, before and after a flip through the product's
// path (PreviewFlipOn, then Flip with the fingerprints it saw). Every
// packet that passes after passed before (nothing widens), every kept one
// passes, every closing one is dropped.
func TestKernelFlipCarriesRestrictions(t *testing.T) {
	n := narrowNet(t)
	probes := narrowProbes()
	before := n.Reach(t, probes)
	for _, c := range []struct {
		src  string
		port uint16
		want bool
	}{{"10.9.0.5", 22, true}, {"10.8.0.5", 22, false}, {"10.9.0.70", 22, false}, {"203.0.113.7", 8080, false}, {fwtest.PeerV4a, 8080, true}, {fwtest.PeerV4a, 9999, true}} {
		if got := before[fwtest.Probe{Proto: "tcp", Src: c.src, Port: c.port}]; got != c.want {
			t.Fatalf("before the flip: tcp from %s to %d reached=%v, want %v (the fixture is not what the test needs)", c.src, c.port, got, c.want)
		}
	}
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8080/udp")...)}
	spec.Drop = fwtest.Ports("9999/tcp") // closing, on purpose
	p, d := approved(t, n, spec)
	t.Logf("derived:\n%s", d.Text())
	for _, s := range []string{"elements = { 10.9.0.0/26, 10.9.0.128/25 }", "elements = { 10.9.0.64/26, 203.0.113.0/24 }", "elements = { fd00:f0::3/128 }"} {
		if !strings.Contains(d.Text(), s) {
			t.Errorf("the derived table does not carry %q", s)
		}
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	meshListed(t, n, d, "the flip's table")
	after := n.Reach(t, probes)
	sent, mismatches, kept, closing, passed := 2*len(probes), 0, 0, 0, 0
	for _, pr := range probes {
		b, a := before[pr], after[pr]
		if a {
			passed++
		}
		fate := probeFate(p, pr)
		switch {
		case a && !b:
			mismatches++
			t.Errorf("%v passes after the flip and did not before (fate %+v)", pr, fate)
		case b && fate == nil:
			mismatches++
			t.Errorf("%v passed before the flip and the preview gives it no fate", pr)
		case b && fate.Fate == FateKept:
			kept++
			if !a {
				mismatches++
				t.Errorf("%v is kept by the preview and does not pass after the flip", pr)
			}
		case b && fate.Fate == FateClosing:
			closing++
			if a {
				mismatches++
				t.Errorf("%v is closing by the preview and passes after the flip", pr)
			}
		}
	}
	fmt.Printf("flip carrying restrictions: %d packets sent (%d probes before and after), %d pass after, %d kept, %d closing, %d mismatches\n",
		sent, len(probes), passed, kept, closing, mismatches)
	if kept == 0 || closing == 0 {
		t.Errorf("%d kept and %d closing probes: the test wants both", kept, closing)
	}
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	if got := n.Reach(t, probes); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("after the revert the node answers otherwise than before the flip")
	}
	// The boot file, with its sets, is what nft loads.
	boot, err := BootRuleset(d.Spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	fwtest.Run(t, boot, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
	meshListed(t, n, d, "the boot file's table")
	fwtest.Run(t, "", "ip", "netns", "exec", n.Node, "nft", "delete", "table", "inet", firewall.MeshTable)
}

// A mesh table that opens ssh to every source, where the found firewall
// lets it in from 10.9.0.0/24 only, is refused, naming the port and the
// source; declared in flip.widen, it is approved with a declared widening.
func TestKernelPreviewRefusesWidening(t *testing.T) {
	n := narrowNet(t)
	found := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8080/udp")...)}
	spec.Drop = fwtest.Ports("9999/tcp") // closing, on purpose
	p := previewFlip(found, uncarried(t, found, spec).Ruleset, spec, node)
	if p.Approved {
		t.Fatal("a flip that opens ssh to every source was approved")
	}
	why := strings.Join(p.Reasons, "\n")
	for _, s := range []string{
		"22/tcp (input, ip) would widen: passes after the flip from any source",
		"22/tcp (input, ip, from 10.9.0.64/26) would widen",
		"22/tcp (input, ip6) would widen",
		"8080/tcp (input, ip, from 203.0.113.0/24) would widen",
		"8080/udp (input, ip6, from fd00:f0::3/128) would widen",
	} {
		if !strings.Contains(why, s) {
			t.Errorf("reasons do not say %q:\n%s", s, why)
		}
	}
	spec.Widen = vocab.MustPorts([]string{"22/tcp"})
	p = PreviewFlipOn(found, node, spec)
	if !p.Approved {
		t.Fatalf("ssh declared in flip.widen: refused: %v", p.Reasons)
	}
	declared := 0
	for _, f := range p.Fates {
		if f.Fate == FateWidening {
			if !f.Declared || f.Opening.Port != 22 {
				t.Errorf("widening %+v, want only 22/tcp, declared", f)
			}
			declared++
		}
	}
	if declared == 0 {
		t.Error("ssh declared in flip.widen: no widening fate")
	}
}

// ufw's "limit" (the recent match) cannot be carried into the mesh's
// table: the preview refuses, naming the port and the match.
func TestKernelPreviewRefusesUfwLimit(t *testing.T) {
	fwtest.RequireTools(t, "ufw")
	n := fwtest.NewNamedNet(t, "nl-", "nl", "1f")
	n.Ufw(t, []string{"default", "deny", "incoming"}, []string{"limit", "22/tcp"}, []string{"allow", "8080/tcp"}, []string{"--force", "enable"})
	found := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	p := PreviewFlipOn(found, node, MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp")...)})
	why := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(why, "22/tcp (input, ip) would widen") || !strings.Contains(why, "xt match recent") {
		t.Fatalf("approved=%v, want a refusal naming 22/tcp and the recent match:\n%s", p.Approved, why)
	}
	if strings.Contains(why, "8080/tcp") {
		t.Errorf("8080/tcp, open to all, is named:\n%s", why)
	}
}

// "allow in on IFACE" is carried as the interface: on a node with two
// uplinks, 8080 open only on the veth stays so after the flip.
func TestKernelFlipCarriesInterface(t *testing.T) {
	fwtest.RequireTools(t, "ufw")
	n := fwtest.NewNamedNet(t, "ni-", "ni", "3f")
	f := strings.Fields(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show", "type", "veth"))
	if len(f) < 2 {
		t.Fatal("no veth in the node")
	}
	veth := strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
	fwtest.Run(t, "", "ip", "-n", n.Node, "link", "add", "up0", "type", "veth", "peer", "name", "up0p")
	fwtest.Run(t, "", "ip", "-n", n.Node, "link", "set", "up0", "up")
	n.Ufw(t, []string{"default", "deny", "incoming"}, []string{"allow", "22/tcp"},
		[]string{"allow", "in", "on", "up0", "to", "any", "port", "8080", "proto", "tcp"},
		[]string{"allow", "in", "on", veth, "to", "any", "port", "8081", "proto", "tcp"},
		[]string{"--force", "enable"})
	n.Serve(t, []uint16{22, 8080, 8081})
	var probes []fwtest.Probe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV6a} {
		for _, port := range []uint16{22, 8080, 8081} {
			probes = append(probes, fwtest.Probe{Proto: "tcp", Src: s, Port: port})
		}
	}
	before := n.Reach(t, probes)
	if !before[probes[2]] || before[probes[1]] {
		t.Fatalf("before the flip: 8080 reached=%v, 8081 reached=%v; want only 8081 (on the veth)", before[probes[1]], before[probes[2]])
	}
	spec := MeshSpec{Node: "n1", Input: append(allow(OwnerManagement, "22/tcp"), allow("web", "8080/tcp", "8081/tcp")...)}
	p, d := approved(t, n, spec)
	for _, s := range []string{fmt.Sprintf("iifname %q meta nfproto ipv4 meta l4proto tcp th dport 8081", veth), `iifname "up0" meta nfproto ipv4 meta l4proto tcp th dport 8080`} {
		if !strings.Contains(d.Text(), s) {
			t.Errorf("the derived table does not hold %q:\n%s", s, d.Text())
		}
	}
	fl := NewFlipper(n.Path(n.Node))
	if _, err := fl.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint); err != nil {
		t.Fatal(err)
	}
	after := n.Reach(t, probes)
	mismatches := sameReach(t, probes, before, after)
	fmt.Printf("flip carrying interfaces: %d packets sent, %d mismatches\n", 2*len(probes), mismatches)
}

// revertThenBoot reverts the flip by plan, then loads the boot file of
// d's spec, which must put the mesh's table back as derived.
func revertThenBoot(t *testing.T, n *fwtest.TestNet, f *Flipper, plan *RevertPlan, d *Derived) {
	t.Helper()
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	boot, err := BootRuleset(d.Spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	fwtest.Run(t, boot, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
	meshListed(t, n, d, "the boot file's table")
}

// uplinkOf is the name of the node's veth to the peer.
func uplinkOf(t *testing.T, n *fwtest.TestNet) string {
	t.Helper()
	uplink := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show", "type", "veth"), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			uplink = strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")
		}
	}
	return uplink
}

// outputKept says, by key, which output openings the preview p keeps.
func outputKept(p Preview, key func(firewall.Opening) string) map[string]bool {
	kept := map[string]bool{}
	for _, f := range p.Fates {
		if f.Opening.Direction == firewall.HookOutput && f.Opening.Class == "output" && f.Fate == FateKept {
			kept[key(f.Opening)] = true
		}
	}
	return kept
}

// meshListed checks that table inet adoption, as listed, is the derived
// model, sets and all.
func meshListed(t *testing.T, n *fwtest.TestNet, d *Derived, what string) {
	t.Helper()
	for _, tb := range n.List(t).Tables {
		if tb.Name == firewall.MeshTable {
			got := &firewall.Ruleset{Tables: []firewall.Table{tb}}
			if firewall.Fingerprint(got) != firewall.Fingerprint(d.Ruleset) {
				t.Errorf("%s, listed, is not the derived model:\n%s", what, fwtest.Diff(firewall.Render(d.Ruleset), firewall.Render(got)))
				for ci, ch := range d.Ruleset.Tables[0].Chains {
					for ri, r := range ch.Rules {
						if ci < len(tb.Chains) && ri < len(tb.Chains[ci].Rules) {
							g := tb.Chains[ci].Rules[ri]
							g.Handle = 0
							if a, b := fmt.Sprintf("%+v", r), fmt.Sprintf("%+v", g); a != b {
								t.Errorf("chain %s rule %d: derived %s, listed %s", ch.Name, ri, a, b)
							}
						}
					}
				}
			}
			return
		}
	}
	t.Errorf("%s is not there", what)
}

// approved previews spec on n's node as the product does, fails unless it
// approves, and returns the preview and the table it approved.
func approved(t *testing.T, n *fwtest.TestNet, spec MeshSpec) (Preview, *Derived) {
	t.Helper()
	found := n.List(t)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	p := PreviewFlipOn(found, node, spec)
	if !p.Approved {
		t.Fatalf("preview refused: %v", p.Reasons)
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

// On the ufw-docker arrangement, a published port ufw-docker lets through
// from private networks only (18082) keeps that restriction on the forward
// path after the flip: the peer (198.18.0.2) reaches neither before nor
// after, while 18080, routed to anyone, stays open.
func TestKernelFlipCarriesForwardSources(t *testing.T) {
	fwtest.RequireTools(t, "iptables-nft-restore", "sysctl")
	n := fwtest.NewNamedNet(t, "df-", "df", "4e")
	ctr := n.Container(t)
	fwtest.Run(t, fwtest.UfwDockerRules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.ServeIn(t, ctr, []uint16{8080, 8082})
	n.Serve(t, []uint16{22})
	probes := []fwtest.Probe{{Proto: "tcp", Src: fwtest.PeerV4a, Port: 18080}, {Proto: "tcp", Src: fwtest.PeerV4a, Port: 18082}, {Proto: "tcp", Src: fwtest.PeerV4a, Port: 22}}
	before := n.Reach(t, probes)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Forward: allow("web", "18080/tcp", "18082/tcp")}
	// The fixture opens more than the spec keeps (the preview refuses for
	// those); the flip applies the derived table all the same.
	found := n.List(t)
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), "ip saddr @forward_18082_tcp_ip_from ct status dnat") {
		t.Errorf("the derived table does not carry 18082's sources:\n%s", d.Text())
	}
	if _, err := NewFlipper(n.Path(n.Node)).Flip(spec, firewall.Fingerprint(found), firewall.Fingerprint(d.Ruleset)); err != nil {
		t.Fatal(err)
	}
	after := n.Reach(t, probes)
	mismatches := sameReach(t, probes, before, after)
	if !after[probes[0]] || after[probes[1]] {
		t.Errorf("after the flip: 18080 reached=%v, 18082 reached=%v; want 18080 only", after[probes[0]], after[probes[1]])
	}
	fmt.Printf("flip carrying forward sources: %d packets sent, %d mismatches\n", 2*len(probes), mismatches)
}

// sameReach counts (and reports) the probes that reach otherwise after the
// flip than before.
func sameReach(t *testing.T, probes []fwtest.Probe, before, after map[fwtest.Probe]bool) int {
	t.Helper()
	mismatches := 0
	for _, pr := range probes {
		if before[pr] != after[pr] {
			mismatches++
			t.Errorf("%v reached=%v before the flip, %v after", pr, before[pr], after[pr])
		}
	}
	return mismatches
}
