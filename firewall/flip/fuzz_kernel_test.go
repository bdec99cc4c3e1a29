package flip

// A differential test against the kernel: rulesets generated from a
// grammar of what native nftables firewalls write (input and forward
// chains, policies, conntrack, port sets and ranges, source allows and
// deny lists, input and output interfaces, ICMP by type and by protocol),
// on one topology (an uplink with a peer, a container bridge, a LAN
// behind a second interface). For each, TCP, UDP and ICMP probes from the
// peer to the node, routed to the container and the LAN, and echo
// requests forwarded both ways, are sent before and after a flip through
// the product's path, and each probe's fate in the preview is checked
// against what the kernel did: kept passes before and after, closing
// passes before only, widening passes after, no fate passes neither.
//
// ADOPT_FLIP_FUZZ_RULESETS sets how many rulesets (make test: the default,
// make fuzz: 500), ADOPT_FLIP_FUZZ_SEED the first seed.

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// fuzzPorts are the ports the generated rules name and the probes try.
var fuzzPorts = []uint16{22, 53, 80, 443, 5432, 6379, 8080, 9000, 9001}

// fuzzRuleset writes one generated native ruleset: table inet found with
// an input chain and (mostly) a forward chain.
func fuzzRuleset(r *rand.Rand, uplink, lan string) string {
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	port := func() uint16 { return fuzzPorts[r.Intn(len(fuzzPorts))] }
	proto := func() string { return pick("tcp", "udp") }
	ports := func() string {
		switch r.Intn(4) {
		case 0:
			a, b := port(), port()
			if a == b {
				return fmt.Sprint(a)
			}
			return fmt.Sprintf("{ %d, %d }", a, b)
		case 1:
			a := port()
			return fmt.Sprintf("%d-%d", a, a+uint16(r.Intn(3)))
		}
		return fmt.Sprint(port())
	}
	src := func(v6 bool) string {
		if v6 {
			return "ip6 saddr " + pick(fwtest.PeerV6a, fwtest.PeerV6b, "fd00:f0::/64")
		}
		return "ip saddr " + pick(fwtest.PeerV4a, fwtest.PeerV4b, "198.18.0.0/24", "10.0.0.0/8")
	}
	verdict := func() string { return pick("accept", "accept", "accept", "drop", "reject") }
	var b strings.Builder
	b.WriteString("table inet found {\n\tchain input {\n")
	fmt.Fprintf(&b, "\t\ttype filter hook input priority filter; policy %s;\n", pick("drop", "drop", "accept"))
	if r.Intn(5) > 0 {
		b.WriteString("\t\tct state established,related accept\n")
	}
	if r.Intn(2) == 0 {
		b.WriteString("\t\tiifname \"lo\" accept\n")
	}
	if r.Intn(3) == 0 {
		b.WriteString("\t\tct state invalid drop\n")
	}
	b.WriteString("\t\ttcp dport 22 accept\n")
	for range 2 + r.Intn(7) {
		switch r.Intn(12) {
		case 0, 1:
			fmt.Fprintf(&b, "\t\t%s dport %s %s\n", proto(), ports(), verdict())
		case 2:
			fmt.Fprintf(&b, "\t\t%s %s dport %s accept\n", src(r.Intn(2) == 0), proto(), ports())
		case 3:
			fmt.Fprintf(&b, "\t\t%s drop\n", src(r.Intn(2) == 0))
		case 4:
			fmt.Fprintf(&b, "\t\tiifname %q %s dport %s accept\n", pick("docker0", uplink, lan, "br-*"), proto(), ports())
		case 5:
			fmt.Fprintf(&b, "\t\tmeta l4proto { tcp, udp } th dport %s accept\n", ports())
		case 6:
			b.WriteString("\t\t" + pick("meta l4proto icmp accept", "icmp type echo-request accept", "icmpv6 type echo-request accept", "meta l4proto ipv6-icmp accept") + "\n")
		case 7:
			fmt.Fprintf(&b, "\t\tiifname != %q %s dport %s accept\n", pick("docker0", uplink), proto(), ports())
		case 8:
			fmt.Fprintf(&b, "\t\tmeta nfproto %s %s dport %s accept\n", pick("ipv4", "ipv6"), proto(), ports())
		case 9:
			fmt.Fprintf(&b, "\t\t%s %s dport %s drop\n", src(r.Intn(2) == 0), proto(), ports())
		default:
			fmt.Fprintf(&b, "\t\t%s dport %s accept\n", proto(), ports())
		}
	}
	b.WriteString("\t}\n")
	if r.Intn(4) > 0 {
		b.WriteString("\tchain forward {\n")
		fmt.Fprintf(&b, "\t\ttype filter hook forward priority filter; policy %s;\n", pick("drop", "drop", "accept"))
		// Replies pass, as every forwarding firewall has it: the probes
		// need the reply, and the preview judges a conversation's first
		// packet.
		b.WriteString("\t\tct state established,related accept\n")
		for range 1 + r.Intn(5) {
			switch r.Intn(8) {
			case 0, 1:
				fmt.Fprintf(&b, "\t\t%s dport %s %s\n", proto(), ports(), verdict())
			case 2:
				fmt.Fprintf(&b, "\t\t%s %s dport %s accept\n", src(r.Intn(2) == 0), proto(), ports())
			case 3:
				fmt.Fprintf(&b, "\t\tiifname \"docker0\" %s\n", pick("accept", "oifname != \"docker0\" accept"))
			case 4:
				b.WriteString("\t\t" + pick("icmp type echo-request accept", "icmpv6 type echo-request accept", "meta l4proto icmp accept") + "\n")
			case 5:
				fmt.Fprintf(&b, "\t\tip daddr %s %s dport %s accept\n", pick("172.17.0.0/16", "192.168.77.0/24"), proto(), ports())
			case 6:
				fmt.Fprintf(&b, "\t\toifname %q %s dport %s accept\n", pick("docker0", lan), proto(), ports())
			default:
				fmt.Fprintf(&b, "\t\tiifname %q %s dport %s accept\n", pick(uplink, lan), proto(), ports())
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// fuzzTally counts probes by what the preview said and the kernel did.
type fuzzTally struct {
	rulesets, probes, passedBefore, passedAfter   int
	kept, closing, widening, uncertain, none, bad int
}

// fuzzCheck checks one probe's fate against the kernel, counting it.
func (ft *fuzzTally) check(t *testing.T, what string, b, a bool, fate *Fate, ruleset string) {
	t.Helper()
	ft.probes++
	ft.passedBefore += btoi(b)
	ft.passedAfter += btoi(a)
	ok := true
	switch {
	case fate == nil || (fate.Opening.From == "" && !b && !a):
		// No fate; or one for any source the rulesets do not single out,
		// where this source is singled out (a deny list): its region is
		// closed before and after, and closed regions have no fate.
		ft.none++
		ok = !b && !a
	case fate.Fate == FateUncertain || fate.Opening.Uncertain:
		// Only under a condition the evaluator cannot decide: either
		// outcome is the preview's.
		ft.uncertain++
	case fate.Fate == FateKept:
		ft.kept++
		ok = b && a
	case fate.Fate == FateClosing:
		ft.closing++
		ok = b && !a
	case fate.Fate == FateWidening:
		ft.widening++
		ok = a
	}
	if !ok {
		ft.bad++
		f := "none"
		if fate != nil {
			f = fate.Fate + " (" + describeOpening(fate.Opening) + ")"
		}
		t.Errorf("%s: passed before %v, after %v; the preview's fate: %s; ruleset:\n%s", what, b, a, f, ruleset)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func TestKernelFlipDifferentialFuzz(t *testing.T) {
	fwtest.RequireTools(t, "nft", "sysctl")
	count, seed := envInt("ADOPT_FLIP_FUZZ_RULESETS", 6), int64(envInt("ADOPT_FLIP_FUZZ_SEED", 1))
	n := fwtest.NewNamedNet(t, "fz-", "fz", "7e")
	ctr := n.Container(t)
	lanHost, lan := n.Lan(t)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "route", "add", "172.17.0.0/16", "via", fwtest.NodeV4)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", "fd00:17::/64", "via", fwtest.NodeV6)
	uplink := uplinkOf(t, n)
	n.Serve(t, fuzzPorts)
	fwtest.ServeIn(t, ctr, fuzzPorts)
	fwtest.ServeIn(t, lanHost, fuzzPorts)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	var probes []fwtest.Probe
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		v6 := strings.Contains(s, ":")
		for _, dst := range []string{"", fwtest.ContainerV4, fwtest.LanV4} {
			if v6 && dst != "" {
				dst = map[string]string{fwtest.ContainerV4: fwtest.ContainerV6, fwtest.LanV4: fwtest.LanV6}[dst]
			}
			for _, p := range fuzzPorts {
				for _, proto := range []string{"tcp", "udp"} {
					probes = append(probes, fwtest.Probe{Proto: proto, Src: s, Port: p, Dst: dst})
				}
			}
		}
	}
	pings := fwtest.RegionProbes([]string{"ip icmp type 8 to node", "ip6 icmpv6 type 128 to node"}, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b})
	routedPings := []fwtest.ClassProbe{
		{Name: "ip icmp type 8 to 172.17.0.0/16", Src: fwtest.PeerV4a, Dst: fwtest.ContainerV4, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128 to fd00:17::/64", Src: fwtest.PeerV6a, Dst: fwtest.ContainerV6, Proto: 58, Type: 128},
	}
	outPings := []fwtest.ClassProbe{
		{Name: "ip icmp type 8", Src: fwtest.ContainerV4, Dst: fwtest.PeerV4a, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128", Src: fwtest.ContainerV6, Dst: fwtest.PeerV6a, Proto: 58, Type: 128},
	}
	type reach struct {
		ports                 map[fwtest.Probe]bool
		pings, routed, egress map[fwtest.ClassProbe]bool
	}
	send := func() reach {
		// Every probe new to conntrack: a source port picked again must
		// not meet the entry an earlier probe left.
		fwtest.FlushConntrack(t, n.Node)
		return reach{n.Reach(t, probes), n.ClassReach(t, pings), fwtest.ClassReachTo(t, n.Peer, ctr, routedPings), fwtest.ClassReachTo(t, ctr, n.Peer, outPings)}
	}
	var ft fuzzTally
	start := time.Now()
	for i := range count {
		r := rand.New(rand.NewSource(seed + int64(i)))
		rs := fuzzRuleset(r, uplink, lan)
		n.Quiet(t, "nft", "flush", "ruleset")
		fwtest.Run(t, rs, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
		found := n.List(t)
		// The plan keeps ssh and about half of what found opens by port.
		spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
		seen := map[config.Port]bool{{Num: 22, Proto: "tcp"}: true}
		for _, o := range eval.OpenPortsOn(found, node) {
			p := config.Port{Num: o.Port, Proto: o.Proto}
			if o.Direction == firewall.HookInput && o.Class == "" && o.In == "" && o.Port != 0 && firewall.PortEnd(o) == o.Port && !seen[p] && r.Intn(2) == 0 {
				seen[p] = true
				spec.Input = append(spec.Input, allow("web", p.String())...)
			}
		}
		before := send()
		p := PreviewFlipOn(found, node, spec)
		f := NewFlipper(n.Path(n.Node))
		plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
		if err != nil {
			t.Fatalf("seed %d: flip: %v\n%s", seed+int64(i), err, rs)
		}
		after := send()
		label := func(s string) string { return fmt.Sprintf("seed %d: %s", seed+int64(i), s) }
		for _, pr := range probes {
			var fate *Fate
			if pr.Dst == "" {
				fate = probeFate(p, pr)
			} else {
				fate = routedFate(p, pr)
			}
			ft.check(t, label(pr.String()), before.ports[pr], after.ports[pr], fate, rs)
		}
		for _, pr := range pings {
			ft.check(t, label(pr.String()), before.pings[pr], after.pings[pr], classFateOf(p, pr), rs)
		}
		for _, pr := range routedPings {
			ft.check(t, label(pr.String()), before.routed[pr], after.routed[pr], fwdICMPFate(p, pr, ""), rs)
		}
		for _, pr := range outPings {
			ft.check(t, label(pr.String()), before.egress[pr], after.egress[pr], fwdICMPFate(p, pr, "docker0"), rs)
		}
		if err := f.Revert(plan); err != nil {
			t.Fatalf("seed %d: revert: %v", seed+int64(i), err)
		}
		if os.Getenv("ADOPT_FLIP_FUZZ_DEBUG") != "" {
			if d, err := DeriveFor(found, spec); err == nil {
				t.Logf("seed %d derived:\n%s", seed+int64(i), d.Text())
			}
			for _, f := range p.Fates {
				t.Logf("seed %d fate: %s %s %s (%s)", seed+int64(i), f.Fate, f.Opening.Class, portSpec(f.Opening), describeOpening(f.Opening))
			}
		}
		ft.rulesets++
		if ft.rulesets%25 == 0 {
			t.Logf("%d of %d rulesets, %d mismatches so far, %s", ft.rulesets, count, ft.bad, time.Since(start).Round(time.Second))
		}
		if t.Failed() && ft.bad > 20 {
			break
		}
	}
	fmt.Printf("flip differential fuzz: %d rulesets (seeds %d..%d), %d probes sent before and after (%d packets), %d passed before, %d pass after; fates: %d kept, %d closing, %d widening, %d uncertain, %d none; %d mismatches; %s\n",
		ft.rulesets, seed, seed+int64(count)-1, ft.probes, 2*ft.probes, ft.passedBefore, ft.passedAfter, ft.kept, ft.closing, ft.widening, ft.uncertain, ft.none, ft.bad, time.Since(start).Round(time.Millisecond))
	if ft.kept == 0 || ft.closing == 0 {
		t.Errorf("%d kept and %d closing: the generator made nothing the test can judge", ft.kept, ft.closing)
	}
}
