// This file holds the one answer to "is this interface a container
// network's bridge, and whose": the evaluator's uplinks, the ownership of
// Docker's bridge rules, the derived ruleset's egress accepts and the
// probe's stray DNATs all ask it.

package firewall

import "strings"

// DockerBridges are Docker's bridges as nft matches them: docker0 (the
// default network) and br-* (each user-defined network). The mesh's table
// accepts what containers send from them.
var DockerBridges = []string{"docker0", "br-*"}

// bridges are every container network's bridge, with the tool that made
// it. A trailing '*' matches any suffix.
var bridges = []struct{ pattern, tool string }{
	{DockerBridges[0], "docker"},
	{DockerBridges[1], "docker"},
	{"docker_gwbridge", "docker-swarm"},
	{"cni*", "cni"},
	{"cbr*", "cni"},
	{"podman*", "podman"},
	{"virbr*", "libvirt"},
	{"lxcbr*", "lxc"},
}

// BridgeTool names the tool whose container network bridge an interface
// called name is ("docker", "docker-swarm", "cni", "podman", "libvirt",
// "lxc"), or "" when it is none: clients from outside never arrive on a
// container bridge. name may itself be an nft wildcard ("br-*"): it is a
// bridge's when every interface it matches is.
func BridgeTool(name string) string {
	for _, b := range bridges {
		if p, ok := strings.CutSuffix(b.pattern, "*"); ok {
			if strings.HasPrefix(name, p) {
				return b.tool
			}
		} else if name == b.pattern {
			return b.tool
		}
	}
	return ""
}
