package flip

// The differential test against the kernel on rulesets shaped as ufw and
// Docker write them through iptables-nft: ufw's recorded layout with
// generated user rules (allow, deny, reject, limit, by port, multiport,
// range, source, interface, destination, ipset), route rules
// (ufw-user-forward: to the container's, the LAN's and the VPN's
// networks, between interfaces), before.rules edits (ping dropped, an
// ipset blocklist), its default policies, *nat (a port forwarded to the
// LAN host) and *raw (a source dropped) sections, ufw-docker's
// DOCKER-USER; and beside it Docker's own chains (DOCKER, DOCKER-FORWARD,
// the DNAT of host ports to the container, Docker 28's raw drops of the
// container's address), each loaded with iptables-restore and
// ip6tables-restore, ufw's first, then Docker's as dockerd adds them. The
// topology is the native test's with a VPN-like wg0 and its routed prefix.
// Probes, fates and the reboot sample are fuzz_rig_kernel_test.go's.
//
// ADOPT_FLIP_FUZZ_RULESETS sets how many rulesets (make test: the default,
// make fuzz: 500), ADOPT_FLIP_FUZZ_SEED the first seed.

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"adoption/internal/fwtest"
	"adoption/internal/ufwfixture"
)

// iptPublish are the container ports Docker may publish, each on host
// port iptHostBase+port; iptForwardBase+port is the host port ufw's *nat
// may forward to the LAN host's port.
var iptPublish = []struct {
	port  uint16
	proto string
}{{80, "tcp"}, {443, "tcp"}, {53, "udp"}, {5432, "tcp"}, {8080, "tcp"}, {9000, "udp"}}

const (
	iptHostBase    = 10000
	iptForwardBase = 20000
)

// iptHostPorts are every host port a generated ruleset may DNAT.
func iptHostPorts() []uint16 {
	var out []uint16
	for _, p := range iptPublish {
		out = append(out, iptHostBase+p.port, iptForwardBase+p.port)
	}
	return out
}

// iptRuleset is one generated iptables-nft firewall: ufw's part (what
// ufw.service loads at boot) and Docker's (what dockerd adds when it
// starts, --noflush), per family, and the ipsets ufw's rules match
// (created in the node's namespace first).
type iptRuleset struct {
	ufw, docker [2]string // [0] IPv4, [1] IPv6
	ipsets      [][]string
}

func (rs iptRuleset) String() string {
	var b strings.Builder
	for _, s := range rs.ipsets {
		b.WriteString("ipset " + strings.Join(s, " ") + "\n")
	}
	for i, fam := range []string{"iptables", "ip6tables"} {
		fmt.Fprintf(&b, "# %s-restore (ufw)\n%s# %s-restore --noflush (Docker)\n%s", fam, rs.ufw[i], fam, rs.docker[i])
	}
	return b.String()
}

// iptGen is one family's generator state.
type iptGen struct {
	r                  *rand.Rand
	v6                 bool
	uplink, lan        string
	pfx                string // ufw's chain prefix: ufw- or ufw6-
	ctr, ctrNet, lanIP string
	lanNet, vpnNet     string
	peerA, peerB       string
	peerNet, privNet   string
}

func (g *iptGen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g *iptGen) port() uint16             { return fuzzPorts[g.r.Intn(len(fuzzPorts))] }
func (g *iptGen) proto() string            { return g.pick("tcp", "udp") }
func (g *iptGen) src() string              { return g.pick(g.peerA, g.peerB, g.peerNet, g.privNet) }

// match is a port match as ufw writes it: one port, a multiport list or
// a range.
func (g *iptGen) match(proto string) string {
	switch g.r.Intn(4) {
	case 0:
		a, b := g.port(), g.port()
		if a != b {
			return fmt.Sprintf("-p %s -m multiport --dports %d,%d", proto, a, b)
		}
	case 1:
		if a, k := g.port(), uint16(g.r.Intn(3)); k > 0 { // a:a is refused
			return fmt.Sprintf("-p %s -m multiport --dports %d:%d", proto, a, a+k)
		}
	}
	return fmt.Sprintf("-p %s -m %s --dport %d", proto, proto, g.port())
}

