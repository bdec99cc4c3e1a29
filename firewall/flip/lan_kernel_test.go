package flip

// The kernel as the oracle for routed forwarding to a network behind the
// node that is not a container bridge: a LAN on a second interface of its
// own (192.168.77.0/24, fd00:77::/64, a host at .2), which the peer routes
// to through the node. The probe lists what the found firewall forwards to
// it, and the preview gives every probe that passes a fate the kernel
// keeps, before and after a flip through the product's path.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
)

// lanNet is a node with a host behind its second interface serving the
// routed probes' ports. It returns the net and the node's uplink.
func lanNet(t *testing.T, prefix, octet string) (*fwtest.TestNet, string) {
	t.Helper()
	fwtest.RequireTools(t, "ip", "sysctl", "nft")
	n := fwtest.NewNamedNet(t, prefix, prefix[:2], octet)
	host, _ := n.Lan(t)
	fwtest.ServeIn(t, host, []uint16{22, 5353, 5432, 6379, 8443, 9443})
	uplink := ""
	for _, l := range strings.Split(fwtest.Run(t, "", "ip", "-n", n.Node, "-o", "link", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], prefix[:2]+"n") {
			uplink = strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		}
	}
	if uplink == "" {
		t.Fatal("the node's uplink was not found")
	}
	return n, uplink
}

// lanProbed checks that the probe (eval.OpenPortsOn with the node read)
// lists a routed forward opening to the LAN for each of ports (tcp), in
// both families.
func lanProbed(t *testing.T, n *fwtest.TestNet, ports ...uint16) {
	t.Helper()
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	ops := eval.OpenPortsOn(n.List(t), node)
	for _, port := range ports {
		for _, dst := range []string{fwtest.LanV4, fwtest.LanV6} {
			found := false
			for _, o := range ops {
				via, err := netip.ParsePrefix(o.Via)
				if o.Direction == firewall.HookForward && o.Routed() && o.Proto == "tcp" && o.Port <= port && port <= firewall.PortEnd(o) &&
					err == nil && via.Contains(netip.MustParseAddr(dst)) && !o.Uncertain {
					found = true
				}
			}
			if !found {
				t.Errorf("the probe lists no routed opening of %d/tcp to %s: %v", port, dst, ops)
			}
		}
	}
	fmt.Printf("routed forwarding to a LAN: the probe lists %d openings\n", len(ops))
}

// The ufw fixture's route rules (8443/tcp, 6379 from 198.18.0.3 and
// fd00:f0::3, 5353/udp, 9443 in on the uplink: closing, dropped on
// purpose), forwarding to the LAN.
func TestKernelRoutedUfwToLan(t *testing.T) {
	fwtest.RequireTools(t, "iptables-nft", "ip6tables-nft")
	n, uplink := lanNet(t, "lu-", "5c")
	ufwRouteRules(t, n, uplink)
	lanProbed(t, n, 8443)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp")}
	spec.Drop = append(ufwDrops(), fwtest.Ports("9443/tcp")...)
	routedDifferentialTo(t, n, spec, "ufw route rules to a LAN", routedProbes(fwtest.LanV4, fwtest.LanV6))
}

// A native forward chain accepting tcp dport { 5432, 6379 } from anyone,
// 5353/udp from 198.18.0.3 only and 9443 in on the uplink only (closing,
// dropped on purpose), forwarding to the LAN.
func TestKernelRoutedNativeForwardToLan(t *testing.T) {
	n, uplink := lanNet(t, "ln-", "5d")
	n.Nft(t, nativeForward(uplink))
	lanProbed(t, n, 5432, 6379)
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Drop: fwtest.Ports("9443/tcp")}
	routedDifferentialTo(t, n, spec, "native forward chain to a LAN", routedProbes(fwtest.LanV4, fwtest.LanV6))
}
