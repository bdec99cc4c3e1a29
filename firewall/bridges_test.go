package firewall

import (
	"net/netip"
	"testing"
)

// BridgeTool keeps the answers each of its callers gave before it was one
// function: every name the evaluator took for a container bridge is one,
// Docker's own are Docker's, and uplinks are none.
func TestBridgeTool(t *testing.T) {
	for name, want := range map[string]string{
		"docker0":         "docker",
		"br-1a2b3c4d5e6f": "docker",
		"br-*":            "docker",
		"docker_gwbridge": "docker-swarm",
		"cni0":            "cni",
		"cbr0":            "cni",
		"podman0":         "podman",
		"virbr0":          "libvirt",
		"lxcbr0":          "lxc",
		"eth0":            "",
		"lo":              "",
		"wg0":             "",
		"tailscale0":      "",
		"bridge0":         "",
	} {
		if got := BridgeTool(name); got != want {
			t.Errorf("BridgeTool(%q) = %q, want %q", name, got, want)
		}
	}
}

// A rule naming only Docker's bridges is Docker's in a shared base chain;
// one naming any other interface is the predecessor's.
func TestRuleOwnerBridgeRules(t *testing.T) {
	tbl := &Table{Family: FamilyIP, Name: "filter", Chains: []Chain{{Name: "FORWARD", Hook: HookForward, Type: "filter"}}}
	ch := &tbl.Chains[0]
	for _, c := range []struct {
		names []string
		want  Owner
	}{
		{[]string{"docker0"}, OwnedByForeign},
		{[]string{"br-*"}, OwnedByForeign},
		{[]string{"docker_gwbridge"}, OwnedByForeign},
		{[]string{"eth0"}, OwnedByPredecessor},
		{[]string{"docker0", "eth0"}, OwnedByPredecessor},
	} {
		r := &Rule{Conds: []Cond{{Kind: CondIifname, Names: c.names}}, Verdict: Verdict{Kind: VerdictAccept}}
		if got := RuleOwner(nil, tbl, ch, r).Owner; got != c.want {
			t.Errorf("RuleOwner(-i %v -j ACCEPT) = %s, want %s", c.names, got, c.want)
		}
	}
}

// On a node whose links are known, a container bridge is decided from
// them and from the engine, not from its name: libvirt's virbr0, Swarm's
// docker_gwbridge and a custom-named Docker bridge are bridges, an uplink
// bridge named br-wan (the NIC enslaved to it) and a NIC named br-lan are
// not; a wildcard is a bridge's only when every interface it matches is.
func TestNodeBridgeTool(t *testing.T) {
	n := Node{Interfaces: []Interface{
		{Name: "lo", Loopback: true},
		{Name: "eth0", Master: "br-wan"},
		{Name: "br-wan", Kind: "bridge"},
		{Name: "br-lan"},
		{Name: "virbr0", Kind: "bridge"},
		{Name: "vnet0", Kind: "tun", Master: "virbr0"},
		{Name: "docker_gwbridge", Kind: "bridge"},
		{Name: "appnet0", Kind: "bridge"},
		{Name: "veth1", Kind: "veth", Master: "appnet0"},
		{Name: "docker0", Kind: "bridge"},
		{Name: "mynet", Kind: "bridge"},
		{Name: "br-0123456789ab", Kind: "bridge"},
		{Name: "wg0", Kind: "wireguard"},
	}, EngineBridges: map[string]string{"mynet": "docker", "docker0": "docker", "docker_gwbridge": "docker-swarm"}}
	for name, want := range map[string]string{
		"virbr0":          "libvirt",
		"docker_gwbridge": "docker-swarm",
		"appnet0":         "bridge",
		"docker0":         "docker",
		"mynet":           "docker",
		"br-0123456789ab": "bridge", // named like Docker's, not by the engine
		"br-wan":          "",
		"br-lan":          "",
		"eth0":            "",
		"wg0":             "",
		"br-*":            "",
		"virbr*":          "libvirt",
		"cni0":            "cni", // not on the node: by its name
	} {
		if got := n.BridgeTool(name); got != want {
			t.Errorf("Node.BridgeTool(%q) = %q, want %q", name, got, want)
		}
	}
	up := n.Uplinks()
	for _, w := range []string{"br-wan", "br-lan", "wg0"} {
		found := false
		for _, u := range up {
			found = found || u == w
		}
		if !found {
			t.Errorf("uplinks %v lack %s", up, w)
		}
	}
	for _, u := range up {
		if u == "virbr0" || u == "docker_gwbridge" || u == "appnet0" || u == "mynet" || u == "eth0" {
			t.Errorf("uplinks %v hold %s", up, u)
		}
	}
}

