package flip

// What the differential fuzz tests against the kernel share
// (TestKernelFlipDifferentialFuzz, native rulesets;
// TestKernelFlipDifferentialFuzzIptables, ufw-shaped iptables-nft ones):
// the topology (an uplink with a peer, a container bridge, a LAN behind a
// second interface, optionally a VPN-like wg0 with a routed prefix), the
// probes sent before and after a flip, the check of each probe's fate in
// the preview against what the kernel did, the plan the flip is given,
// and the reboot sample: every fuzzBootEvery-th ruleset is committed and
// booted (the ruleset emptied, the boot file loaded, Docker's rules added
// again), and the kept regions must pass again; or the commit refuses
// naming what the boot would not load, which counts as an outcome too.

import (
	"fmt"
	"maps"
	"math/rand"
	"net/netip"
	"os"
	"slices"
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

// fuzzBootEvery: every so many rulesets one is committed and booted.
const fuzzBootEvery = 5

// fuzzTally counts probes by what the preview said and the kernel did.
type fuzzTally struct {
	rulesets, probes, passedBefore, passedAfter   int
	kept, closing, widening, uncertain, none, bad int
	// booted and refused count the reboot samples: committed and booted,
	// or refused at the commit naming what the boot would not load.
	booted, refused int
	// sent and passed count the probes of each kind ("egress ping ip6"),
	// and those that passed before or after (blind).
	sent, passed map[string]int
}

// blindAfter is the number of rulesets after which every kind of probe
// must have passed at least once, before or after a flip: a kind that
// never does is one the oracle may not see pass (as a container's ping
// out was, masqueraded to the node's address), whose fates no run judges.
// A long run's (make fuzz): the rarest kind, a ping routed to an IPv4
// container, passed in 1 of 20 iptables-nft rulesets.
const blindAfter = 100

// blind fails the test for every kind of probe sent that never passed,
// once the run has judged blindAfter rulesets.
func (ft *fuzzTally) blind(t *testing.T) {
	t.Helper()
	if ft.rulesets < blindAfter {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(ft.sent)) {
		if ft.passed[k] == 0 {
			t.Errorf("no %s probe passed, before or after a flip, of %d sent over %d rulesets: the oracle may not see them pass", k, ft.sent[k], ft.rulesets)
		}
	}
}

// check checks one probe's fate against the kernel, counting it.
func (ft *fuzzTally) check(t *testing.T, kind, what string, b, a bool, fate *Fate, ruleset string) {
	t.Helper()
	if ft.sent == nil {
		ft.sent, ft.passed = map[string]int{}, map[string]int{}
	}
	ft.sent[kind]++
	if b || a {
		ft.passed[kind]++
	}
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

// report prints the tally of a run of name from seed, and of its boots.
func (ft *fuzzTally) report(name string, seed int64, count int, boot *fuzzTally, took time.Duration) {
	fmt.Printf("%s: %d rulesets (seeds %d..%d), %d probes sent before and after (%d packets), %d passed before, %d pass after; fates: %d kept, %d closing, %d widening, %d uncertain, %d none; %d mismatches; %s\n",
		name, ft.rulesets, seed, seed+int64(count)-1, ft.probes, 2*ft.probes, ft.passedBefore, ft.passedAfter, ft.kept, ft.closing, ft.widening, ft.uncertain, ft.none, ft.bad, took.Round(time.Millisecond))
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(ft.sent)) {
		kinds = append(kinds, fmt.Sprintf("%s %d of %d", k, ft.passed[k], ft.sent[k]))
	}
	fmt.Printf("%s, probes that passed before or after, by kind: %s\n", name, strings.Join(kinds, "; "))
	fmt.Printf("%s, reboot sample (every %dth ruleset): %d committed and booted, %d refused at the commit naming what the boot would not load; %d probes after the boot, %d pass; fates: %d kept, %d closing, %d widening, %d uncertain, %d none; %d mismatches\n",
		name, fuzzBootEvery, boot.booted, boot.refused, boot.probes, boot.passedAfter, boot.kept, boot.closing, boot.widening, boot.uncertain, boot.none, boot.bad)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// fuzzRig is the topology and the probes of a differential fuzz.
type fuzzRig struct {
	n                           *fwtest.TestNet
	ctr, lanHost, lan, uplink   string
	node                        firewall.Node
	probes                      []fwtest.Probe
	dnat                        map[fwtest.Probe]bool // probes to a host port a ruleset may DNAT
	pings, routedPings, outPing []fwtest.ClassProbe
}

// fuzzReach is what passed of a rig's probes.
type fuzzReach struct {
	ports                 map[fwtest.Probe]bool
	pings, routed, egress map[fwtest.ClassProbe]bool
}

// newFuzzRig builds the topology (namespace names from prefix, dev and
// octet as fwtest.NewNamedNet); vpn adds wg0 with its routed prefix, and
// hostPorts are host ports the rulesets may DNAT (the node serves them
// too, so a port not DNAT'd is the input chain's to decide).
func newFuzzRig(t *testing.T, prefix, dev, octet string, vpn bool, hostPorts []uint16) *fuzzRig {
	t.Helper()
	g := &fuzzRig{n: fwtest.NewNamedNet(t, prefix, dev, octet), dnat: map[fwtest.Probe]bool{}}
	n := g.n
	g.uplink = uplinkOf(t, n) // the only veth yet
	g.ctr = n.Container(t)
	g.lanHost, g.lan = n.Lan(t)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "route", "add", "172.17.0.0/16", "via", fwtest.NodeV4)
	fwtest.Run(t, "", "ip", "-n", n.Peer, "-6", "route", "add", "fd00:17::/64", "via", fwtest.NodeV6)
	dsts := [][2]string{{"", ""}, {fwtest.ContainerV4, fwtest.ContainerV6}, {fwtest.LanV4, fwtest.LanV6}}
	if vpn {
		host := n.Vpn(t)
		fwtest.ServeIn(t, host, fuzzPorts)
		dsts = append(dsts, [2]string{fwtest.VpnV4, fwtest.VpnV6})
	}
	n.Serve(t, append(append([]uint16(nil), fuzzPorts...), hostPorts...))
	fwtest.ServeIn(t, g.ctr, fuzzPorts)
	fwtest.ServeIn(t, g.lanHost, fuzzPorts)
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	g.node = node
	for _, s := range []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b} {
		v6 := strings.Contains(s, ":")
		for _, d := range dsts {
			dst := d[0]
			if v6 {
				dst = d[1]
			}
			for _, p := range fuzzPorts {
				for _, proto := range []string{"tcp", "udp"} {
					g.probes = append(g.probes, fwtest.Probe{Proto: proto, Src: s, Port: p, Dst: dst})
				}
			}
		}
		for _, p := range hostPorts {
			for _, proto := range []string{"tcp", "udp"} {
				pr := fwtest.Probe{Proto: proto, Src: s, Port: p}
				g.probes = append(g.probes, pr)
				g.dnat[pr] = true
			}
		}
	}
	g.pings = fwtest.RegionProbes([]string{"ip icmp type 8 to node", "ip6 icmpv6 type 128 to node"}, []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b})
	g.routedPings = []fwtest.ClassProbe{
		{Name: "ip icmp type 8 to 172.17.0.0/16", Src: fwtest.PeerV4a, Dst: fwtest.ContainerV4, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128 to fd00:17::/64", Src: fwtest.PeerV6a, Dst: fwtest.ContainerV6, Proto: 58, Type: 128},
	}
	g.outPing = []fwtest.ClassProbe{
		{Name: "ip icmp type 8", Src: fwtest.ContainerV4, Dst: fwtest.PeerV4a, Proto: 1, Type: 8},
		{Name: "ip6 icmpv6 type 128", Src: fwtest.ContainerV6, Dst: fwtest.PeerV6a, Proto: 58, Type: 128},
	}
	return g
}

