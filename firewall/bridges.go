// This file holds the one answer to "is this interface a container
// network's bridge, and whose": the evaluator's uplinks and the networks
// behind the node, the ownership of Docker's bridge rules, the derived
// ruleset's egress accepts and the probe's stray DNATs all ask it. On a
// node whose links are known it is decided from them and from the engine,
// not from names; names decide only what the node cannot tell (a rule's
// wildcard, a node known by its ruleset alone).

package firewall

import (
	"slices"
	"strings"
)

// DockerBridges are the names Docker gives its bridges by default, as nft
// matches them: docker0 (the default network) and br-* (each user-defined
// network). Only a name the node cannot tell is judged by them; the mesh's
// table accepts egress from the bridges the found firewall lets out.
var DockerBridges = []string{"docker0", "br-*"}

// DockerBridgeOption is the option of a Docker bridge network that names
// its bridge interface ("docker0" for the default network; a custom name
// set with -o com.docker.network.bridge.name=NAME).
const DockerBridgeOption = "com.docker.network.bridge.name"

// EngineNetwork is a container network as its engine describes it.
type EngineNetwork struct {
	Name, ID, Driver string
	Options          map[string]string
}

// EngineBridges are the bridge interfaces of a Docker engine's networks,
// with the tool that made each (Node.EngineBridges): for each network of
// the bridge driver, the interface its DockerBridgeOption names, else
// Docker's own name for it ("br-" and the first 12 characters of the
// network's ID). Swarm's docker_gwbridge is "docker-swarm"'s, every other
// "docker"'s. Never nil: the engine was asked.
func EngineBridges(nets []EngineNetwork) map[string]string {
	out := map[string]string{}
	for _, n := range nets {
		if n.Driver != "bridge" {
			continue // overlay, macvlan, ipvlan, host, none: no bridge of the node
		}
		name := n.Options[DockerBridgeOption]
		if name == "" && len(n.ID) >= 12 {
			name = "br-" + n.ID[:12]
		}
		if name == "" {
			continue
		}
		tool := "docker"
		if n.Name == "docker_gwbridge" {
			tool = "docker-swarm"
		}
		out[name] = tool
	}
	return out
}

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

// BridgeTool is BridgeTool decided on the node: a bridge the node's
// container engine names (EngineBridges: a Docker network's bridge,
// custom-named ones included) is that engine's; else an interface of the
// node is a container bridge when its link kind is "bridge" and no
// physical port (a link of no kind) is enslaved to it (libvirt's virbr0,
// Swarm's docker_gwbridge, a Docker network's bridge; not an uplink
// bridge holding the NIC, whatever its name). Its tool is the one its name
// suggests, else "bridge"; a Docker name is not Docker's when the engine
// was asked and does not name it. A wildcard is a bridge's when every
// interface of the node it matches is one (an interface of the node called
// by the wildcard itself, as a model stands one for the interfaces it
// matches, is judged by its link). A name the node does not have,
// and any name on a node whose interfaces are not known, is judged by
// BridgeTool.
func (n *Node) BridgeTool(name string) string {
	if n == nil {
		return BridgeTool(name)
	}
	if tool := n.EngineBridges[name]; tool != "" {
		return tool
	}
	if !n.HasInterfaces() {
		return BridgeTool(name)
	}
	i := slices.IndexFunc(n.Interfaces, func(i Interface) bool { return i.Name == name })
	if p, ok := strings.CutSuffix(name, "*"); ok && i < 0 {
		tool, matched := BridgeTool(name), false
		for _, i := range n.Interfaces {
			if strings.HasPrefix(i.Name, p) {
				matched = true
				if t := n.BridgeTool(i.Name); t == "" {
					return ""
				} else if tool == "" {
					tool = t
				}
			}
		}
		if !matched {
			return BridgeTool(name)
		}
		return tool
	}
	if i < 0 {
		return BridgeTool(name)
	}
	if n.Interfaces[i].Kind != "bridge" || n.physicalPort(name) {
		return ""
	}
	tool := BridgeTool(name)
	if n.EngineBridges != nil && strings.HasPrefix(tool, "docker") {
		tool = "" // named like Docker's, but not by the engine
	}
	if tool == "" {
		tool = "bridge"
	}
	return tool
}

// physicalPort reports whether a link of no kind (a NIC) is enslaved to
// the bridge called name.
func (n *Node) physicalPort(name string) bool {
	for _, i := range n.Interfaces {
		if i.Master == name && i.Kind == "" && !i.Loopback {
			return true
		}
	}
	return false
}

// Behind names the node's container bridges (BridgeTool): the interfaces
// whose networks lie behind the node, reached by routing through it.
func (n *Node) Behind() []string {
	var out []string
	for _, i := range n.Interfaces {
		if !i.Loopback && i.Master == "" && len(i.Addrs) > 0 && n.BridgeTool(i.Name) != "" {
			out = append(out, i.Name)
		}
	}
	return out
}
