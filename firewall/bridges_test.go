package firewall

import "testing"

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
		if got := RuleOwner(tbl, ch, r).Owner; got != c.want {
			t.Errorf("RuleOwner(-i %v -j ACCEPT) = %s, want %s", c.names, got, c.want)
		}
	}
}