// send sends every probe, each new to conntrack.
func (g *fuzzRig) send(t *testing.T) fuzzReach {
	t.Helper()
	// A source port picked again must not meet the entry an earlier probe
	// left.
	fwtest.FlushConntrack(t, g.n.Node)
	return fuzzReach{g.n.Reach(t, g.probes), g.n.ClassReach(t, g.pings),
		fwtest.ClassReachTo(t, g.n.Peer, g.ctr, g.routedPings), fwtest.ClassReachTo(t, g.ctr, g.n.Peer, g.outPing)}
}

// judge checks every probe's fate in p against what passed before and
// after, counting into ft.
func (g *fuzzRig) judge(t *testing.T, ft *fuzzTally, label func(string) string, p Preview, before, after fuzzReach, rs string) {
	t.Helper()
	for _, pr := range g.probes {
		var fate *Fate
		switch {
		case g.dnat[pr]:
			if fate = dnatFate(p, pr); fate == nil {
				fate = probeFate(p, pr)
			}
		case pr.Dst == "":
			fate = probeFate(p, pr)
		default:
			fate = routedFate(p, pr)
			// A closed region has no fate: where a rule singles out the
			// probe's address inside the network (Docker 28's raw drop of
			// the container's), the network's fate is what the lookup
			// finds; closed before and after, that region is not judged,
			// as for a source singled out (check).
			fate = closedInside(fate, before.ports[pr], after.ports[pr])
		}
		ft.check(t, "port "+pr.Family(), label(pr.String()), before.ports[pr], after.ports[pr], fate, rs)
	}
	for _, pr := range g.pings {
		ft.check(t, "ping "+classFamily(pr), label(pr.String()), before.pings[pr], after.pings[pr], classFateOf(p, pr), rs)
	}
	for _, pr := range g.routedPings {
		fate := closedInside(fwdICMPFate(p, pr, ""), before.routed[pr], after.routed[pr])
		ft.check(t, "routed ping "+classFamily(pr), label(pr.String()), before.routed[pr], after.routed[pr], fate, rs)
	}
	for _, pr := range g.outPing {
		ft.check(t, "egress ping "+classFamily(pr), label(pr.String()), before.egress[pr], after.egress[pr], fwdICMPFate(p, pr, "docker0"), rs)
	}
}

