package eval

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"golang.org/x/sys/unix"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
)

// The evaluator through DNAT on rulesets from fwtest's testdata/dnat: listings of
// real namespaces (TestKernelDNATUfwDocker writes them with
// FW_SAVE_FIXTURES=1), with the node's interfaces and forwarding as read.

func TestDNATUfwDockerByHostPort(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	open := OpenPortsOn(rs, node)
	// Published and routed: open to anyone, by the host port, with the
	// container behind it.
	for _, w := range []firewall.Opening{
		{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8080"},
		{Port: 18083, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8083"},
		{Port: 18053, Proto: "udp", Direction: firewall.HookForward, Family: firewall.FamilyIP, Via: "172.17.0.2:8053"},
		{Port: 18080, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP6, Via: "[fd00:17::2]:8080"},
		{Port: 18081, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP, From: "198.18.0.3/32", Via: "172.17.0.2:8081"},
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP},
	} {
		fwtest.AssertOpen(t, open, w)
	}
	for _, o := range open {
		if o.Uncertain {
			t.Errorf("uncertain opening %+v", o)
		}
		// Container ports are never what a client uses through DNAT
		// (routed to the container, they are).
		if p := o.Port; p >= 8000 && p <= 9200 && !o.Routed() {
			t.Errorf("opening by container port: %+v", o)
		}
	}
	// Published but not routed: closed to the public. ufw-docker lets
	// private sources through (they return before its drops), and the
	// evaluator names exactly those.
	for _, p := range []uint16{18082, 19100} {
		for _, o := range fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", p) {
			if o.From == "" || !strings.HasPrefix(o.From, "10.") && !strings.HasPrefix(o.From, "172.16.") && !strings.HasPrefix(o.From, "192.168.") {
				t.Errorf("%d/tcp: unrouted published port open to %q: %+v", p, o.From, o)
			}
		}
	}
	if got := fwtest.Find(open, firewall.HookForward, firewall.FamilyIP6, "tcp", 18082); len(got) != 0 {
		t.Errorf("18082/tcp ip6 unrouted, reported open: %+v", got)
	}
}

func TestDNATNotForwarding(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	node.Forwarding = map[string]bool{firewall.FamilyIP: false, firewall.FamilyIP6: false}
	for _, o := range OpenPortsOn(rs, node) {
		if o.Direction == firewall.HookForward {
			t.Errorf("forward opening on a node that does not forward: %+v", o)
		}
	}
	// Forwarding not known: taken as on (a port counted open is never
	// silently closed).
	node.Forwarding = nil
	if len(fwtest.Find(OpenPortsOn(rs, node), firewall.HookForward, firewall.FamilyIP, "tcp", 18080)) == 0 {
		t.Error("18080/tcp not open with forwarding unknown")
	}
}

func TestDNATUnmappableTargetIsUncertainWithReason(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	var ifs []firewall.Interface
	for _, i := range node.Interfaces {
		if i.Name != "docker0" {
			ifs = append(ifs, i)
		}
	}
	node.Interfaces = ifs
	got := fwtest.Find(OpenPortsOn(rs, node), firewall.HookForward, firewall.FamilyIP, "tcp", 18080)
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
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	// Known interfaces: Docker's "-i docker0 -j RETURN" and "! -i docker0"
	// are decided for a client on the uplink.
	for _, o := range OpenPortsOn(rs, node) {
		if o.Uncertain {
			t.Errorf("uncertain with known interfaces: %+v", o)
		}
	}
	// Two uplinks, only one named: "iifname eth0" is then undecided.
	n2 := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}, {Name: "wg0", Kind: "wireguard"}, {Name: "docker0", Kind: "bridge", Addrs: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/16")}}}}
	p := Packet{Hook: firewall.HookInput, Family: firewall.FamilyIP, node: &n2}
	if got := p.Cond(&firewall.Cond{Kind: firewall.CondIifname, Names: []string{"eth0"}}); got != TriUnknown {
		t.Errorf("iifname eth0 with uplinks eth0, wg0: %v, want unknown", got)
	}
	if got := p.Cond(&firewall.Cond{Kind: firewall.CondIifname, Names: []string{"docker0"}}); got != TriFalse {
		t.Errorf("iifname docker0: %v, want false", got)
	}
	if got := p.Cond(&firewall.Cond{Kind: firewall.CondIifname, Names: []string{"eth*", "wg*"}}); got != TriTrue {
		t.Errorf("iifname {eth*, wg*}: %v, want true", got)
	}
	p.Hook, p.oif = firewall.HookForward, "docker0"
	if got := p.Cond(&firewall.Cond{Kind: firewall.CondOifname, Names: []string{"br-*"}}); got != TriFalse {
		t.Errorf("oifname br-* out of docker0: %v, want false", got)
	}
}

