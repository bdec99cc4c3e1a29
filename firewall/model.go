// This file holds the model a listed ruleset is decoded into: tables,
// chains, rules, their conditions and verdicts, and the openings the
// evaluator reports.

package firewall

import (
	"fmt"
	"net/netip"

	"adoption/vocab"
)

// Families of tables the model understands. Other families (arp, bridge,
// netdev) are listed but never evaluated: they do not filter the IP input and
// forward hooks.
const (
	FamilyIP   = vocab.FamilyIP
	FamilyIP6  = vocab.FamilyIP6
	FamilyInet = "inet"
)

// Hooks the evaluator runs. Other hooks are kept with their numeric name so a
// listing still shows them.
const (
	HookPrerouting = "prerouting"
	HookInput      = "input"
	HookForward    = "forward"
	HookOutput     = "output"
)

// Ruleset is the whole found firewall as the kernel holds it.
type Ruleset struct {
	Tables []Table `json:"tables"`
}

// Table is one nftables table.
type Table struct {
	Family string  `json:"family"`
	Name   string  `json:"name"`
	Chains []Chain `json:"chains"`
	Sets   []Set   `json:"sets,omitempty"`
	// Unknown says why parts of the table (its sets) could not be listed.
	Unknown []string `json:"unknown,omitempty"`
}

