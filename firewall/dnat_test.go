package firewall

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"
)

// The evaluator through DNAT on rulesets from testdata/dnat: listings of
// real namespaces (TestKernelDNATUfwDocker writes them with
// FW_SAVE_FIXTURES=1), with the node's interfaces and forwarding as read.

func TestDNATUfwDockerByHostPort(t *testing.T) {
	rs, node := loadFixture(t, "ufw-docker")
	open := OpenPortsOn(rs, node)
	// Published and routed: open to anyone, by the host port, with the
	// container behind it.
	for _, w := range []Opening{
		{Port: 18080, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8080"},
		{Port: 18083, Proto: "tcp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8083"},
		{Port: 18053, Proto: "udp", Direction: HookForward, Family: FamilyIP, Via: "172.17.0.2:8053"},
		{Port: 18080, Proto: "tcp", Direction: HookForward, Family: FamilyIP6, Via: "[fd00:17::2]:8080"},
		{Port: 18081, Proto: "tcp", Direction: HookForward, Family: FamilyIP, From: "198.18.0.3/32", Via: "172.17.0.2:8081"},
		{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP},
	} {
		assertOpen(t, open, w)
	}
	for _, o := range open {
		if o.Uncertain {
			t.Errorf("uncertain opening %+v", o)
		}
		// Container ports are never what a client uses.
		if p := o.Port; p >= 8000 && p <= 9200 {
			t.Errorf("opening by container port: %+v", o)
		}
	}
	// Published but not routed: closed to the public. ufw-docker lets
	// private sources through (they return before its drops), and the
	// evaluator names exactly those.
	for _, p := range []uint16{18082, 19100} {
		for _, o := range find(open, HookForward, FamilyIP, "tcp", p) {
			if o.From == "" || !strings.HasPrefix(o.From, "10.") && !strings.HasPrefix(o.From, "172.16.") && !strings.HasPrefix(o.From, "192.168.") {
				t.Errorf("%d/tcp: unrouted published port open to %q: %+v", p, o.From, o)
			}
		}
	}
	if got := find(open, HookForward, FamilyIP6, "tcp", 18082); len(got) != 0 {
		t.Errorf("18082/tcp ip6 unrouted, reported open: %+v", got)
	}
}

func TestDNATNotForwarding(t *testing.T) {
	rs, node := loadFixture(t, "ufw-docker")
	node.Forwarding = map[string]bool{FamilyIP: false, FamilyIP6: false}
	for _, o := range OpenPortsOn(rs, node) {
		if o.Direction == HookForward {
			t.Errorf("forward opening on a node that does not forward: %+v", o)
		}
	}
	// Forwarding not known: taken as on (a port counted open is never
	// silently closed).
	node.Forwarding = nil
	if len(find(OpenPortsOn(rs, node), HookForward, FamilyIP, "tcp", 18080)) == 0 {
		t.Error("18080/tcp not open with forwarding unknown")
	}
}

func TestDNATUnmappableTargetIsUncertainWithReason(t *testing.T) {
	rs, node := loadFixture(t, "ufw-docker")
	var ifs []Interface
	for _, i := range node.Interfaces {
		if i.Name != "docker0" {
			ifs = append(ifs, i)
		}
	}
	node.Interfaces = ifs
	got := find(OpenPortsOn(rs, node), HookForward, FamilyIP, "tcp", 18080)
	if len(got) == 0 {
		t.Fatal("18080/tcp: no opening at all; want it uncertain")
	}
	for _, o := range got {
		if !o.Uncertain || !strings.Contains(o.Reason, "172.17.0.2 is on none of the node's networks") {
			t.Errorf("18080/tcp: %+v; want uncertain naming the unmapped target", o)
		}
	}
}

func TestDNATInterfacesDecided(t *testing.T) {
	rs, node := loadFixture(t, "ufw-docker")
	// Known interfaces: Docker's "-i docker0 -j RETURN" and "! -i docker0"
	// are decided for a client on the uplink.
	for _, o := range OpenPortsOn(rs, node) {
		if o.Uncertain {
			t.Errorf("uncertain with known interfaces: %+v", o)
		}
	}
	// Two uplinks, only one named: "iifname eth0" is then undecided.
	n2 := Node{Interfaces: []Interface{{Name: "eth0"}, {Name: "wg0", Kind: "wireguard"}, {Name: "docker0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16")}}}}
	p := packet{hook: HookInput, family: FamilyIP, node: &n2}
	if got := p.cond(&Cond{Kind: CondIifname, Names: []string{"eth0"}}); got != triUnknown {
		t.Errorf("iifname eth0 with uplinks eth0, wg0: %v, want unknown", got)
	}
	if got := p.cond(&Cond{Kind: CondIifname, Names: []string{"docker0"}}); got != triFalse {
		t.Errorf("iifname docker0: %v, want false", got)
	}
	if got := p.cond(&Cond{Kind: CondIifname, Names: []string{"eth*", "wg*"}}); got != triTrue {
		t.Errorf("iifname {eth*, wg*}: %v, want true", got)
	}
	p.hook, p.oif = HookForward, "docker0"
	if got := p.cond(&Cond{Kind: CondOifname, Names: []string{"br-*"}}); got != triFalse {
		t.Errorf("oifname br-* out of docker0: %v, want false", got)
	}
}

