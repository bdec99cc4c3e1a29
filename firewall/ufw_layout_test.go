package firewall

import (
	"testing"

	"adoption/internal/testenv"
)

func TestKernelUfwLayout(t *testing.T) {
	n := newTestNet(t)
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	run(t, ufwSave4, "ip", "netns", "exec", n.node, "iptables-nft-restore")
	run(t, ufwSave6, "ip", "netns", "exec", n.node, "ip6tables-nft-restore")
	rs := n.list(t)
	if k, err := Kind(rs, nil); err != nil || k != KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, KindIptablesNft)
	}
	ports := randomPorts([]uint16{22, 2222, 7000, 8000, 8010, 8011, 9000, 60000, 60010, 60011}, 6)
	n.serve(t, ports)
	srcs := []string{peerV4a, peerV4b, peerV6a, peerV6b}
	var unc []probe
	for _, s := range srcs {
		unc = append(unc, probe{"tcp", s, 2222})
	}
	open := oracle(n, t, ports, srcs, []string{"tcp", "udp"}, unc...)
	// The unguarded "-m rt --rt-type 0 -j DROP" must not make IPv6 uncertain.
	assertOpen(t, open, Opening{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP6})
	assertOpen(t, open, Opening{Port: 8443, Proto: "tcp", Direction: HookForward, Family: FamilyIP})
	want := []Opening{
		{Port: 22, Proto: "tcp", Direction: HookInput, Family: FamilyIP},
		{Port: 2222, Proto: "tcp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		{Port: 7000, Proto: "tcp", Direction: HookInput, Family: FamilyIP, From: "198.18.0.3/32"},
		{Port: 8000, PortEnd: 8010, Proto: "tcp", Direction: HookInput, Family: FamilyIP},
		{Port: 68, Proto: "udp", Direction: HookInput, Family: FamilyIP, Uncertain: true},
		{Port: 60000, PortEnd: 60010, Proto: "udp", Direction: HookInput, Family: FamilyIP},
	}
	var got []Opening
	for _, o := range open {
		if o.Direction == HookInput && o.Family == FamilyIP {
			got = append(got, o)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ip input openings:\n got %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("opening %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