func TestDNATConntrackBits(t *testing.T) {
	p := Packet{Hook: firewall.HookForward, Family: firewall.FamilyIP, Port: 8080, OrigPort: 18080, Dnat: true}
	for _, c := range []struct {
		cond firewall.Cond
		want Tri
	}{
		{firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateDNAT}, TriTrue},
		{firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateSNAT}, TriFalse},
		{firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateNew}, TriTrue},
		{firewall.Cond{Kind: firewall.CondCtStatus, Bits: firewall.IpsDstNAT}, TriTrue},
		{firewall.Cond{Kind: firewall.CondCtStatus, Bits: firewall.IpsSrcNAT | firewall.IpsSeenReply}, TriFalse},
		{firewall.Cond{Kind: firewall.CondCtStatus, Bits: 1 << 9}, TriUnknown}, // a bit the evaluator does not model
		{firewall.Cond{Kind: firewall.CondOrigDport, Ports: []firewall.PortRange{{From: 18080, To: 18080}}}, TriTrue},
		{firewall.Cond{Kind: firewall.CondDport, Ports: []firewall.PortRange{{From: 18080, To: 18080}}}, TriFalse},
	} {
		if got := p.Cond(&c.cond); got != c.want {
			t.Errorf("%s on a DNATed packet: %v, want %v", firewall.RenderCond(&c.cond), got, c.want)
		}
	}
	p.Dnat = false
	if got := p.Cond(&firewall.Cond{Kind: firewall.CondCtState, Bits: firewall.CtStateDNAT}); got != TriFalse {
		t.Errorf("ctstate DNAT on a packet that was not DNATed: %v", got)
	}
}

func TestDecodeNATTargets(t *testing.T) {
	d := nft.Decoder{Family: firewall.FamilyIP, Sets: map[string]*firewall.Set{}, SetsKnown: true}
	r := d.Rule(&nftables.Rule{Exprs: []expr.Any{
		&expr.Immediate{Register: 1, Data: []byte{172, 17, 0, 3}},
		&expr.Immediate{Register: 2, Data: []byte{0x23, 0x28}},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1, RegProtoMin: 2, RegProtoMax: 2, Specified: true},
	}})
	if r.Verdict.Kind != firewall.VerdictDNAT || r.Verdict.NAT == nil || r.Verdict.NAT.Addr != netip.MustParseAddr("172.17.0.3") || r.Verdict.NAT.PortMin != 9000 {
		t.Errorf("native dnat: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
	// The address from something the decoder cannot read: named, not guessed.
	r = d.Rule(&nftables.Rule{Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}})
	if r.Verdict.NAT == nil || r.Verdict.NAT.Unknown == "" {
		t.Errorf("dnat to a register the decoder cannot read: %+v", r.Verdict.NAT)
	}
	r = d.Rule(&nftables.Rule{Exprs: []expr.Any{&expr.Target{Name: "DNAT", Rev: 2, Info: &xt.NatRange2{NatRange: xt.NatRange{
		Flags: uint(xt.NatRangeMapIPs | xt.NatRangeProtoSpecified), MinIP: net.ParseIP("172.17.0.2").To4(), MaxIP: net.ParseIP("172.17.0.2").To4(), MinPort: 8080, MaxPort: 8080}}}}})
	if r.Verdict.Kind != firewall.VerdictDNAT || r.Verdict.NAT.Addr != netip.MustParseAddr("172.17.0.2") || r.Verdict.NAT.PortMin != 8080 {
		t.Errorf("xt DNAT: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
	r = d.Rule(&nftables.Rule{Exprs: []expr.Any{&expr.Target{Name: "REDIRECT", Rev: 0, Info: &xt.NatIPv4MultiRangeCompat{{Flags: uint(xt.NatRangeProtoSpecified), MinPort: 3128, MaxPort: 3128}}}}})
	if r.Verdict.Kind != firewall.VerdictDNAT || !r.Verdict.NAT.Local || r.Verdict.NAT.PortMin != 3128 {
		t.Errorf("xt REDIRECT: %+v %+v", r.Verdict, r.Verdict.NAT)
	}
}

func TestDNATUnknownTargetUncertain(t *testing.T) {
	rs := &firewall.Ruleset{Tables: []firewall.Table{{Family: firewall.FamilyIP, Name: "t", Chains: []firewall.Chain{
		{Name: "pre", Hook: firewall.HookPrerouting, Type: "nat", Priority: -100, Policy: "accept", Rules: []firewall.Rule{
			{Conds: []firewall.Cond{fwtest.Tcp(), fwtest.Dport(18080)}, Verdict: firewall.Verdict{Kind: firewall.VerdictDNAT, NAT: &firewall.NATTarget{Unknown: "the address comes from meta key 3"}}},
		}},
		fwtest.Base("input", firewall.HookInput, 0, "drop"),
		fwtest.Base("forward", firewall.HookForward, 0, "drop"),
	}}}}
	node := firewall.Node{Interfaces: []firewall.Interface{{Name: "eth0"}}, Forwarding: map[string]bool{firewall.FamilyIP: true}}
	got := fwtest.Find(OpenPortsOn(rs, node), firewall.HookForward, firewall.FamilyIP, "tcp", 18080)
	if len(got) != 1 || !got[0].Uncertain || !strings.Contains(got[0].Reason, "cannot read") {
		t.Errorf("dnat to an unreadable target: %+v; want one uncertain opening naming why", got)
	}
}

// BenchmarkOpenPortsOnUfwDocker: the evaluation of the ufw-docker node
// through DNAT (the probe's share besides listing).
func BenchmarkOpenPortsOnUfwDocker(b *testing.B) {
	rs, node := fwtest.LoadFixture(b, "ufw-docker")
	for b.Loop() {
		OpenPortsOn(rs, node)
	}
}
