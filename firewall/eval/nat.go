// This file holds the NAT paths: the nat table's prerouting decides where a
// client's packet goes (input, or forward to a DNAT target), and each path
// is evaluated at its hook.

package eval

import (
	"fmt"
	"iter"
	"net/netip"

	"adoption/firewall"
)

// natEnd is one way the nat chains at prerouting may end for a packet:
// dropped, not translated (target nil), or DNATed to target.
type natEnd struct {
	drop   bool
	target *firewall.NATTarget
}

// natHook runs the nat base chains in priority order: a chain that
// accepts (or returns) hands the packet to the next, a NAT statement ends
// them all (nf_nat_inet_fn stops once the binding is set up), a drop is
// final.
func (e *Evaluator) natHook(bases []ChainRef, pkt Packet) []natEnd {
	e.pkt = pkt
	e.reset()
	e.nat, e.targets = true, e.targets[:0]
	defer func() { e.nat = false }()
	cont := true
	var ends outcome
	for _, b := range bases {
		if !cont {
			break
		}
		o := e.runBase(b)
		ends |= o &^ outAccept
		cont = o&outAccept != 0
	}
	var out []natEnd
	if cont {
		out = append(out, natEnd{})
	}
	if ends&outDrop != 0 {
		out = append(out, natEnd{drop: true})
	}
	for i := range e.targets {
		if ends&(outDNAT<<i) != 0 {
			t := e.targets[i]
			out = append(out, natEnd{target: &t})
		}
	}
	return out
}

// path is where a client's connection ends up: the hook that decides it,
// the DNAT target it was sent to, and why it cannot be decided, if so.
type path struct {
	dir, via, reason string
	// routed: forwarded without a DNAT, to an address beyond the node.
	routed bool
}

// paths are the paths one client packet may take, each with its result:
// a handful at most, so a slice searched in order costs less than a map
// (a preview asks for them at every port interval and source).
type paths []pathResult

type pathResult struct {
	p path
	r Result
}

// join adds r to p's result: accepted, or maybe dropped, where either is.
func (ps *paths) join(p path, r Result) {
	for i := range *ps {
		if o := &(*ps)[i]; o.p == p {
			o.r.Accept, o.r.drop = o.r.Accept || r.Accept, o.r.drop || r.drop
			return
		}
	}
	*ps = append(*ps, pathResult{p, r})
}

// get is p's result, and whether the packet may take p.
func (ps paths) get(p path) (Result, bool) {
	for _, o := range ps {
		if o.p == p {
			return o.r, true
		}
	}
	return Result{}, false
}

// all ranges over the paths with their results.
func (ps paths) all() iter.Seq2[path, Result] {
	return func(yield func(path, Result) bool) {
		for _, o := range ps {
			if !yield(o.p, o.r) {
				return
			}
		}
	}
}

// client evaluates one client packet the whole way: prerouting, nat, then
// the input or forward hook of each way the nat chains may send it. A path
// is in the result when the packet may take it.
//
// A client from outside a node with several uplinks comes in by one of
// them: the packet is evaluated once per uplink it may come in by (all
// but the one it is routed to), so that rules telling interfaces apart
// are read together ("iifname != lan accept" then "iifname lan accept"
// let every uplink through), and the results are joined: a path some
// uplink takes and another does not is taken only maybe.
func (e *Evaluator) client(st *stages, pkt Packet) paths {
	ups := splitUplinks(pkt)
	if ups == nil {
		return e.clientOn(st, pkt)
	}
	// ownNet: the uplink whose network a routed path goes to, which a
	// client coming in by it does not take (not routed through the node).
	ownNet := map[string]string{}
	for _, d := range st.routed {
		if d.iface != "" {
			ownNet[d.via] = d.iface
		}
	}
	per := make([]paths, len(ups))
	var out paths
	for i, u := range ups {
		q := pkt
		q.iif = u
		per[i] = e.clientOn(st, q)
		for _, o := range per[i] {
			out.join(o.p, o.r)
		}
	}
	for j := range out {
		o := &out[j]
		for i, u := range ups {
			if _, ok := per[i].get(o.p); !ok && !(o.p.routed && ownNet[o.p.via] == u) {
				o.r.drop = true // not taken coming in by u
			}
		}
	}
	return out
}

// splitUplinks are the uplinks a client's packet may come in by, when
// it is to be evaluated once per uplink (client): a client from outside
// (no input interface decided) on a node with two or more uplinks besides
// the one it is routed to. nil: evaluated once.
func splitUplinks(pkt Packet) []string {
	if pkt.iif != "" || pkt.node == nil || !pkt.node.HasInterfaces() {
		return nil
	}
	var ups []string
	for _, u := range pkt.node.Uplinks() {
		if u != pkt.notIif {
			ups = append(ups, u)
		}
	}
	if len(ups) < 2 {
		return nil
	}
	return ups
}