// classFamily is the family of class probe p, by its source.
func classFamily(p fwtest.ClassProbe) string {
	if strings.Contains(p.Src, ":") {
		return firewall.FamilyIP6
	}
	return firewall.FamilyIP
}

// closedInside is the routed fate f of a probe that passed before (b) and
// after (a), or nil when the probe is closed both times inside the wider
// network f names: a rule singled its address out (Docker 28's raw drop of
// the container's), its own region is closed and has no fate, and the
// lookup found the network's.
func closedInside(f *Fate, b, a bool) *Fate {
	if via, err := netip.ParsePrefix(viaOf(f)); err == nil && !b && !a && via.Bits() < via.Addr().BitLen() {
		return nil
	}
	return f
}

func viaOf(f *Fate) string {
	if f == nil {
		return ""
	}
	return f.Opening.Via
}

// dnatFate is the preview's fate for a probe to a host port: the forward
// opening of a DNAT (Via a target, not a network) of its family, proto
// and port whose source region holds its source, the most specific one.
func dnatFate(p Preview, pr fwtest.Probe) *Fate {
	return mostSpecific(p, netip.MustParseAddr(pr.Src), func(o firewall.Opening) bool {
		return o.Direction == firewall.HookForward && o.Class == "" && o.In == "" && o.Family == pr.Family() && o.Proto == pr.Proto &&
			pr.Port >= o.Port && pr.Port <= firewall.PortEnd(o) && o.Via != "" && !strings.Contains(o.Via, "/")
	})
}

// fuzzSpec is the plan a flip is given: ssh, about half of what found
// opens to the node by port, and about half of the host ports it
// publishes through a DNAT.
func (g *fuzzRig) fuzzSpec(r *rand.Rand, found *firewall.Ruleset) MeshSpec {
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	seen := map[config.Port]bool{{Num: 22, Proto: "tcp"}: true}
	fwd := map[config.Port]bool{}
	for _, o := range eval.OpenPortsOn(found, g.node) {
		p := config.Port{Num: o.Port, Proto: o.Proto}
		single := o.Class == "" && o.In == "" && o.Port != 0 && firewall.PortEnd(o) == o.Port
		switch {
		case o.Direction == firewall.HookInput && single && !seen[p] && r.Intn(2) == 0:
			seen[p] = true
			spec.Input = append(spec.Input, allow("web", p.String())...)
		case o.Direction == firewall.HookForward && single && o.Via != "" && !strings.Contains(o.Via, "/") && !fwd[p] && r.Intn(2) == 0:
			fwd[p] = true
			spec.Forward = append(spec.Forward, allow("web", p.String())...)
		}
	}
	return spec
}

// bootSample commits the flip of plan (found: the ruleset before it,
// foundConf: the node's /etc/nftables.conf, "" for none) and boots: the
// ruleset emptied, the boot file the commit writes loaded, then reload
// (what starts after nftables.service: Docker adding its rules). The
// probes after the boot are judged against before by p's fates into bt.
// When the boot would not load something the flip keeps in force, the
// commit refuses naming it (flip.Unbooted, which the commit's boot path
// checks): counted, nothing committed, and it reports false.
func (g *fuzzRig) bootSample(t *testing.T, bt *fuzzTally, label func(string) string, f *Flipper, plan *RevertPlan, found *firewall.Ruleset, spec MeshSpec, foundConf string, reload func(), p Preview, before fuzzReach, rs string) bool {
	t.Helper()
	inForce := g.n.List(t)
	tables, rules, err := Unbooted(inForce, foundConf, plan, &g.node)
	if err != nil {
		t.Fatalf("%s: %v", label("unbooted"), err)
	}
	if len(tables)+len(rules) > 0 {
		bt.refused++
		t.Logf("%s: the commit refuses: the boot would not load %v %v", label("boot"), tables, rules)
		return false
	}
	if _, err := f.Commit(plan); err != nil {
		t.Fatalf("%s: %v\n%s", label("commit"), err, rs)
	}
	text, _, err := BootFile(EffectiveSpec(found, spec), "fuzz boot", foundConf, plan, g.n.List(t))
	if err != nil {
		t.Fatalf("%s: %v\n%s", label("boot file"), err, rs)
	}
	g.n.Nft(t, "flush ruleset\n")
	g.n.Nft(t, text)
	if reload != nil {
		reload()
	}
	booted := g.send(t)
	bt.booted++
	g.judge(t, bt, func(s string) string { return label("after the boot: " + s) }, p, before, booted, rs+"\nboot file:\n"+text)
	return true
}
