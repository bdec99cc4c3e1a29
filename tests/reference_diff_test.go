package tests

// The flip on the reference node with the kernel as the oracle: clients in
// peer namespaces (two uplinks) send new connections from sources inside
// and outside every prefix the found firewall names, to every port it
// decides, before and after a flip through the product's preview; the
// preview's fate of each is held to what the kernel did.

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"adoption/config"
	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/nft"
	"adoption/internal/fwtest"
	"adoption/sandbox"
)

// The reference node's found firewall beyond what sandbox.RefNode raises:
// ssh only from one jump network, a deny list, and a host service allowed
// on the second uplink only.
const (
	diffJump = "198.51.100.0/28" // ssh's and admin's only sources
	diffDeny = "203.0.113.0/24"  // ufw deny from, inserted first
)

// diffEnv is what the traffic classes generate packets over.
type diffEnv struct {
	r         *refNode
	peer2     string       // the second uplink's peer namespace ("": none)
	addr2     string       // the node's address on the second uplink
	src2      string       // the second peer's address
	sources   []netip.Addr // the first peer's addresses, the found prefixes' insides and outsides
	hostPorts []uint16     // the node's own ports the found firewall decides, and closed ones
	published []uint16     // host ports published through DNAT
	// classProbes are the packets of the traffic classes beyond TCP and
	// UDP by port (eval.Classes), as fwtest sends them.
	classProbes map[fwtest.Packet]fwtest.ClassProbe
}

// trafficClass is one class of traffic: the packets that exercise it, how
// they are sent (nil: new TCP and UDP connections, fwtest.ReachFrom) and
// the preview's claim for each (nil: the fate of the opening of direction
// that covers it, fateOf). A class added later (routed forwarding, ICMP) is
// one more entry.
type trafficClass struct {
	name      string
	direction string
	packets   func(e *diffEnv) []fwtest.Packet
	reach     func(t *testing.T, e *diffEnv, pkts []fwtest.Packet) map[fwtest.Packet]bool
	claim     func(pv *flip.Preview, p fwtest.Packet) fwtest.Claim
}

// classRun is the packets of every class, sent class by class.
type classRun struct {
	e     *diffEnv
	pkts  []fwtest.Packet
	class map[string]*trafficClass
}

func newClassRun(e *diffEnv) *classRun {
	c := &classRun{e: e, class: map[string]*trafficClass{}}
	for i := range diffClasses {
		k := &diffClasses[i]
		c.class[k.name] = k
		c.pkts = append(c.pkts, k.packets(e)...)
	}
	return c
}

// reach sends every packet and says which got through.
func (c *classRun) reach(t *testing.T) map[fwtest.Packet]bool {
	t.Helper()
	by := map[string][]fwtest.Packet{}
	for _, p := range c.pkts {
		by[p.Class] = append(by[p.Class], p)
	}
	got := map[fwtest.Packet]bool{}
	for name, pkts := range by {
		send := c.class[name].reach
		if send == nil {
			send = func(t *testing.T, _ *diffEnv, pkts []fwtest.Packet) map[fwtest.Packet]bool {
				return fwtest.ReachFrom(t, pkts)
			}
		}
		for p, ok := range send(t, c.e, pkts) {
			got[p] = ok
		}
	}
	return got
}

// check holds pv to the kernel's before and after.
func (c *classRun) check(t *testing.T, what string, pv *flip.Preview, before, after map[fwtest.Packet]bool) fwtest.Tally {
	t.Helper()
	return fwtest.CheckFlip(t, what, c.pkts, before, after, func(p fwtest.Packet) fwtest.Claim {
		k := c.class[p.Class]
		if k.claim != nil {
			return k.claim(pv, p)
		}
		return fateOf(pv, k.direction, p)
	})
}