// clientOn is client for a packet whose input interface is decided (or
// need not be split).
func (e *Evaluator) clientOn(st *stages, pkt Packet) paths {
	var out paths
	e.clientTo(st, pkt, out.join)
	return out
}

// clientPassage is how the packet fares at the input hook
// (clientReach's).
func (e *Evaluator) clientPassage(st *stages, pkt Packet) Passage {
	r := e.clientReach(st, pkt, firewall.HookInput)
	return Passage{Open: r.Accept, Unsure: r.Accept && r.drop}
}

// clientReach is how the packet fares at dir: the results of the paths
// of dir (reachesDir) joined as they come, without client's map of every
// path.
func (e *Evaluator) clientReach(st *stages, pkt Packet, dir string) Result {
	var r Result
	if splitUplinks(pkt) != nil {
		for p, x := range e.client(st, pkt).all() {
			if reachesDir(p, dir) {
				r.Accept, r.drop = r.Accept || x.Accept, r.drop || x.drop
			}
		}
		return r
	}
	e.clientTo(st, pkt, func(p path, x Result) {
		if reachesDir(p, dir) {
			r.Accept, r.drop = r.Accept || x.Accept, r.drop || x.drop
		}
	})
	return r
}

// clientTo is client, each path's result handed to add as it is found
// (a path may come more than once: its results are joined).
func (e *Evaluator) clientTo(st *stages, pkt Packet, add func(path, Result)) {
	pkt.Hook = firewall.HookPrerouting
	// Only routed forwarding asked for, to an address not known: what
	// prerouting and nat decide leads to no path asked for.
	pre := Result{}
	if !e.skips(path{dir: firewall.HookInput}) || !e.skips(path{dir: firewall.HookForward}) || pkt.Dst.IsValid() {
		pre = e.Hook(st.pre, pkt)
	}
	if pre.Accept {
		ends := e.natHook(st.nat, pkt)
		unsure := pre.drop || len(ends) > 1
		for _, end := range ends {
			if end.drop {
				continue
			}
			var p path
			var r Result
			if end.target == nil && pkt.Dst.IsValid() && !pkt.Local && !pkt.node.Local(pkt.Dst) && pkt.Cast == 0 {
				if e.skips(path{dir: firewall.HookForward, routed: true}) {
					continue
				}
				p, r = e.routed(st, pkt)
			} else if end.target == nil {
				q := pkt
				q.Hook = firewall.HookInput
				p = path{dir: firewall.HookInput}
				if e.skips(p) {
					continue
				}
				r = e.Hook(st.input, q)
			} else {
				p, r = e.dnat(st, pkt, end.target)
			}
			if e.skips(p) {
				continue
			}
			if unsure {
				r.drop = true // the packet may not take this path at all
			}
			add(p, r)
		}
	}
	switch {
	case pkt.Dst.IsValid():
	case pkt.node.HasInterfaces():
		// Routed through the node to the networks behind it.
		e.routedClient(st, pkt, add)
	case pkt.node.Forwards(pkt.Family):
		// Routed to an address beyond the node that is not known: all a
		// node known only by its ruleset says.
		q := pkt
		q.Hook = firewall.HookForward
		if p := (path{dir: firewall.HookForward, routed: true}); !e.skips(p) {
			add(p, e.Hook(st.forward, q))
		}
	}
}

// routed follows a packet sent to pkt.Dst, an address beyond the node
// (a container's, routed through it), that no DNAT rewrote: the forward
// hook, out by the interface whose network holds it.
func (e *Evaluator) routed(st *stages, pkt Packet) (path, Result) {
	p := path{dir: firewall.HookForward, via: firewall.ViaOf(pkt.Dst, pkt.Port), routed: true}
	if pkt.via != "" {
		p.via = pkt.via
	}
	if !pkt.node.Forwards(pkt.Family) {
		return p, Result{drop: true}
	}
	q := pkt
	q.Hook = firewall.HookForward
	if pkt.node.HasInterfaces() {
		oif, ok := pkt.node.OifFor(pkt.Dst)
		if !ok {
			p.reason = fmt.Sprintf("%s is on none of the node's networks: where it is routed is not known", pkt.Dst)
		}
		q.oif = oif
	}
	r := e.Hook(st.forward, q)
	if p.reason != "" && r.Accept {
		r.drop = true
	}
	return p, r
}