// Chain is one chain. A base chain has a Hook; a regular chain has none.
type Chain struct {
	Name     string `json:"name"`
	Hook     string `json:"hook,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Policy   string `json:"policy,omitempty"`
	Type     string `json:"type,omitempty"`
	Rules    []Rule `json:"rules"`
	// Unknown is set when the chain's rules could not be listed at all
	// (google/nftables refuses the whole dump when one expression fails to
	// decode); the evaluator then treats the chain as able to do anything.
	Unknown string `json:"unknown,omitempty"`
}

// Set is a named or anonymous set with its elements. Keys are raw bytes as
// the kernel holds them; what they mean depends on the expression that looks
// them up.
type Set struct {
	Name      string       `json:"name"`
	Anonymous bool         `json:"anonymous,omitempty"`
	Interval  bool         `json:"interval,omitempty"`
	Concat    bool         `json:"concat,omitempty"`
	IsMap     bool         `json:"is_map,omitempty"`
	KeyLen    int          `json:"key_len,omitempty"`
	Elements  []SetElement `json:"elements,omitempty"`
}

// SetElement is one element; IntervalEnd marks the exclusive end of an
// interval in an interval set. Verdict is set for verdict maps.
type SetElement struct {
	Key         []byte   `json:"key"`
	IntervalEnd bool     `json:"interval_end,omitempty"`
	Verdict     *Verdict `json:"verdict,omitempty"`
}

// Rule is one rule: a conjunction of conditions and a verdict.
type Rule struct {
	Handle  uint64  `json:"handle"`
	Comment string  `json:"comment,omitempty"`
	Conds   []Cond  `json:"conds,omitempty"`
	Verdict Verdict `json:"verdict"`
	// VMap, when set, replaces Verdict: the first entry whose condition
	// holds gives the verdict; if none holds the rule does nothing. Entries
	// come from one verdict map, whose keys are disjoint.
	VMap []VMapEntry `json:"vmap,omitempty"`
	// Unknown lists the parts of the rule that were not decoded, with why.
	// Each is also present as an undecidable condition when it can affect
	// whether the rule matches.
	Unknown []string `json:"unknown,omitempty"`
	// Writes names what the rule changes in a packet it matches, besides
	// its verdict: a header, a mark, conntrack, an address it translates
	// ("meta mark set", "payload write", "xt target MARK", "nat"). The
	// evaluator does not follow them; a chain it does not run is refused
	// when one of its rules writes (nft.Unspoken).
	Writes []string `json:"writes,omitempty"`
}

// VMapEntry is one element of a verdict map.
type VMapEntry struct {
	Cond    Cond    `json:"cond"`
	Verdict Verdict `json:"verdict"`
}

// VerdictKind is what a rule does with a packet that matches it.
type VerdictKind string

// Verdict kinds. Continue means the rule has no verdict (counter, log,
// mark setting): evaluation goes on with the next rule. Unknown means a
// terminal action whose outcome the evaluator cannot know (a queue to
// userspace, an unknown xtables target): any outcome is possible.
const (
	VerdictAccept   VerdictKind = "accept"
	VerdictDrop     VerdictKind = "drop"
	VerdictReject   VerdictKind = "reject"
	VerdictJump     VerdictKind = "jump"
	VerdictGoto     VerdictKind = "goto"
	VerdictReturn   VerdictKind = "return"
	VerdictContinue VerdictKind = "continue"
	VerdictUnknown  VerdictKind = "unknown"
	// VerdictDNAT rewrites the destination (DNAT, REDIRECT, "dnat to",
	// "redirect to") and, like accept, ends the base chain; NAT says where
	// to. SNAT and MASQUERADE stay accept: they act after filtering.
	VerdictDNAT VerdictKind = "dnat"
)

// Verdict is a rule's verdict; Target names the chain of a jump or goto.
type Verdict struct {
	Kind   VerdictKind `json:"kind"`
	Target string      `json:"target,omitempty"`
	NAT    *NATTarget  `json:"nat,omitempty"`
}

// NATTarget is where a DNAT sends a connection. Addr is invalid for a
// redirect (Local: the node itself) or when the address could not be read
// (Unknown says why). Ports 0-0 keep the client's port; a range picks one:
// the client's port if it lies in the range, else the range's first
// (nf_nat's get_unique_tuple for a new connection), unless RandomPort says
// the kernel picks any port of the range (random, fully-random, or an
// offset mapping).
type NATTarget struct {
	Addr       netip.Addr `json:"addr,omitempty"`
	Local      bool       `json:"local,omitempty"`
	PortMin    uint16     `json:"port_min,omitempty"`
	PortMax    uint16     `json:"port_max,omitempty"`
	RandomPort bool       `json:"random_port,omitempty"`
	Unknown    string     `json:"unknown,omitempty"`
}

// Ports is the range a DNAT target picks the new port from, in order;
// ok false when the port is kept (0-0) or the range is one port.
func (t *NATTarget) Ports() (lo, hi uint16, ok bool) {
	lo, hi = t.PortMin, t.PortMax
	if hi < lo {
		lo, hi = hi, lo
	}
	return lo, hi, lo != hi
}

// PortFor is the port a new connection to port p is translated to, when
// the kernel's choice is known (not RandomPort): the one port of the
// target, p itself when it is kept or lies in the range, else the range's
// first port.
func (t *NATTarget) PortFor(p uint16) uint16 {
	lo, hi, isRange := t.Ports()
	switch {
	case lo == 0 && hi == 0:
		return p
	case !isRange:
		return lo
	case lo <= p && p <= hi:
		return p
	}
	return lo
}

// CondKind names what a condition looks at.
type CondKind string

// Condition kinds.
const (
	CondNFProto  CondKind = "nfproto"  // Family: "ip" or "ip6"
	CondL4Proto  CondKind = "l4proto"  // Protos
	CondDport    CondKind = "dport"    // Ports
	CondSport    CondKind = "sport"    // Ports
	CondSaddr    CondKind = "saddr"    // Prefixes
	CondDaddr    CondKind = "daddr"    // Prefixes
	CondIifname  CondKind = "iifname"  // Names; a trailing '*' is a wildcard
	CondOifname  CondKind = "oifname"  // Names
	CondCtState  CondKind = "ctstate"  // Bits: ct state bits, matches if the packet's state bit is in Bits (plus the xt pseudo-states ctStateSNAT, ctStateDNAT)
	CondCtStatus CondKind = "ctstatus" // Bits: IPS_* status bits, matches if the connection has any of them
	// CondOrigDport and CondOrigDaddr look at the connection's original
	// tuple (conntrack "ct original proto-dst", --ctorigdstport,
	// --ctorigdst): the port and address the client used, before a DNAT.
	CondOrigDport CondKind = "origdport" // Ports
	CondOrigDaddr CondKind = "origdaddr" // Prefixes
	CondAddrType  CondKind = "addrtype"  // Bits: 1<<RTN_* of the address named by Addr ("saddr"/"daddr")
	CondPktType   CondKind = "pkttype"   // Bits: 1<<PACKET_* (host, broadcast, multicast, otherhost)
	CondTCPFlags  CondKind = "tcpflags"  // Mask, Value: flags&Mask == Value
	// CondNever never matches the synthetic packet (an ICMP match, a
	// routing header match); Reason says why. Negate does not turn it
	// into a match: the kernel's match fails before any inversion.
	CondNever CondKind = "never"
	// CondICMPType holds for an ICMP packet of the rule's family (ICMP for
	// ip, ICMPv6 for ip6) whose type is in Types (nil: any type) and whose
	// code is 0; for any other packet it is false whatever Negate says (the
	// xt match fails on another protocol before its inversion, and nft's
	// "icmp type" comes after its protocol dependency).
	CondICMPType CondKind = "icmptype" // Types
	// CondHopLimit compares the IP TTL or IPv6 hop limit with Value; Mask
	// is the xt hl/ttl mode (0 ==, 1 !=, 2 <, 3 >).
	CondHopLimit CondKind = "hoplimit"
	// CondUndecidable is a condition the evaluator cannot decide (a rate
	// limit, an undecoded match); Reason says what it is.
	CondUndecidable CondKind = "undecidable"
)

// PortRange is an inclusive port range.
type PortRange struct {
	From uint16 `json:"from"`
	To   uint16 `json:"to"`
}

// Cond is one condition of a rule. Only the fields its Kind names are set.
type Cond struct {
	Kind     CondKind       `json:"kind"`
	Negate   bool           `json:"negate,omitempty"`
	Family   string         `json:"family,omitempty"`
	Protos   []int          `json:"protos,omitempty"`
	Ports    []PortRange    `json:"ports,omitempty"`
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
	Names    []string       `json:"names,omitempty"`
	Bits     uint32         `json:"bits,omitempty"`
	Addr     string         `json:"addr,omitempty"`
	Mask     uint8          `json:"mask,omitempty"`
	Value    uint8          `json:"value,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Types    []int          `json:"types,omitempty"`
}