var diffClasses = []trafficClass{
	{
		name: "input, uplink", direction: firewall.HookInput,
		packets: func(e *diffEnv) []fwtest.Packet {
			return overSources(e, "input, uplink", e.hostPorts)
		},
	},
	{
		name: "input, second uplink", direction: firewall.HookInput,
		packets: func(e *diffEnv) []fwtest.Packet {
			if e.peer2 == "" {
				return nil // a node with one uplink
			}
			var out []fwtest.Packet
			for _, port := range e.hostPorts {
				for _, proto := range []string{"tcp", "udp"} {
					out = append(out, fwtest.Packet{Class: "input, second uplink", Peer: e.peer2, Proto: proto, Src: e.src2, Dst: e.addr2, Port: port})
				}
			}
			return out
		},
	},
	{
		name: "forward through DNAT", direction: firewall.HookForward,
		packets: func(e *diffEnv) []fwtest.Packet {
			var out []fwtest.Packet
			for _, p := range overSources(e, "forward through DNAT", e.published) {
				// The node's engine publishes on IPv4 (IPv6 clients meet
				// docker-proxy, a host service: the input class).
				if !strings.Contains(p.Src, ":") {
					out = append(out, p)
				}
			}
			return out
		},
	},
	{
		// ICMP and ICMPv6 types, other protocols, broadcast and multicast
		// services: received by the node's raw and UDP sockets.
		name: "classes beyond TCP and UDP by port",
		packets: func(e *diffEnv) []fwtest.Packet {
			e.classProbes = map[fwtest.Packet]fwtest.ClassProbe{}
			var out []fwtest.Packet
			var srcs []string
			for _, s := range e.sources {
				srcs = append(srcs, s.String())
			}
			for _, pr := range fwtest.RegionProbes(fwtest.ProbeRegions, srcs) {
				if pr.Proto == 17 && slices.Contains(e.hostPorts, pr.Port) {
					continue // a host service holds the port: its region is the input's
				}
				dst := e.r.Addr
				if netip.MustParseAddr(pr.Src).Is6() {
					dst = e.r.Addr6
				}
				if pr.Dst != "" {
					dst = pr.Dst
				}
				p := fwtest.Packet{Class: "classes beyond TCP and UDP by port", Peer: e.r.Peer, Proto: pr.Name, Src: pr.Src, Dst: dst, Port: pr.Port}
				pr.Dst = dst
				e.classProbes[p] = pr
				out = append(out, p)
			}
			return out
		},
		reach: func(t *testing.T, e *diffEnv, pkts []fwtest.Packet) map[fwtest.Packet]bool {
			probes := make([]fwtest.ClassProbe, 0, len(pkts))
			for _, p := range pkts {
				probes = append(probes, e.classProbes[p])
			}
			got := (&fwtest.TestNet{Node: e.r.Netns, Peer: e.r.Peer}).ClassReach(t, probes)
			out := map[fwtest.Packet]bool{}
			for _, p := range pkts {
				out[p] = got[e.classProbes[p]]
			}
			return out
		},
		claim: func(pv *flip.Preview, p fwtest.Packet) fwtest.Claim {
			src := netip.MustParseAddr(p.Src)
			var best *flip.Fate
			bits := -1
			for i := range pv.Fates {
				f := &pv.Fates[i]
				if o := f.Opening; o.Class != "" && fwtest.Holds(firewall.Opening{Class: o.Class, Family: o.Family}, fwtest.ClassProbe{Name: p.Proto, Src: p.Src}) {
					b := 0
					if o.From != "" {
						pfx, err := netip.ParsePrefix(o.From)
						if err != nil || !pfx.Contains(src) {
							continue
						}
						b = pfx.Bits()
					}
					if b > bits {
						best, bits = f, b
					}
				}
			}
			return claimOf(best)
		},
	},
}

// overSources is every (source of the first peer, protocol, port) to the
// node's address of the source's family.
func overSources(e *diffEnv, class string, ports []uint16) []fwtest.Packet {
	var out []fwtest.Packet
	for _, s := range e.sources {
		dst := e.r.Addr
		if s.Is6() {
			dst = e.r.Addr6
		}
		for _, port := range ports {
			for _, proto := range []string{"tcp", "udp"} {
				out = append(out, fwtest.Packet{Class: class, Peer: e.r.Peer, Proto: proto, Src: s.String(), Dst: dst, Port: port})
			}
		}
	}
	return out
}

