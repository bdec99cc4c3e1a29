// Package unknowns names what the probe and the preview cannot judge on
// the node's forward path: a Docker engine that cannot be reached while the
// node needs it (its chains are in the ruleset, or the plan runs
// containers), a network a container publishes ports into that the
// evaluator cannot map to one of the node's interfaces, and a published
// port DNATed to an address no container of the engine holds; and, for
// what it can tell, the container behind a DNAT (Behind). Each unknown is
// named, never read as "open" or "closed"; the probe lists them, the
// preview refuses on them. It only reads what it is given: it is not the
// evaluator (firewall/eval), and it changes nothing on the node.
package unknowns

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"adoption/config"
	"adoption/containers"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
)

// dockerTool is the name the ownership model gives Docker's chains and
// tables (firewall.ChainTool, firewall.TableTool).
const dockerTool = "docker"

// dockerInRuleset reports whether Docker's chains or tables are in rs: an
// engine manages this node's firewall.
func dockerInRuleset(rs *firewall.Ruleset) bool {
	if rs == nil {
		return false
	}
	for _, t := range rs.Tables {
		if firewall.TableTool(&t) == dockerTool {
			return true
		}
		for _, c := range t.Chains {
			if firewall.ChainTool(c.Name) == dockerTool {
				return true
			}
		}
	}
	return false
}

// dockerInReport is dockerInRuleset on the probe's table summaries.
func dockerInReport(tables []eval.TableSummary) bool {
	for _, t := range tables {
		if t.Tool == dockerTool {
			return true
		}
		for _, c := range t.Chains {
			if c.Tool == dockerTool {
				return true
			}
		}
	}
	return false
}

// planRunsContainers reports whether a module of the plan runs a container.
func planRunsContainers(p config.Plan) bool {
	for _, m := range p.Modules {
		if m.Container != nil {
			return true
		}
	}
	return false
}

// engineUnreachable names the node's engine when it is needed and cannot
// be reached; "" otherwise. A node without Docker is adoptable: its
// unreachable engine is no obstacle, only a line in the probe's containers.
func engineUnreachable(needed bool, cr containers.Report) string {
	if !needed || cr.Available {
		return ""
	}
	why := cr.Error
	if why == "" {
		why = "the engine reported nothing"
	}
	return "the node's Docker engine cannot be reached (" + why + "): which container each published port reaches, " +
		"and which ports its containers publish when they run, cannot be told"
}

// unmappedNetworks names every network a running container publishes
// ports into whose address is on none of the node's interfaces: Docker
// DNATs clients there, and the evaluator cannot tell where that goes. An
// unknown node (its interfaces unread) maps nothing and is named elsewhere.
// A container for which skip says true is left out.
func unmappedNetworks(cr containers.Report, node firewall.Node, skip func(containers.Info) bool) []string {
	if !cr.Available || !node.Known() {
		return nil
	}
	var out []string
	for _, c := range cr.Containers {
		if c.State != "running" || len(c.Ports) == 0 || (skip != nil && skip(c)) {
			continue
		}
		for _, n := range c.Networks {
			for _, s := range n.Addrs {
				pfx, err := netip.ParsePrefix(s)
				if err != nil {
					out = append(out, fmt.Sprintf("container %s publishes %s on network %s at %q, an address the evaluator cannot read: whether clients reach those ports cannot be told", c.Name, publishedText(c), n.Network, s))
					continue
				}
				if _, ok := node.InterfaceFor(pfx.Addr()); !ok {
					out = append(out, fmt.Sprintf("container %s publishes %s on network %s (%s), which is on none of the node's interfaces: the evaluator cannot map that network, so whether clients reach those ports cannot be told", c.Name, publishedText(c), n.Network, pfx))
				}
			}
		}
	}
	return out
}

func publishedText(c containers.Info) string {
	var ps []string
	for _, p := range c.Ports {
		ps = append(ps, fmt.Sprintf("%d/%s", p.HostPort, p.Proto))
	}
	return strings.Join(ps, ", ")
}

// containerAddrs are the addresses of the engine's running containers.
func containerAddrs(cr containers.Report) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, c := range cr.Containers {
		if c.State != "running" {
			continue
		}
		for _, n := range c.Networks {
			for _, s := range n.Addrs {
				if pfx, err := netip.ParsePrefix(s); err == nil {
					out[pfx.Addr()] = c.Name
				}
			}
		}
	}
	return out
}

// viaAddr reads the address of an opening's DNAT target ("172.17.0.2:8080",
// "[fd00::2]:80", "172.17.0.2"); false for none or the node itself (":9001").
func viaAddr(via string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(via); err == nil {
		return ap.Addr(), true
	}
	a, err := netip.ParseAddr(via)
	return a, err == nil
}