// Opening is a (port, proto) a new connection from outside can reach, by
// the port the client uses. PortEnd is set for a range of ports with the
// same outcome. From is set when only sources in that prefix reach it (more
// specific prefixes the ruleset names inside it may be treated otherwise).
// To is set when the ruleset treats the node's own addresses differently
// (a "-d 203.0.113.5" publication, "ufw allow to ADDR"): the one address
// the opening is reached at; the node's other addresses have their own.
// Uncertain means the verdict depends on something the evaluator cannot
// decide; Reason, when set, says what.
//
// Direction is "input" for the node's own services and "forward" for a
// published port: a DNAT in the nat table's prerouting sends the
// connection on to Via (the container's address and port, "172.17.0.2:8080")
// through the forward hook. Via is also set for a DNAT to the node itself
// (REDIRECT), with Direction "input".
type Opening struct {
	Port      uint16 `json:"port"`
	PortEnd   uint16 `json:"port_end,omitempty"`
	Proto     string `json:"proto"`
	Direction string `json:"direction"`
	From      string `json:"from,omitempty"`
	To        string `json:"to,omitempty"`
	Uncertain bool   `json:"uncertain,omitempty"`
	Family    string `json:"family"`
	// Via is where a forwarded connection goes: a DNAT's target
	// ("172.17.0.2:8080", ":22" for the node itself), or, for routed
	// forwarding (no DNAT), the network behind the node it is routed to
	// ("172.17.0.0/16", or a prefix of it the ruleset names); "" for routed
	// forwarding on a node known only by its ruleset.
	Via    string `json:"via,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Class spells a region of packets other than unicast TCP and UDP to
	// the node by port (firewall.ClassesOf: ICMP types, protocols,
	// broadcast, multicast and link-local destinations); Proto is then its
	// protocol, Port..PortEnd its ports (or 0) and To its destination (or
	// empty: the node's own, or any).
	Class string `json:"class,omitempty"`
	// In names the container bridge (docker0, br-*) a new connection to
	// the node itself comes in by: a container reaching a host service;
	// "" for a client from outside.
	In string `json:"in,omitempty"`
	// Out names the output interface (a trailing '*' a wildcard) what the
	// node sends leaves by, where the found firewall's output chain tells
	// interfaces apart: one it names, or "" any other (and any interface
	// where it names none).
	Out string `json:"out,omitempty"`
}

// Base chain bits the evaluator uses for the synthetic packet.
const (
	CtStateInvalid     = vocab.CtStateInvalid
	CtStateEstablished = 2
	CtStateRelated     = 4
	CtStateNew         = vocab.CtStateNew
	CtStateUntracked   = vocab.CtStateUntracked
	// xt conntrack's pseudo-states (XT_CONNTRACK_STATE_SNAT/DNAT), moved
	// above every nft ct state bit: "the connection is (S|D)NATed".
	CtStateSNAT = 1 << 16
	CtStateDNAT = 1 << 17

	// ct status bits (IPS_*).
	IpsExpected  = 1 << 0
	IpsSeenReply = 1 << 1
	IpsAssured   = 1 << 2
	IpsConfirmed = 1 << 3
	IpsSrcNAT    = 1 << 4
	IpsDstNAT    = 1 << 5

	RtnUnicast   = 1
	RtnLocal     = 2
	RtnBroadcast = 3
	RtnMulticast = 5

	PacketHost      = vocab.PacketHost
	PacketBroadcast = vocab.PacketBroadcast
	PacketMulticast = vocab.PacketMulticast
)

// IsIPFamily reports whether f is a family that filters IP (ip, ip6, inet).
func IsIPFamily(f string) bool { return f == FamilyIP || f == FamilyIP6 || f == FamilyInet }

// Targets are the chains rule r jumps or goes to, by its verdict or its
// verdict map.
func Targets(r *Rule) []string {
	var out []string
	if (r.Verdict.Kind == VerdictJump || r.Verdict.Kind == VerdictGoto) && r.VMap == nil {
		out = append(out, r.Verdict.Target)
	}
	for _, e := range r.VMap {
		if e.Verdict.Kind == VerdictJump || e.Verdict.Kind == VerdictGoto {
			out = append(out, e.Verdict.Target)
		}
	}
	return out
}

// IsFilter reports whether ch is a filter chain.
func IsFilter(ch *Chain) bool { return ch.Type == "" || ch.Type == "filter" }

// viaOf writes a DNAT target: "172.17.0.2:8080", "[fd00::2]:80", ":9001"
// for the node itself, "172.17.0.2" when the port is kept or unknown.
func ViaOf(a netip.Addr, port uint16) string {
	switch {
	case !a.IsValid() && port == 0:
		return ""
	case !a.IsValid():
		return fmt.Sprintf(":%d", port)
	case port == 0:
		return a.String()
	}
	return netip.AddrPortFrom(a, port).String()
}

// Routed reports whether o is routed forwarding (no DNAT): to a network
// behind the node (Via a prefix), or, on a node known only by its ruleset,
// to an unknown destination (no Via, no Reason).
func (o Opening) Routed() bool {
	if o.Direction != HookForward {
		return false
	}
	if o.Via == "" {
		return o.Reason == ""
	}
	_, err := netip.ParsePrefix(o.Via)
	return err == nil
}

// PortEnd is the last port of opening o.
func PortEnd(o Opening) uint16 {
	if o.PortEnd != 0 {
		return o.PortEnd
	}
	return o.Port
}

// PortText is what an opening is reached by, as people read it: "22/tcp",
// "1000-2000/tcp", or for a region of other packets its spelling
// ("ip icmp type 8", "ip udp to 224.0.0.251 dport 5353", "output").
func PortText(o Opening) string {
	switch {
	case o.Class == "output":
		return o.Class
	case o.Class != "":
		return o.Class
	case o.PortEnd != 0 && o.PortEnd != o.Port:
		return fmt.Sprintf("%d-%d/%s", o.Port, o.PortEnd, o.Proto)
	}
	return fmt.Sprintf("%d/%s", o.Port, o.Proto)
}