// fateOf is the preview's fate for a packet of a class: that of the
// opening of the class's direction, the packet's family, protocol and
// port, with the narrowest source region holding the packet's source.
func fateOf(pv *flip.Preview, dir string, p fwtest.Packet) fwtest.Claim {
	src := netip.MustParseAddr(p.Src)
	fam := firewall.FamilyIP
	if src.Is6() {
		fam = firewall.FamilyIP6
	}
	var best *flip.Fate
	bits := -1
	for i := range pv.Fates {
		f := &pv.Fates[i]
		o := f.Opening
		if o.Direction != dir || o.Family != fam || o.Proto != p.Proto || p.Port < o.Port || p.Port > firewall.PortEnd(o) {
			continue
		}
		if o.To != "" && o.To != p.Dst {
			continue
		}
		b := 0
		if o.From != "" {
			pfx, err := netip.ParsePrefix(o.From)
			if err != nil || !pfx.Contains(src) {
				continue
			}
			b = pfx.Bits()
		}
		if b > bits {
			best, bits = f, b
		}
	}
	return claimOf(best)
}

// claimOf is what a fate claims of the packets it covers (nil: none).
func claimOf(best *flip.Fate) fwtest.Claim {
	if best == nil {
		return fwtest.Claim{}
	}
	return fwtest.Claim{
		Known: true, What: best.Fate + " " + best.By,
		Kept:     best.Fate == flip.FateKept,
		Closing:  best.Fate == flip.FateClosing,
		Declared: best.Fate == flip.FateWidening && best.Declared,
	}
}