func (g *iptGen) reject(proto string) string {
	if proto == "tcp" {
		return "REJECT --reject-with tcp-reset"
	}
	if g.v6 {
		return "REJECT --reject-with icmp6-port-unreachable"
	}
	return "REJECT --reject-with icmp-port-unreachable"
}

// userInput is one rule of ufw-user-input.
func (g *iptGen) userInput(set string) []string {
	c := g.pfx + "user-input"
	pr := g.proto()
	switch g.r.Intn(12) {
	case 0, 1:
		return []string{fmt.Sprintf("-A %s %s -j ACCEPT", c, g.match(pr))}
	case 2:
		return []string{fmt.Sprintf("-A %s -s %s %s -j ACCEPT", c, g.src(), g.match(pr))}
	case 3:
		return []string{fmt.Sprintf("-A %s -s %s -j DROP", c, g.src())}
	case 4:
		return []string{fmt.Sprintf("-A %s -i %s %s -j ACCEPT", c, g.pick(g.uplink, g.lan, "wg0", "docker0"), g.match(pr))}
	case 5:
		return []string{fmt.Sprintf("-A %s %s -j DROP", c, g.match(pr))}
	case 6:
		return []string{fmt.Sprintf("-A %s %s -j %s", c, g.match(pr), g.reject(pr))}
	case 7:
		return []string{fmt.Sprintf("-A %s -m set --match-set %s src %s -j ACCEPT", c, set, g.match(pr))}
	case 8:
		// ufw limit: recent's counting, which no evaluator can decide.
		p, mask := g.port(), "255.255.255.255"
		if g.v6 {
			mask = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
		}
		return []string{
			fmt.Sprintf("-A %s -p tcp -m tcp --dport %d -m conntrack --ctstate NEW -m recent --set --name DEFAULT --mask %s --rsource", c, p, mask),
			fmt.Sprintf("-A %s -p tcp -m tcp --dport %d -m conntrack --ctstate NEW -m recent --update --seconds 30 --hitcount 6 --name DEFAULT --mask %s --rsource -j %suser-limit", c, p, mask, g.pfx),
			fmt.Sprintf("-A %s -p tcp -m tcp --dport %d -j %suser-limit-accept", c, p, g.pfx),
		}
	case 9:
		node := fwtest.NodeV4
		if g.v6 {
			node = fwtest.NodeV6
		}
		return []string{fmt.Sprintf("-A %s -d %s %s -j ACCEPT", c, node, g.match(pr))}
	case 10:
		return []string{fmt.Sprintf("-A %s -s %s %s -j DROP", c, g.src(), g.match(pr))}
	}
	return []string{fmt.Sprintf("-A %s -p %s -m %s --dport %d -j ACCEPT", c, pr, pr, g.port())}
}

// userForward is one route rule of ufw-user-forward.
func (g *iptGen) userForward() string {
	c := g.pfx + "user-forward"
	pr := g.proto()
	dst := g.pick(g.ctrNet, g.ctr, g.lanNet, g.vpnNet)
	switch g.r.Intn(9) {
	case 0, 1:
		return fmt.Sprintf("-A %s %s -j ACCEPT", c, g.match(pr))
	case 2:
		return fmt.Sprintf("-A %s -d %s %s -j ACCEPT", c, dst, g.match(pr))
	case 3:
		return fmt.Sprintf("-A %s -i %s -o %s -j ACCEPT", c, g.pick(g.uplink, "wg0"), g.pick(g.lan, "docker0", "wg0"))
	case 4:
		return fmt.Sprintf("-A %s -s %s -d %s %s -j ACCEPT", c, g.src(), dst, g.match(pr))
	case 5:
		return fmt.Sprintf("-A %s -o %s %s -j DROP", c, g.pick("docker0", g.lan, "wg0"), g.match(pr))
	case 6:
		return fmt.Sprintf("-A %s -i %s -o %s %s -j ACCEPT", c, g.uplink, g.pick(g.lan, "wg0", "docker0"), g.match(pr))
	case 7:
		return fmt.Sprintf("-A %s -s %s -j %s", c, g.src(), g.pick("DROP", "ACCEPT"))
	}
	return fmt.Sprintf("-A %s -p %s -m %s --dport %d -j ACCEPT", c, pr, pr, g.port())
}