// dnat follows a DNATed packet to the hook that decides it.
func (e *Evaluator) dnat(st *stages, pkt Packet, t *firewall.NATTarget) (path, Result) {
	unsure := Result{Accept: true, drop: true}
	if t.Unknown != "" {
		return path{dir: firewall.HookForward, reason: "DNAT to a destination the evaluator cannot read: " + t.Unknown}, unsure
	}
	if lo, hi, isRange := t.Ports(); isRange && t.RandomPort {
		return e.randomPort(st, pkt, t, lo, hi)
	}
	port := t.PortFor(pkt.Port)
	via := firewall.ViaOf(t.Addr, port)
	if t.Local || pkt.node.Local(t.Addr) && !t.Addr.IsLoopback() {
		p := path{dir: firewall.HookInput, via: via}
		if e.skips(p) {
			return p, Result{}
		}
		q := pkt
		q.Hook, q.Port, q.Dnat = firewall.HookInput, port, true
		return p, e.Hook(st.input, q)
	}
	if t.Addr.IsLoopback() {
		return path{dir: firewall.HookInput, via: via, reason: "DNAT to a loopback address, which the kernel routes only with route_localnet"}, unsure
	}
	if (t.Addr.Is4() && pkt.Family != firewall.FamilyIP) || (t.Addr.Is6() && pkt.Family != firewall.FamilyIP6) {
		return path{dir: firewall.HookForward, via: via, reason: "DNAT to an address of the other family"}, unsure
	}
	if !pkt.node.Forwards(pkt.Family) {
		return path{dir: firewall.HookForward, via: via}, Result{drop: true} // the node routes nothing on
	}
	if p := (path{dir: firewall.HookForward, via: via}); e.skips(p) {
		// Not asked for (client leaves it out): neither is what the
		// forward hook makes of it, nor where it is routed.
		return p, Result{}
	}
	oif := ""
	if pkt.node.HasInterfaces() {
		name, ok := pkt.node.OifFor(t.Addr)
		if !ok {
			return e.unmapped(st, pkt, t.Addr, port, via)
		}
		oif = name
	}
	q := pkt
	q.Hook, q.Port, q.Dst, q.Dnat, q.oif = firewall.HookForward, port, t.Addr, true, oif
	return path{dir: firewall.HookForward, via: via}, e.Hook(st.forward, q)
}

// unmapped follows a packet DNATed to an address on none of the node's
// networks: where the kernel routes it is not known, so the forward hook
// runs with the output interface undecided. A drop there whatever the
// route closes the port (a flip's mesh drops undeclared ports so, and
// flip.drop can then be kept); anything else stays uncertain, named.
func (e *Evaluator) unmapped(st *stages, pkt Packet, addr netip.Addr, port uint16, via string) (path, Result) {
	q := pkt
	q.Hook, q.Port, q.Dst, q.Dnat, q.oif = firewall.HookForward, port, addr, true, ""
	if r := e.Hook(st.forward, q); !r.Accept {
		return path{dir: firewall.HookForward, via: via}, r
	}
	return path{dir: firewall.HookForward, via: via, reason: fmt.Sprintf("DNAT target %s is on none of the node's networks: where it is routed is not known", addr)},
		Result{Accept: true, drop: true}
}

// randomPort follows a packet DNATed to a port range the kernel picks from
// at random: every port of the range may be the one, so the hook is run
// once per port interval of the range (e.bounds), and the outcomes are
// joined. All the same: decided (a mesh that drops the published port
// closes it, so flip.drop clears it); otherwise uncertain, named.
func (e *Evaluator) randomPort(st *stages, pkt Packet, t *firewall.NATTarget, lo, hi uint16) (path, Result) {
	fixed := *t
	var p path
	var r Result
	first := true
	for _, start := range portStarts(e.bounds, lo, hi) {
		fixed.PortMin, fixed.PortMax, fixed.RandomPort = start, start, false
		q, res := e.dnat(st, pkt, &fixed)
		if first {
			p, first = q, false
		}
		if q.reason != "" && p.reason == "" {
			p.reason = q.reason
		}
		r.Accept, r.drop = r.Accept || res.Accept, r.drop || res.drop
	}
	host := ""
	switch {
	case t.Local || !t.Addr.IsValid():
	case t.Addr.Is6():
		host = "[" + t.Addr.String() + "]"
	default:
		host = t.Addr.String()
	}
	p.via = fmt.Sprintf("%s:%d-%d", host, lo, hi)
	if r.Accept && r.drop && p.reason == "" {
		p.reason = fmt.Sprintf("DNAT picks a port of %d-%d at random, and the ruleset lets some of them through and not others", lo, hi)
	}
	return p, r
}

// portStarts are the starts of the port intervals (bounds, sorted, from
// 0) that meet lo-hi: one port of each is enough to evaluate.
func portStarts(bounds []int, lo, hi uint16) []uint16 {
	out := []uint16{lo}
	for _, b := range bounds {
		if b > int(lo) && b <= int(hi) {
			out = append(out, uint16(b))
		}
	}
	return out
}