// TestReferenceNodeFlipDifferential: on the reference node (its own
// dockerd, ufw with routed rules and the ufw-docker arrangement, Docker
// 28's raw drops per published container), ssh only from a jump network,
// a deny list, a service allowed on a second uplink only: every packet of
// every traffic class, from sources inside and outside every prefix the
// found firewall names, is sent before and after a flip that the product's
// preview approved. Nothing passes after that did not pass before unless
// declared; every kept one passes; every closing one is dropped.
func TestReferenceNodeFlipDifferential(t *testing.T) {
	needE2E(t)
	fwtest.RequireTools(t, "iptables", "ip6tables", "ufw", "nsenter")
	r := upRefNodeSpec(t, sandbox.RefSpec{
		Spec: sandbox.Spec{
			Name: "refdiff", Index: 163, Dir: t.TempDir(), Binary: filepath.Join(bin, "adopt-sandbox"),
			Allowed: config.MustPorts([]string{"5353/udp", "8443/tcp"}),
			// Served, not allowed by ufw as such: 22 and 9443 get their
			// restricted rules below, 8081 stays closed.
			Closed: config.MustPorts([]string{"22/tcp", "8081/tcp", "9443/tcp"}),
			Files:  e2eFiles,
		},
		Services: []sandbox.Service{
			refService("mail", 18025, 8025, true),
			refService("web", 18080, 8080, true),
			refService("metrics", 19100, 9100, false),
			refServiceFrom("admin", 18090, 9090, diffJump),
		},
		Images: []string{svcV1},
	}, "modules: []\n")
	e := &diffEnv{r: r, published: []uint16{18025, 18080, 18090, 19100, 18099}}
	e.peer2, e.addr2, e.src2 = secondUplink(t, r)
	r.ufw(t, "allow", "from", diffJump, "to", "any", "port", "22", "proto", "tcp")
	r.ufw(t, "insert", "1", "deny", "from", diffDeny)
	r.ufw(t, "allow", "in", "on", "vd2"+r.Name, "to", "any", "port", "9443", "proto", "tcp")
	docker28RawDrops(t, r)

	found, node := listNode(t, r)
	if out := os.Getenv("ADOPT_REFDIFF_FIXTURE"); out != "" {
		// The found firewall and the node, for unit tests and the bench
		// (the form fwtest.LoadFixture reads).
		b, err := json.MarshalIndent(map[string]any{"ruleset": found, "node": node}, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var prefixes []netip.Prefix
	ports := map[uint16]bool{22: true, 5353: true, 8081: true, 8443: true, 9443: true, 40111: true}
	for _, o := range eval.OpenPortsOn(found, node) {
		if pfx, err := netip.ParsePrefix(o.From); err == nil {
			prefixes = append(prefixes, pfx)
		}
		if o.Direction == firewall.HookInput {
			ports[o.Port], ports[firewall.PortEnd(o)] = true, true
		}
	}
	prefixes = append(prefixes, netip.MustParsePrefix(diffJump), netip.MustParsePrefix(diffDeny))
	var avoid []netip.Prefix
	for _, ifc := range node.Interfaces {
		for _, a := range ifc.Addrs {
			avoid = append(avoid, a.Masked())
		}
	}
	e.sources = append([]netip.Addr{netip.MustParseAddr(r.PeerAddr), netip.MustParseAddr(r.PeerAddr6)}, fwtest.SourcesAround(prefixes, avoid)...)
	addSources(t, r, e.sources[2:])
	for p := range ports {
		e.hostPorts = append(e.hostPorts, p)
	}
	sort.Slice(e.hostPorts, func(i, j int) bool { return e.hostPorts[i] < e.hostPorts[j] })

	// The preview the product computes, for the spec the workflow derives
	// once mail and admin have migrated (their host ports forwarded), dns
	// (5353/udp) declared as a host service, the rest dropped on purpose
	// (9090/tcp: routed to admin's address from one network, which the
	// mesh's table does not carry: the preview names it closing).
	spec := flip.MeshSpec{Node: r.Name,
		Input: []flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: flip.OwnerManagement},
			{Port: config.Port{Num: 5353, Proto: "udp"}, Owner: "dns"}},
		Forward: []flip.Allow{{Port: config.Port{Num: 18025, Proto: "tcp"}, Owner: "mail"},
			{Port: config.Port{Num: 18090, Proto: "tcp"}, Owner: "admin"}},
		Drop: config.MustPorts([]string{"18080/tcp", "19100/tcp", "8443/tcp", "9443/tcp", "9090/tcp"}),
	}
	pv := flip.PreviewFlipOn(found, node, spec)
	for _, f := range pv.Fates {
		t.Logf("fate: %-8s %-10s %+v", f.Fate, f.By, f.Opening)
	}
	if !pv.Approved {
		// Each restriction the found firewall holds must be carried: a
		// refusal here is a defect, named. The kernel differential still
		// runs with the refused ports declared in flip.widen, so that what
		// else the flip does is checked and counted.
		t.Errorf("the preview refused the flip:\n%s", strings.Join(pv.Reasons, "\n"))
		for _, f := range pv.Fates {
			if f.Fate == flip.FateWidening && !slices.Contains(spec.Widen, config.Port{Num: f.Opening.Port, Proto: f.Opening.Proto}) {
				spec.Widen = append(spec.Widen, config.Port{Num: f.Opening.Port, Proto: f.Opening.Proto})
			}
		}
		if pv = flip.PreviewFlipOn(found, node, spec); !pv.Approved {
			t.Fatalf("with %v declared in flip.widen the preview still refuses:\n%s\nruleset:\n%s", spec.Widen, strings.Join(pv.Reasons, "\n"), firewall.Render(found))
		}
		t.Logf("flip.widen %v declared to run the differential", spec.Widen)
	}

	run := newClassRun(e)
	before := run.reach(t)
	for _, c := range []struct {
		src  string
		port uint16
		want bool
	}{{"198.51.100.5", 22, true}, {r.PeerAddr, 22, false}, {r.PeerAddr, 18025, true}, {r.PeerAddr, 18090, false}, {"198.51.100.5", 18090, true}, {r.PeerAddr, 19100, false}} {
		p := fwtest.Packet{Class: "input, uplink", Peer: r.Peer, Proto: "tcp", Src: c.src, Dst: r.Addr, Port: c.port}
		if c.port > 18000 {
			p.Class = "forward through DNAT"
		}
		if got, ok := before[p]; !ok || got != c.want {
			t.Fatalf("before the flip: %v reached=%v (sent %v), want %v: the node is not what the test needs", p, got, ok, c.want)
		}
	}

	fl := flip.NewFlipper(r.NetnsPath())
	plan, err := fl.Flip(spec, pv.FoundFingerprint, pv.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	after := run.reach(t)
	total := run.check(t, "reference node flip", &pv, before, after)
	if total.Kept == 0 || total.Closing == 0 || total.PassedAfter == 0 {
		t.Errorf("%v: the test wants kept, closing and passing packets", total)
	}
	if err := fl.Revert(plan); err != nil {
		t.Fatal(err)
	}
	back := run.reach(t)
	for _, p := range run.pkts {
		if back[p] != before[p] {
			t.Errorf("after the revert %v reached=%v, before the flip %v", p, back[p], before[p])
		}
	}
}

// listNode lists the node's ruleset and reads its interfaces, as the agent
// does.
func listNode(t *testing.T, r *refNode) (*firewall.Ruleset, firewall.Node) {
	t.Helper()
	c, closeNS, err := nft.Dial(r.NetnsPath())
	if err != nil {
		t.Fatal(err)
	}
	defer closeNS()
	rs, err := nft.List(c)
	if err != nil {
		t.Fatal(err)
	}
	node, err := firewall.ReadNode(r.NetnsPath())
	if err != nil {
		t.Fatal(err)
	}
	return rs, node
}

// secondUplink gives the node a second uplink (vd2NAME, 100.64.INDEX.1/30)
// to a peer namespace of its own (100.64.INDEX.2), and returns the peer's
// namespace, the node's address and the peer's.
func secondUplink(t *testing.T, r *refNode) (peer, addr, src string) {
	t.Helper()
	peer = r.Peer + "2"
	addr, src = fmt.Sprintf("100.64.%d.1", r.Index), fmt.Sprintf("100.64.%d.2", r.Index)
	dev := "vd2" + r.Name
	fwtest.Run(t, "", "ip", "netns", "add", peer)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", peer).Run() })
	fwtest.Run(t, "", "ip", "link", "add", dev, "netns", r.Netns, "type", "veth", "peer", "name", "vp2"+r.Name, "netns", peer)
	fwtest.Run(t, "", "ip", "-n", r.Netns, "addr", "add", addr+"/30", "dev", dev)
	fwtest.Run(t, "", "ip", "-n", peer, "addr", "add", src+"/30", "dev", "vp2"+r.Name)
	for _, s := range [][]string{{"-n", r.Netns, "link", "set", dev, "up"}, {"-n", peer, "link", "set", "vp2" + r.Name, "up"}, {"-n", peer, "link", "set", "lo", "up"}} {
		fwtest.Run(t, "", "ip", s...)
	}
	return peer, addr, src
}

// addSources puts srcs on the first peer's link and routes them back from
// the node through the peer.
func addSources(t *testing.T, r *refNode, srcs []netip.Addr) {
	t.Helper()
	f := strings.Fields(fwtest.Run(t, "", "ip", "-n", r.Peer, "-o", "link", "show", "type", "veth"))
	if len(f) < 2 {
		t.Fatal("no veth in the peer namespace")
	}
	dev := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
	for _, s := range srcs {
		if s.Is4() {
			fwtest.Run(t, "", "ip", "-n", r.Peer, "addr", "add", s.String()+"/32", "dev", dev)
			fwtest.Run(t, "", "ip", "-n", r.Netns, "route", "add", s.String()+"/32", "via", r.PeerAddr)
			continue
		}
		fwtest.Run(t, "", "ip", "-n", r.Peer, "addr", "add", s.String()+"/128", "dev", dev, "nodad")
		fwtest.Run(t, "", "ip", "-n", r.Netns, "-6", "route", "add", s.String()+"/128", "via", r.PeerAddr6)
	}
	// The peer answers from whichever of its addresses a packet came to.
	fwtest.Run(t, "", "ip", "-n", r.Peer, "route", "replace", "default", "via", r.Addr)
	fwtest.Run(t, "", "ip", "-n", r.Peer, "-6", "route", "replace", "default", "via", r.Addr6)
}

// docker28RawDrops adds what Docker 28 adds per published container
// (`-t raw -A PREROUTING -d <container> ! -i <bridge> -j DROP`), which the
// node's engine, older, does not write itself.
func docker28RawDrops(t *testing.T, r *refNode) {
	t.Helper()
	for _, name := range strings.Fields(r.engine(t, "ps", "--format", "{{.Names}}")) {
		ip := r.engine(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
		if _, err := netip.ParseAddr(ip); err != nil {
			t.Fatalf("container %s: address %q: %v", name, ip, err)
		}
		r.onNodeOut(t, "iptables", "-t", "raw", "-A", "PREROUTING", "-d", ip+"/32", "!", "-i", "docker0", "-j", "DROP")
	}
}