// ufwPart is what ufw loads: its recorded layout with generated policies,
// before.rules edits, user and route rules, ufw-docker's DOCKER-USER
// (dockerUser), a *raw and a *nat section.
func (g *iptGen) ufwPart(dockerUser bool, set string) string {
	save := ufwfixture.Save4
	if g.v6 {
		save = ufwfixture.Save6
	}
	var filter, user, route []string
	if g.r.Intn(5) == 0 { // ufw default allow incoming
		save = strings.Replace(save, ":INPUT DROP", ":INPUT ACCEPT", 1)
		save = strings.Replace(save, "-A "+g.pfx+"skip-to-policy-input -j DROP", "-A "+g.pfx+"skip-to-policy-input -j ACCEPT", 1)
	}
	if g.r.Intn(3) == 0 { // ufw default allow routed
		save = strings.Replace(save, ":FORWARD DROP", ":FORWARD ACCEPT", 1)
		save = strings.Replace(save, "-A "+g.pfx+"skip-to-policy-forward -j DROP", "-A "+g.pfx+"skip-to-policy-forward -j ACCEPT", 1)
	}
	noPing := g.r.Intn(4) == 0
	blocklist := g.r.Intn(3) == 0
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "-A "+g.pfx+"user-input ") || strings.HasPrefix(l, "-A "+g.pfx+"user-forward "):
			continue
		case noPing && (strings.Contains(l, "--icmp-type 8 ") || strings.Contains(l, "--icmpv6-type 128 ")) && strings.Contains(l, g.pfx+"before-input"):
			l = strings.Replace(l, "-j ACCEPT", "-j DROP", 1) // before.rules: no ping
		case l == "COMMIT":
			continue
		case strings.HasPrefix(l, "-A "+g.pfx+"before-input -i lo") && blocklist:
			filter = append(filter, fmt.Sprintf("-A %sbefore-input -m set --match-set %s src -j DROP", g.pfx, set+"bl"))
		}
		if l != "" && !strings.HasPrefix(l, "*") {
			filter = append(filter, l)
		}
	}
	for range 1 + g.r.Intn(6) {
		user = append(user, g.userInput(set)...)
	}
	for range g.r.Intn(4) {
		route = append(route, g.userForward())
	}
	if g.r.Intn(4) == 0 { // after.rules: a port skipped to the policy
		filter = append(filter, fmt.Sprintf("-A %safter-input -p %s -m %s --dport %d -j %sskip-to-policy-input", g.pfx, "tcp", "tcp", g.port(), g.pfx))
	}
	var b strings.Builder
	if !g.v6 && g.r.Intn(4) == 0 { // before.rules *raw: a source dropped early
		fmt.Fprintf(&b, "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -s %s -p %s --dport %d -j DROP\nCOMMIT\n", g.src(), "tcp", g.port())
	}
	if !g.v6 && g.r.Intn(4) == 0 { // before.rules *nat: a port forwarded to the LAN host
		p := iptPublish[g.r.Intn(len(iptPublish))]
		fmt.Fprintf(&b, "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
			"-A PREROUTING -i %s -p %s -m %s --dport %d -j DNAT --to-destination %s:%d\nCOMMIT\n", g.uplink, p.proto, p.proto, iptForwardBase+p.port, g.lanIP, p.port)
		route = append(route, fmt.Sprintf("-A %suser-forward -d %s -p %s -m %s --dport %d -j ACCEPT", g.pfx, g.lanIP, p.proto, p.proto, p.port))
	}
	b.WriteString("*filter\n")
	var rest []string
	for _, l := range filter {
		if strings.HasPrefix(l, ":") {
			b.WriteString(l + "\n")
		} else {
			rest = append(rest, l)
		}
	}
	if dockerUser {
		b.WriteString(":DOCKER-USER - [0:0]\n:ufw-docker-logging-deny - [0:0]\n")
	}
	for _, l := range append(append(rest, user...), route...) {
		b.WriteString(l + "\n")
	}
	if dockerUser {
		// ufw-docker's after.rules: routed traffic to the containers is
		// ufw's route rules' to decide, private sources excepted.
		for _, l := range []string{
			"-A DOCKER-USER -j " + g.pfx + "user-forward",
			"-A DOCKER-USER -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
			"-A DOCKER-USER -s " + g.privNet + " -j RETURN",
			"-A DOCKER-USER -p udp -m udp --sport 53 --dport 1024:65535 -j RETURN",
			"-A DOCKER-USER -d " + g.ctrNet + " -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ufw-docker-logging-deny",
			"-A DOCKER-USER -d " + g.ctrNet + " -p udp -m udp --dport 0:32767 -j ufw-docker-logging-deny",
			"-A DOCKER-USER -j RETURN",
			"-A ufw-docker-logging-deny -m limit --limit 3/min --limit-burst 10 -j LOG --log-prefix \"[UFW DOCKER BLOCK] \"",
			"-A ufw-docker-logging-deny -j DROP",
		} {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// dockerPart is what dockerd adds at its start for the container
// publishing some of iptPublish (Docker 28's layout: raw drops of the
// container's address not from its bridge, some years; a DOCKER accept
// missing, as for a port published on another address).
func (g *iptGen) dockerPart(dockerUser bool) string {
	var pub []int
	for i := range iptPublish {
		if g.r.Intn(3) == 0 {
			pub = append(pub, i)
		}
	}
	var b strings.Builder
	if g.r.Intn(2) == 0 {
		fmt.Fprintf(&b, "*raw\n-A PREROUTING -d %s ! -i docker0 -j DROP\nCOMMIT\n", g.ctr)
	}
	b.WriteString("*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n")
	loop := "127.0.0.0/8"
	if g.v6 {
		loop = "::1/128"
	}
	fmt.Fprintf(&b, "-A OUTPUT ! -d %s -m addrtype --dst-type LOCAL -j DOCKER\n-A POSTROUTING -s %s ! -o docker0 -j MASQUERADE\n-A DOCKER -i docker0 -j RETURN\n", loop, g.ctrNet)
	to := func(p uint16) string {
		if g.v6 {
			return fmt.Sprintf("[%s]:%d", g.ctr, p)
		}
		return fmt.Sprintf("%s:%d", g.ctr, p)
	}
	for _, i := range pub {
		p := iptPublish[i]
		fmt.Fprintf(&b, "-A DOCKER ! -i docker0 -p %s -m %s --dport %d -j DNAT --to-destination %s\n", p.proto, p.proto, iptHostBase+p.port, to(p.port))
	}
	b.WriteString("COMMIT\n*filter\n:DOCKER - [0:0]\n:DOCKER-BRIDGE - [0:0]\n:DOCKER-CT - [0:0]\n:DOCKER-FORWARD - [0:0]\n:DOCKER-ISOLATION-STAGE-1 - [0:0]\n:DOCKER-ISOLATION-STAGE-2 - [0:0]\n")
	if !dockerUser {
		b.WriteString(":DOCKER-USER - [0:0]\n-A DOCKER-USER -j RETURN\n")
	}
	b.WriteString("-I FORWARD 1 -j DOCKER-USER\n-I FORWARD 2 -j DOCKER-FORWARD\n")
	for _, i := range pub {
		p := iptPublish[i]
		if g.r.Intn(6) > 0 {
			fmt.Fprintf(&b, "-A DOCKER -d %s ! -i docker0 -o docker0 -p %s -m %s --dport %d -j ACCEPT\n", g.ctr, p.proto, p.proto, p.port)
		}
	}
	b.WriteString(`-A DOCKER ! -i docker0 -o docker0 -j DROP
-A DOCKER-BRIDGE -o docker0 -j DOCKER
-A DOCKER-CT -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A DOCKER-FORWARD -j DOCKER-CT
-A DOCKER-FORWARD -j DOCKER-ISOLATION-STAGE-1
-A DOCKER-FORWARD -j DOCKER-BRIDGE
-A DOCKER-FORWARD -i docker0 -j ACCEPT
-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP
COMMIT
`)
	return b.String()
}

// iptFuzzRuleset generates one iptables-nft firewall for a node whose
// uplink and LAN interfaces are named uplink and lan.
func iptFuzzRuleset(r *rand.Rand, uplink, lan string) iptRuleset {
	var rs iptRuleset
	gens := [2]*iptGen{
		{r: r, uplink: uplink, lan: lan, pfx: "ufw-", ctr: fwtest.ContainerV4, ctrNet: "172.17.0.0/16", lanIP: fwtest.LanV4, lanNet: "192.168.77.0/24", vpnNet: "100.96.0.0/24",
			peerA: fwtest.PeerV4a, peerB: fwtest.PeerV4b, peerNet: "198.18.0.0/24", privNet: "10.0.0.0/8"},
		{r: r, v6: true, uplink: uplink, lan: lan, pfx: "ufw6-", ctr: fwtest.ContainerV6, ctrNet: "fd00:17::/64", lanIP: fwtest.LanV6, lanNet: "fd00:77::/64", vpnNet: "fd00:96::/64",
			peerA: fwtest.PeerV6a, peerB: fwtest.PeerV6b, peerNet: "fd00:f0::/64", privNet: "fd00::/8"},
	}
	// The ipsets ufw's rules match: an allow list and a blocklist per
	// family, each holding one peer address or none.
	for i, fam := range []string{"inet", "inet6"} {
		set := fmt.Sprintf("fz%d", i)
		rs.ipsets = append(rs.ipsets, []string{"create", set, "hash:net", "family", fam}, []string{"create", set + "bl", "hash:net", "family", fam})
		for _, s := range []string{set, set + "bl"} {
			if a := gens[i].pick("", gens[i].peerA, gens[i].peerB); a != "" {
				rs.ipsets = append(rs.ipsets, []string{"add", s, a})
			}
		}
	}
	dockerUser := r.Intn(3) == 0
	for i, g := range gens {
		rs.ufw[i] = g.ufwPart(dockerUser, fmt.Sprintf("fz%d", i))
		if i == 0 || r.Intn(2) == 0 { // Docker with IPv6 on, some years
			rs.docker[i] = g.dockerPart(dockerUser)
		}
	}
	return rs
}

// load puts rs in force in the node's namespace: the ipsets, ufw's part,
// then Docker's.
func (rs iptRuleset) load(t *testing.T, n *fwtest.TestNet) {
	t.Helper()
	// The last ruleset's sets go (its rules were flushed with it).
	n.Quiet(t, "sh", "-c", "ipset destroy 2>/dev/null || true")
	for _, s := range rs.ipsets {
		fwtest.Run(t, "", "ip", append([]string{"netns", "exec", n.Node, "ipset"}, s...)...)
	}
	for i, cmd := range []string{"iptables-nft-restore", "ip6tables-nft-restore"} {
		fwtest.Run(t, rs.ufw[i], "ip", "netns", "exec", n.Node, cmd)
	}
	rs.loadDocker(t, n)
}

// loadDocker adds Docker's part, as dockerd does at its start.
func (rs iptRuleset) loadDocker(t *testing.T, n *fwtest.TestNet) {
	t.Helper()
	for i, cmd := range []string{"iptables-nft-restore", "ip6tables-nft-restore"} {
		text := rs.docker[i]
		if text == "" {
			continue
		}
		// dockerd makes DOCKER-USER when ufw-docker's after.rules did not
		// (after the boot, ufw switched off).
		if !strings.Contains(n.Quiet(t, strings.TrimSuffix(cmd, "-nft-restore")+"-nft-save", "-t", "filter"), ":DOCKER-USER ") {
			text = strings.Replace(strings.Replace(text, "*filter\n", "*filter\n:DOCKER-USER - [0:0]\n", 1), "-I FORWARD 1 ", "-A DOCKER-USER -j RETURN\n-I FORWARD 1 ", 1)
		}
		fwtest.Run(t, text, "ip", "netns", "exec", n.Node, cmd, "--noflush")
	}
}

// iptFuzzFound are seeds whose rulesets found a fault of the preview or
// the flip once (a port open from fewer sources after, judged closing from
// all; the routed openings cut by different prefixes; forwarded ICMP to an
// address a raw drop names; a routed port open to a source the rest of the
// ports are not, carried with the rest's restriction; a batch larger than
// the netlink socket's send buffer; a container's ping out, masqueraded,
// which the probes did not recognise): every run without a seed of its own
// judges them too.
var iptFuzzFound = []int64{16, 18, 2020, 2043, 2070, 6046}

func TestKernelFlipDifferentialFuzzIptables(t *testing.T) {
	fwtest.RequireTools(t, "nft", "sysctl", "ipset", "iptables-nft-restore", "ip6tables-nft-restore")
	count, seed := envInt("ADOPT_FLIP_FUZZ_RULESETS", 6), int64(envInt("ADOPT_FLIP_FUZZ_SEED", 1))
	g := newFuzzRig(t, "fx-", "fx", "7f", true, iptHostPorts())
	n := g.n
	seeds := make([]int64, 0, count+len(iptFuzzFound))
	for i := range count {
		seeds = append(seeds, seed+int64(i))
	}
	if os.Getenv("ADOPT_FLIP_FUZZ_SEED") == "" {
		seeds = append(seeds, iptFuzzFound...)
	}
	var ft, bt fuzzTally
	start := time.Now()
	for i, s := range seeds {
		r := rand.New(rand.NewSource(s))
		gen := iptFuzzRuleset(r, g.uplink, g.lan)
		rs := gen.String()
		n.Quiet(t, "nft", "flush", "ruleset")
		gen.load(t, n)
		found := n.List(t)
		spec := g.fuzzSpec(r, found)
		before := g.send(t)
		p := PreviewFlipOn(found, g.node, spec)
		f := NewFlipper(n.Path(n.Node))
		plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
		if err != nil {
			t.Fatalf("seed %d: flip: %v\n%s", s, err, rs)
		}
		after := g.send(t)
		label := func(what string) string { return fmt.Sprintf("seed %d: %s", s, what) }
		g.judge(t, &ft, label, p, before, after, rs)
		if os.Getenv("ADOPT_FLIP_FUZZ_DEBUG") != "" {
			t.Logf("seed %d mesh table after the flip:\n%s", s, meshText(n.List(t)))
			for _, f := range p.Fates {
				t.Logf("seed %d fate: %s %s %s (%s)", s, f.Fate, f.Opening.Class, portSpec(f.Opening), describeOpening(f.Opening))
			}
		}
		// ufw's node has no /etc/nftables.conf of its own.
		if i%fuzzBootEvery != fuzzBootEvery-1 || !g.bootSample(t, &bt, label, f, plan, found, spec, "", func() { gen.loadDocker(t, n) }, p, before, rs) {
			if err := f.Revert(plan); err != nil {
				t.Fatalf("seed %d: revert: %v", s, err)
			}
		}
		ft.rulesets++
		if ft.rulesets%25 == 0 {
			t.Logf("%d of %d rulesets, %d mismatches so far, %s", ft.rulesets, len(seeds), ft.bad+bt.bad, time.Since(start).Round(time.Second))
		}
		if t.Failed() && ft.bad+bt.bad > envInt("ADOPT_FLIP_FUZZ_MAX_MISMATCHES", 20) {
			break
		}
	}
	name := "flip differential fuzz, iptables-nft"
	if len(seeds) > count {
		name += fmt.Sprintf(" (then seeds %v, which found faults once)", seeds[count:])
	}
	ft.report(name, seed, count, &bt, time.Since(start))
	if ft.kept == 0 || ft.closing == 0 {
		t.Errorf("%d kept and %d closing: the generator made nothing the test can judge", ft.kept, ft.closing)
	}
	ft.blind(t)
}
