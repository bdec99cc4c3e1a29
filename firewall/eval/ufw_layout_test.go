package eval

import (
	"testing"

	"adoption/firewall"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/internal/testenv"
	"adoption/internal/ufwfixture"
)

func TestKernelUfwLayout(t *testing.T) {
	n := fwtest.NewTestNet(t)
	testenv.NeedTools(t, "iptables-nft-restore", "ip6tables-nft-restore")
	fwtest.Run(t, ufwfixture.Save4, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.Run(t, ufwfixture.Save6, "ip", "netns", "exec", n.Node, "ip6tables-nft-restore")
	rs := n.List(t)
	if k, err := nft.Kind(rs, nil); err != nil || k != nft.KindIptablesNft {
		t.Errorf("Kind = %q, %v; want %q", k, err, nft.KindIptablesNft)
	}
	ports := fwtest.RandomPorts([]uint16{22, 2222, 7000, 8000, 8010, 8011, 9000, 60000, 60010, 60011}, 6)
	n.Serve(t, ports)
	srcs := []string{fwtest.PeerV4a, fwtest.PeerV4b, fwtest.PeerV6a, fwtest.PeerV6b}
	var unc []fwtest.Probe
	for _, s := range srcs {
		unc = append(unc, fwtest.Probe{Proto: "tcp", Src: s, Port: 2222})
	}
	open := oracle(n, t, ports, srcs, []string{"tcp", "udp"}, unc...)
	// The unguarded "-m rt --rt-type 0 -j DROP" must not make IPv6 uncertain.
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP6})
	fwtest.AssertOpen(t, open, firewall.Opening{Port: 8443, Proto: "tcp", Direction: firewall.HookForward, Family: firewall.FamilyIP})
	want := []firewall.Opening{
		{Port: 22, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP},
		{Port: 2222, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		{Port: 7000, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP, From: "198.18.0.3/32"},
		{Port: 8000, PortEnd: 8010, Proto: "tcp", Direction: firewall.HookInput, Family: firewall.FamilyIP},
		{Port: 68, Proto: "udp", Direction: firewall.HookInput, Family: firewall.FamilyIP, Uncertain: true},
		{Port: 60000, PortEnd: 60010, Proto: "udp", Direction: firewall.HookInput, Family: firewall.FamilyIP},
	}
	var got []firewall.Opening
	for _, o := range open {
		if o.Direction == firewall.HookInput && o.Family == firewall.FamilyIP {
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
