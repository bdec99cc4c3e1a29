package flip

// A differential test against the kernel: rulesets generated from a
// grammar of what native nftables firewalls write (input and forward
// chains, policies, conntrack, port sets and ranges, named sets of ports
// and addresses, verdict maps named and inline, source allows and deny
// lists, input and output interfaces, ICMP by type and by protocol),
// on one topology (an uplink with a peer, a container bridge, a LAN
// behind a second interface). For each, TCP, UDP and ICMP probes from the
// peer to the node, routed to the container and the LAN, and echo
// requests forwarded both ways, are sent before and after a flip through
// the product's path, and each probe's fate in the preview is checked
// against what the kernel did: kept passes before and after, closing
// passes before only, widening passes after, no fate passes neither.
// Every fuzzBootEvery-th ruleset is committed and booted (fuzz_rig_kernel_test.go).
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
)

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
	// Named sets and maps, declared at the table's head once a rule names
	// them.
	var decls []string
	named := func(kind, typ, elems string) string {
		name := fmt.Sprintf("%s%d", kind, len(decls))
		flags := ""
		if strings.Contains(elems, "/") || (strings.Contains(elems, "-") && !strings.Contains(typ, ":")) {
			flags = " flags interval;"
		}
		decls = append(decls, fmt.Sprintf("\t%s %s { type %s;%s elements = { %s } }\n", kind, name, typ, flags, elems))
		return "@" + name
	}
	portSet := func() string {
		a, b := port(), port()
		if a == b {
			return fmt.Sprint(a)
		}
		return fmt.Sprintf("%d, %d", a, b)
	}
	// vmapElems maps one or two ports to verdicts (reject is a statement,
	// not a verdict a map can hold).
	vmapElems := func() string {
		v := func() string { return pick("accept", "accept", "drop") }
		a, b := port(), port()
		if a == b {
			return fmt.Sprintf("%d : %s", a, v())
		}
		return fmt.Sprintf("%d : %s, %d : %s", a, v(), b, v())
	}
	// setRule is a rule naming a named set or map, or a verdict map
	// written inline.
	setRule := func() string {
		switch r.Intn(4) {
		case 0:
			return fmt.Sprintf("%s dport %s accept", proto(), named("set", "inet_service", portSet()))
		case 1:
			return fmt.Sprintf("%s dport vmap %s", proto(), named("map", "inet_service : verdict", vmapElems()))
		case 2:
			return fmt.Sprintf("%s dport vmap { %s }", proto(), vmapElems())
		}
		if r.Intn(2) == 0 {
			return "ip saddr " + named("set", "ipv4_addr", pick(fwtest.PeerV4a, fwtest.PeerV4b, "198.18.0.0/24", fwtest.PeerV4a+", 10.0.0.0/8")) + " " + pick("drop", "accept")
		}
		return "ip6 saddr " + named("set", "ipv6_addr", pick(fwtest.PeerV6a, fwtest.PeerV6b, "fd00:f0::/64")) + " " + pick("drop", "accept")
	}
	var b strings.Builder
	b.WriteString("\tchain input {\n")
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
		switch r.Intn(14) {
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
		case 10, 11:
			b.WriteString("\t\t" + setRule() + "\n")
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
			switch r.Intn(9) {
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
			case 7:
				b.WriteString("\t\t" + setRule() + "\n")
			default:
				fmt.Fprintf(&b, "\t\tiifname %q %s dport %s accept\n", pick(uplink, lan), proto(), ports())
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return "table inet found {\n" + strings.Join(decls, "") + b.String()
}

func TestKernelFlipDifferentialFuzz(t *testing.T) {
	fwtest.RequireTools(t, "nft", "sysctl")
	count, seed := envInt("ADOPT_FLIP_FUZZ_RULESETS", 6), int64(envInt("ADOPT_FLIP_FUZZ_SEED", 1))
	g := newFuzzRig(t, "fz-", "fz", "7e", false, nil)
	n := g.n
	var ft, bt fuzzTally
	start := time.Now()
	for i := range count {
		r := rand.New(rand.NewSource(seed + int64(i)))
		rs := fuzzRuleset(r, g.uplink, g.lan)
		n.Quiet(t, "nft", "flush", "ruleset")
		fwtest.Run(t, rs, "ip", "netns", "exec", n.Node, "nft", "-f", "-")
		found := n.List(t)
		spec := g.fuzzSpec(r, found)
		before := g.send(t)
		p := PreviewFlipOn(found, g.node, spec)
		f := NewFlipper(n.Path(n.Node))
		plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
		if err != nil {
			t.Fatalf("seed %d: flip: %v\n%s", seed+int64(i), err, rs)
		}
		after := g.send(t)
		label := func(s string) string { return fmt.Sprintf("seed %d: %s", seed+int64(i), s) }
		g.judge(t, &ft, label, p, before, after, rs)
		if os.Getenv("ADOPT_FLIP_FUZZ_DEBUG") != "" {
			if d, err := DeriveFor(found, spec); err == nil {
				t.Logf("seed %d derived:\n%s", seed+int64(i), d.Text())
			}
			for _, f := range p.Fates {
				t.Logf("seed %d fate: %s %s %s (%s)", seed+int64(i), f.Fate, f.Opening.Class, portSpec(f.Opening), describeOpening(f.Opening))
			}
		}
		// A native firewall boots from /etc/nftables.conf: the ruleset.
		if i%fuzzBootEvery != fuzzBootEvery-1 || !g.bootSample(t, &bt, label, f, plan, found, spec, rs, nil, p, before, rs) {
			if err := f.Revert(plan); err != nil {
				t.Fatalf("seed %d: revert: %v", seed+int64(i), err)
			}
		}
		ft.rulesets++
		if ft.rulesets%25 == 0 {
			t.Logf("%d of %d rulesets, %d mismatches so far, %s", ft.rulesets, count, ft.bad+bt.bad, time.Since(start).Round(time.Second))
		}
		if t.Failed() && ft.bad+bt.bad > envInt("ADOPT_FLIP_FUZZ_MAX_MISMATCHES", 20) {
			break
		}
	}
	ft.report("flip differential fuzz", seed, count, &bt, time.Since(start))
	if ft.kept == 0 || ft.closing == 0 {
		t.Errorf("%d kept and %d closing: the generator made nothing the test can judge", ft.kept, ft.closing)
	}
	ft.blind(t)
}