// The engine's bridge networks name their interfaces: a custom name by
// the network's option, else br- and the ID's first 12 characters; Swarm's
// gateway bridge is docker-swarm's; other drivers have no bridge.
func TestEngineBridges(t *testing.T) {
	got := EngineBridges([]EngineNetwork{
		{Name: "bridge", ID: "f00dfeedf00dfeed", Driver: "bridge", Options: map[string]string{DockerBridgeOption: "docker0"}},
		{Name: "app", ID: "0123456789abcdef", Driver: "bridge"},
		{Name: "lan", ID: "aaaaaaaaaaaaaaaa", Driver: "bridge", Options: map[string]string{DockerBridgeOption: "lan0"}},
		{Name: "docker_gwbridge", ID: "bbbbbbbbbbbbbbbb", Driver: "bridge", Options: map[string]string{DockerBridgeOption: "docker_gwbridge"}},
		{Name: "ingress", ID: "cccccccccccccccc", Driver: "overlay"},
		{Name: "host", ID: "dddddddddddddddd", Driver: "host"},
		{Name: "mv", ID: "eeeeeeeeeeeeeeee", Driver: "macvlan", Options: map[string]string{"parent": "eth0"}},
	})
	want := map[string]string{"docker0": "docker", "br-0123456789ab": "docker", "lan0": "docker", "docker_gwbridge": "docker-swarm"}
	if len(got) != len(want) {
		t.Fatalf("EngineBridges = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("EngineBridges[%q] = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if EngineBridges(nil) == nil {
		t.Error("EngineBridges(nil) is nil: an engine with no networks must read as asked")
	}
	// A custom-named bridge is a container bridge even where the links are
	// not known; an uplink bridge named like Docker's is none.
	n := Node{EngineBridges: got}
	if tool := n.BridgeTool("lan0"); tool != "docker" {
		t.Errorf("Node.BridgeTool(lan0) with the engine's answer and no links = %q, want docker", tool)
	}
	up := Node{Interfaces: []Interface{{Name: "eth0", Master: "br-wan"}, {Name: "br-wan", Kind: "bridge"}, {Name: "lan0", Kind: "bridge"}}, EngineBridges: got}
	if tool := up.BridgeTool("br-wan"); tool != "" {
		t.Errorf("Node.BridgeTool(br-wan), the NIC enslaved = %q, want none", tool)
	}
	if u := up.Uplinks(); len(u) != 1 || u[0] != "br-wan" {
		t.Errorf("uplinks = %v, want [br-wan]", u)
	}
}

// Ownership asks the node which interfaces are Docker's bridges: a rule on
// a custom-named Docker bridge (com.docker.network.bridge.name=lan0) is
// Docker's on a node whose engine names it and the predecessor's where
// the engine is unknown (by name, lan0 is nobody's); a rule on an uplink
// bridge named like Docker's (br-wan, the NIC enslaved) is the
// predecessor's once the links are known, whatever its name.
func TestRuleOwnerByNodeBridges(t *testing.T) {
	tbl := &Table{Family: FamilyIP, Name: "filter", Chains: []Chain{{Name: "FORWARD", Hook: HookForward, Type: "filter"}}}
	ch := &tbl.Chains[0]
	engine := &Node{
		Interfaces: []Interface{
			{Name: "eth0", Master: "br-wan"},
			{Name: "br-wan", Kind: "bridge"},
			{Name: "lan0", Kind: "bridge"},
			{Name: "docker0", Kind: "bridge"},
		},
		EngineBridges: map[string]string{"lan0": "docker", "docker0": "docker"},
	}
	for _, c := range []struct {
		node  *Node
		names []string
		want  Owner
	}{
		{engine, []string{"lan0"}, OwnedByForeign},
		{engine, []string{"docker0", "lan0"}, OwnedByForeign},
		{nil, []string{"lan0"}, OwnedByPredecessor},
		{&Node{}, []string{"lan0"}, OwnedByPredecessor},
		{engine, []string{"br-wan"}, OwnedByPredecessor},
		{nil, []string{"br-wan"}, OwnedByForeign},
		{engine, []string{"eth0"}, OwnedByPredecessor},
	} {
		r := &Rule{Conds: []Cond{{Kind: CondIifname, Names: c.names}}, Verdict: Verdict{Kind: VerdictAccept}}
		if got := RuleOwner(c.node, tbl, ch, r).Owner; got != c.want {
			t.Errorf("RuleOwner(engine %v, -i %v -j ACCEPT) = %s, want %s", c.node != nil && c.node.EngineBridges != nil, c.names, got, c.want)
		}
	}
	// Docker's hairpin masquerade is told by the networks Docker
	// masquerades, custom-named bridges included.
	nat := &Table{Family: FamilyIP, Name: "nat", Chains: []Chain{{Name: "POSTROUTING", Hook: "postrouting", Type: "nat", Rules: []Rule{
		{Conds: []Cond{{Kind: CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}}, {Kind: CondOifname, Negate: true, Names: []string{"lan0"}}}, Verdict: Verdict{Kind: VerdictAccept}},
	}}}}
	hair := &Rule{Conds: []Cond{{Kind: CondSaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("172.30.0.2/32")}}, {Kind: CondDaddr, Prefixes: []netip.Prefix{netip.MustParsePrefix("172.30.0.2/32")}}}, Verdict: Verdict{Kind: VerdictAccept}}
	post := &nat.Chains[0]
	if got := RuleOwner(engine, nat, post, hair).Owner; got != OwnedByForeign {
		t.Errorf("the hairpin masquerade in lan0's network, the engine naming lan0: %s, want foreign", got)
	}
	if got := RuleOwner(nil, nat, post, hair).Owner; got != OwnedByPredecessor {
		t.Errorf("the hairpin masquerade in lan0's network, by name: %s, want predecessor", got)
	}
}