func TestDNATConntrackBits(t *testing.T) {
	p := packet{hook: HookForward, family: FamilyIP, port: 8080, origPort: 18080, dnat: true}
	for _, c := range []struct {
		cond Cond
		want tri
	}{
		{Cond{Kind: CondCtState, Bits: ctStateDNAT}, triTrue},
		{Cond{Kind: CondCtState, Bits: ctStateSNAT}, triFalse},
		{Cond{Kind: CondCtState, Bits: ctStateNew}, triTrue},
		{Cond{Kind: CondCtStatus, Bits: ipsDstNAT}, triTrue},
		{Cond{Kind: CondCtStatus, Bits: ipsSrcNAT | ipsSeenReply}, triFalse},
		{Cond{Kind: CondCtStatus, Bits: 1 << 9}, triUnknown}, // a bit the evaluator does not model
		{Cond{Kind: CondOrigDport, Ports: []PortRange{{18080, 18080}}}, triTrue},
		{Cond{Kind: CondDport, Ports: []PortRange{{18080, 18080}}}, triFalse},
	} {
		if got := p.cond(&c.cond); got != c.want {
			t.Errorf("%s on a DNATed packet: %v, want %v", renderCond(&c.cond), got, c.want)
		}
	}
	p.dnat = false
	if got := p.cond(&Cond{Kind: CondCtState, Bits: ctStateDNAT}); got != triFalse {
		t.Errorf("ctstate DNAT on a packet that was not DNATed: %v", got)
	}
}

func TestDecodeNATTargets(t *testing.T) {
	d := decoder{family: FamilyIP, sets: map[string]*Set{}, setsKnown: true}
	r := d.rule(&nftables.Rule{Exprs: []expr.Any{
		&expr.Immediate{Register: 1, Data: []byte{172, 17, 0, 3}},
		&expr.Immediate{Register: 2, Data: []byte{0x23, 0x28}},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1, RegProtoMin: 2, RegProtoMax: 2, Specified: true},
	}})
	if r.Verdict.Kind != VerdictDNAT || r.Verdict.NAT == nil || r.Verdict.NAT.Addr != netip.MustParseAddr("172.17.0.3") || r.Verdict.NAT.PortMin != 9000 {
		t.Errorf("native dnat: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
	// The address from something the decoder cannot read: named, not guessed.
	r = d.rule(&nftables.Rule{Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}})
	if r.Verdict.NAT == nil || r.Verdict.NAT.Unknown == "" {
		t.Errorf("dnat to a register the decoder cannot read: %+v", r.Verdict.NAT)
	}
	r = d.rule(&nftables.Rule{Exprs: []expr.Any{&expr.Target{Name: "DNAT", Rev: 2, Info: &xt.NatRange2{NatRange: xt.NatRange{
		Flags: uint(xt.NatRangeMapIPs | xt.NatRangeProtoSpecified), MinIP: net.ParseIP("172.17.0.2").To4(), MaxIP: net.ParseIP("172.17.0.2").To4(), MinPort: 8080, MaxPort: 8080}}}}})
	if r.Verdict.Kind != VerdictDNAT || r.Verdict.NAT.Addr != netip.MustParseAddr("172.17.0.2") || r.Verdict.NAT.PortMin != 8080 {
		t.Errorf("xt DNAT: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
	r = d.rule(&nftables.Rule{Exprs: []expr.Any{&expr.Target{Name: "REDIRECT", Rev: 0, Info: &xt.NatIPv4MultiRangeCompat{{Flags: uint(xt.NatRangeProtoSpecified), MinPort: 3128, MaxPort: 3128}}}}})
	if r.Verdict.Kind != VerdictDNAT || !r.Verdict.NAT.Local || r.Verdict.NAT.PortMin != 3128 {
		t.Errorf("xt REDIRECT: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
}

func TestDNATUnknownTargetUncertain(t *testing.T) {
	rs := &Ruleset{Tables: []Table{{Family: FamilyIP, Name: "t", Chains: []Chain{
		{Name: "pre", Hook: HookPrerouting, Type: "nat", Priority: -100, Policy: "accept", Rules: []Rule{
			{Conds: []Cond{tcp(), dport(18080)}, Verdict: Verdict{Kind: VerdictDNAT, NAT: &NATTarget{Unknown: "the address comes from meta key 3"}}},
		}},
		base("input", HookInput, 0, "drop"),
		base("forward", HookForward, 0, "drop"),
	}}}}
	node := Node{Interfaces: []Interface{{Name: "eth0"}}, Forwarding: map[string]bool{FamilyIP: true}}
	got := find(OpenPortsOn(rs, node), HookForward, FamilyIP, "tcp", 18080)
	if len(got) != 1 || !got[0].Uncertain || !strings.Contains(got[0].Reason, "cannot read") {
		t.Errorf("dnat to an unreadable target: %+v; want one uncertain opening naming why", got)
	}
}

// BenchmarkOpenPortsOnUfwDocker: the evaluation of the ufw-docker node
// through DNAT (the probe's share besides listing).
func BenchmarkOpenPortsOnUfwDocker(b *testing.B) {
	rs, node := loadFixture(b, "ufw-docker")
	for b.Loop() {
		OpenPortsOn(rs, node)
	}
}