// strayDNAT says why a forward opening is DNATed to an address of one of
// Docker's bridges (Node.BridgeTool "docker") that no running container of the
// engine holds, or "": clients are sent to nobody the node knows. Judged
// only with the engine's answer at hand.
func strayDNAT(o firewall.Opening, node firewall.Node, held map[netip.Addr]string, engine bool) string {
	if !engine || o.Direction != firewall.HookForward {
		return ""
	}
	a, ok := viaAddr(o.Via)
	if !ok {
		return ""
	}
	ifc, ok := node.InterfaceFor(a)
	if !ok || node.BridgeTool(ifc) != "docker" {
		return "" // the evaluator names a target on none of the node's networks itself
	}
	if _, ok := held[a.Unmap()]; ok {
		return ""
	}
	return fmt.Sprintf("DNAT to %s, on Docker's bridge %s, where no running container of the node's engine is: the address is unknown to the engine", o.Via, ifc)
}

// openingText names an opening as the probe prints it.
func openingText(o firewall.Opening) string {
	port := fmt.Sprint(o.Port)
	if o.PortEnd != 0 && o.PortEnd != o.Port {
		port = fmt.Sprintf("%d-%d", o.Port, o.PortEnd)
	}
	s := fmt.Sprintf("%s/%s (%s, %s", port, o.Proto, o.Direction, o.Family)
	if o.Via != "" {
		s += ", to " + o.Via
	}
	if o.From != "" {
		s += ", from " + o.From
	}
	return s + ")"
}

// Probe lists everything the probe could not judge, each named:
// the node's interfaces unread, the engine unreachable while needed, each
// unmapped container network, each opening the evaluator left uncertain
// for a reason, each DNAT to an address no container holds.
func Probe(fw eval.Report, cr containers.Report, plan config.Plan) []string {
	var out []string
	if fw.NodeError != "" {
		out = append(out, "the node's interfaces and forwarding could not be read ("+fw.NodeError+"): published ports cannot be judged through DNAT")
	}
	if s := engineUnreachable(dockerInReport(fw.Tables) || planRunsContainers(plan), cr); s != "" {
		out = append(out, s)
	}
	// The engine's containers are behind this firewall only when the
	// engine manages it (its chains are in the ruleset): on a node whose
	// containers run elsewhere they are no part of the evaluation.
	docker := dockerInReport(fw.Tables)
	if docker {
		out = append(out, unmappedNetworks(cr, fw.Node, nil)...)
	}
	held := containerAddrs(cr)
	engine := cr.Available && docker
	for _, o := range fw.Open {
		switch {
		case o.Reason != "":
			out = append(out, openingText(o)+" is uncertain: "+o.Reason)
		default:
			if why := strayDNAT(o, fw.Node, held, engine); why != "" {
				out = append(out, openingText(o)+" cannot be judged: "+why)
			}
		}
	}
	return out
}

// Preview is the preview's refusals for what it cannot judge: the
// engine unreachable while needed, an unmapped container network, a
// published port not dropped whose DNAT target no container holds; and
// it names in pv the found rules not wholly decoded, refusing on each when
// a fate is in doubt (undecoded.go). (Openings the evaluator left uncertain for a reason are refused by the
// preview itself, firewall.PreviewFlipOn.)
//
// A container whose every published port is in flip.drop is closed on
// purpose whatever its network: it is not named.
func Preview(found *firewall.Ruleset, node firewall.Node, cr containers.Report, plan config.Plan, spec flip.MeshSpec, pv *flip.Preview) []string {
	var out []string
	docker := dockerInRuleset(found)
	if s := engineUnreachable(docker || planRunsContainers(plan), cr); s != "" {
		out = append(out, s+"; start the engine (or fix docker.host) and preview again")
	}
	dropped := func(c containers.Info) bool {
		for _, p := range c.Ports {
			if !slices.Contains(spec.Drop, config.Port{Num: p.HostPort, Proto: p.Proto}) {
				return false
			}
		}
		return true
	}
	if docker { // as in Probe: else the containers are not behind this firewall
		for _, s := range unmappedNetworks(cr, node, dropped) {
			out = append(out, s+"; add its ports to flip.drop or give the network a bridge on the node, and preview again")
		}
	}
	pv.Undecoded = Undecoded(found)
	out = append(out, undecodedRefusals(pv)...)
	held := containerAddrs(cr)
	for _, f := range pv.Fates {
		if f.Dropped {
			continue
		}
		if why := strayDNAT(f.Opening, node, held, cr.Available && docker); why != "" {
			out = append(out, fmt.Sprintf("%s cannot be judged: %s; remove the stale rule or add the port to flip.drop", openingText(f.Opening), why))
		}
	}
	return out
}

// Behind maps each opening's DNAT target to the running container that
// holds its address.
func Behind(open []firewall.Opening, cr containers.Report) map[string]string {
	addrs := containerAddrs(cr)
	var out map[string]string
	for _, o := range open {
		a, ok := viaAddr(o.Via)
		if !ok {
			continue
		}
		if name, ok := addrs[a]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[o.Via] = name
		}
	}
	return out
}
