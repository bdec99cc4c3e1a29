// Package flipwire holds the flip's values that cross Temporal: the spec of
// the mesh's ruleset (MeshSpec and its parts, the owners it names) and the
// preview (Preview, its fates, the rules not decoded). It does no I/O, so
// the workflows and the CLI read them without linking nftables or netlink;
// firewall/flip derives, previews and applies them.
package flipwire

import (
	"fmt"
	"net/netip"

	"adoption/firewall"
	"adoption/keyfile"
	"adoption/vocab"
)

// ClassAllow is one region of packets the mesh keeps (Name, its
// vocab.Class spelling) in one family, from the sources its Reach names
// (none: any).
type ClassAllow struct {
	Name string `json:"name"`
	Reach
}

// ForwardICMP is ICMP (ip) or ICMPv6 (ip6) of Type forwarded by the mesh:
// from Iif only (a trailing '*' a wildcard), or ("") from any input
// interface but those in NotIif, to any destination, from the sources in
// From (empty: any) except those in Except.
type ForwardICMP struct {
	Family string         `json:"family"`
	Type   uint8          `json:"type"`
	Iif    string         `json:"iif,omitempty"`
	NotIif []string       `json:"not_iif,omitempty"`
	From   []netip.Prefix `json:"from,omitempty"`
	Except []netip.Prefix `json:"except,omitempty"`
}

// Owners the derived ruleset names besides modules.
const (
	OwnerManagement = "management" // the ports the node is managed through (ssh, ...)
	OwnerFoundation = "foundation"
	OwnerMesh       = "mesh"
	// OwnerEssentials keeps what a host needs whatever the modules say:
	// established/related, invalid, loopback, ICMP and ICMPv6 (neighbour
	// discovery, MLD), DHCP client replies where the found firewall
	// allowed them.
	OwnerEssentials = "essentials"
)

// Allow is one port the mesh keeps open, with who keeps it.
type Allow struct {
	Port  vocab.Port `json:"port"`
	Owner string     `json:"owner"`
	// Carried, when set, is the found firewall's restriction of the port,
	// kept in the mesh's table (EffectiveSpec fills it): per family, who
	// may connect; a family not listed stays closed. Nil: every source.
	Carried []Reach `json:"carried,omitempty"`
}

// Reach is who may connect to a kept port in one family: the sources in
// From (empty: any), except those in Except. Both become sets of table
// inet adoption.
type Reach struct {
	Family string         `json:"family"`
	From   []netip.Prefix `json:"from,omitempty"`
	Except []netip.Prefix `json:"except,omitempty"`
	// Iif, when set, are the input interfaces it holds on; NotIif the
	// ones it does not (any other interface). A trailing '*' is a
	// wildcard ("br-*"): an Iif wildcard holds on every interface it
	// matches but the NotIif ones it covers.
	Iif    []string `json:"iif,omitempty"`
	NotIif []string `json:"not_iif,omitempty"`
}

// MeshSpec is what the mesh's own ruleset for one node is derived from.
type MeshSpec struct {
	Node string `json:"node"`
	// Input ports are open to new connections: management ports (owner
	// "management"), the foundation's, every migrated module's.
	Input []Allow `json:"input"`
	// Forward ports are host ports published by migrated modules'
	// containers: forwarded (DNATed) traffic to them is accepted.
	Forward []Allow `json:"forward"`
	// Drop lists the ports the operator deliberately drops at the flip; the
	// preview only reads it.
	Drop []vocab.Port `json:"drop"`
	// Widen lists the ports whose found restriction the operator lets go
	// (flip.widen): they are open to every source after the flip, and the
	// preview approves their widening.
	Widen []vocab.Port `json:"widen,omitempty"`
	// DropClasses and WidenClasses are the traffic classes flip.drop and
	// flip.widen name (class spellings, firewall.Class.Spelling): a
	// dropped class is not carried, a widened one is carried from every
	// source; the preview approves their closing or widening.
	DropClasses  []string `json:"drop_classes,omitempty"`
	WidenClasses []string `json:"widen_classes,omitempty"`
	// DHCP4 and DHCP6 keep the DHCP client's replies (udp 67 -> 68, and
	// 547 -> 546 from link-local). They are not the plan's to set: the
	// preview and the flip set them from the found firewall (DeriveFor).
	DHCP4 bool `json:"dhcp4,omitempty"`
	DHCP6 bool `json:"dhcp6,omitempty"`
	// DHCP4From, when set, are the sources (and interfaces) the found
	// firewall takes a DHCPv4 reply from, where not every one (a deny
	// list before its DHCP rule): the reply is kept from those only.
	DHCP4From []Reach `json:"dhcp4_from,omitempty"`
	// Classes are the traffic classes beyond TCP and UDP by port
	// (eval.Classes: ICMP types, other protocols, broadcast and multicast
	// services) the mesh keeps, each with the found firewall's
	// restriction; ClassesFound says they were read from the found
	// firewall (EffectiveSpec). Without it (a spec from before they were),
	// the input chain accepts the ICMP and ICMPv6 types every host needs,
	// from any source.
	Classes      []ClassAllow `json:"classes,omitempty"`
	ClassesFound bool         `json:"classes_found,omitempty"`
	// Egress are the bridges whose egress the mesh accepts, and Routed the
	// routed forwarding (no DNAT) it keeps: not the plan's to set either,
	// EffectiveSpec reads them from what the found firewall's forward hook
	// lets through (foundForward).
	Egress []Egress `json:"egress,omitempty"`
	Routed []Routed `json:"routed,omitempty"`
	// ForwardICMP is the forwarded ICMP that starts a conversation (an
	// echo request) the mesh keeps: read from the found firewall too.
	ForwardICMP []ForwardICMP `json:"forward_icmp,omitempty"`
	// FromBridges is the traffic from container bridges to the node itself
	// that the found firewall lets through by the bridge's name (a
	// container reaching the host's DNS): not the plan's to set,
	// EffectiveSpec reads it from found (foundBridgeIn).
	FromBridges []BridgeIn `json:"from_bridges,omitempty"`
	// Output is the found firewall's restriction of what the node sends,
	// carried into an output chain (none: no output chain, the node sends
	// anything); EffectiveSpec reads it from found (foundOutput).
	Output []OutputDrop `json:"output,omitempty"`
}

// OwnerRouted keeps routed forwarding the found firewall let through.
const OwnerRouted = "routed"

// Egress is a bridge whose egress the mesh accepts: every new connection
// forwarded from input interface Iif (an nft name, a trailing '*' a
// wildcard) in Family.
type Egress struct {
	Family string `json:"family"`
	Iif    string `json:"iif"`
}

// Routed is routed forwarding (no DNAT) to a network behind the node that
// the mesh keeps: proto to Port..PortEnd in Family, from the sources in
// From (empty: any) except those in Except.
type Routed struct {
	Family  string         `json:"family"`
	Proto   string         `json:"proto"`
	Port    uint16         `json:"port"`
	PortEnd uint16         `json:"port_end,omitempty"`
	From    []netip.Prefix `json:"from,omitempty"`
	Except  []netip.Prefix `json:"except,omitempty"`
}

// BridgeIn is traffic from a container bridge to the node itself that the
// mesh keeps: new connections of Proto to Port..PortEnd in Family coming
// in on Iif (a trailing '*' a wildcard) but the interfaces NotIif (those
// of the found firewall's names the wildcard covers: each is judged on its
// own), from the sources in From (empty: any) except those in Except.
type BridgeIn struct {
	Family  string         `json:"family"`
	Iif     string         `json:"iif"`
	NotIif  []string       `json:"not_iif,omitempty"`
	Proto   string         `json:"proto"`
	Port    uint16         `json:"port"`
	PortEnd uint16         `json:"port_end,omitempty"`
	From    []netip.Prefix `json:"from,omitempty"`
	Except  []netip.Prefix `json:"except,omitempty"`
}

// OutputDrop is a restriction of new packets the node sends that the mesh
// keeps: those of Proto ("tcp", "udp" to Port..PortEnd) or of traffic class
// Class (an ICMP type, another protocol: eval.Classes, outbound) in Family
// pass only to the destinations in To (none: to no destination), or, when
// Any, to every destination but those in Except; the rest is dropped. Oif,
// when set, is the output interface it holds on (a trailing '*' a
// wildcard), and NotOif those it does not: the found firewall's other
// names (for Oif a wildcard, the ones it covers).
type OutputDrop struct {
	Family  string         `json:"family"`
	Oif     string         `json:"oif,omitempty"`
	NotOif  []string       `json:"not_oif,omitempty"`
	Proto   string         `json:"proto,omitempty"`
	Port    uint16         `json:"port,omitempty"`
	PortEnd uint16         `json:"port_end,omitempty"`
	Class   string         `json:"class,omitempty"`
	Any     bool           `json:"any,omitempty"`
	To      []netip.Prefix `json:"to,omitempty"`
	Except  []netip.Prefix `json:"except,omitempty"`
}

// Fates.
const (
	FateKept    = "kept"
	FateClosing = "closing"
	// FateWidening: after the flip a new connection passes from a source it
	// does not pass from now (or passes surely where it passes now only
	// under a condition the evaluator cannot decide, such as a rate limit).
	// Refused unless the port is in flip.widen (Declared).
	FateWidening = "widening"
	// FateUncertain: open now under a condition the evaluator cannot
	// decide for a named reason (a DNAT it cannot follow), and open after
	// the flip: its fate cannot be promised. Refused, with the reason.
	FateUncertain = "uncertain"
)

// Fate is what the flip does to one port the found firewall opens now.
type Fate struct {
	Opening firewall.Opening `json:"opening"`
	// Fate is "kept", "closing", "widening" or "uncertain".
	Fate string `json:"fate"`
	// By names who keeps a kept port: "management", "foundation", a
	// module, "containers" (traffic from a container bridge).
	By string `json:"by,omitempty"`
	// Dropped: closing, and in spec.Drop.
	Dropped bool `json:"dropped,omitempty"`
	// Declared: widening, and in spec.Widen.
	Declared bool `json:"declared,omitempty"`
	// Reason says why a widening or uncertain fate is one: the found
	// restriction that would not be carried.
	Reason string `json:"reason,omitempty"`
}

// Preview says what a flip would do and whether it may go ahead.
type Preview struct {
	Approved           bool     `json:"approved"`
	Reasons            []string `json:"reasons,omitempty"`
	Fates              []Fate   `json:"fates"`
	FoundFingerprint   string   `json:"found_fingerprint"`
	DerivedFingerprint string   `json:"derived_fingerprint"`
	// Undecoded names each rule of the found firewall that decides a
	// packet's fate through a part the evaluator could not decode
	// (package unknowns fills it on the node).
	Undecoded []Undecoded `json:"undecoded,omitempty"`
	// NodeFiles are the fates of the node files, which converge at the
	// flip: kept, changed and conflicting keys, the keyed digest of what
	// each would hold, never a value (the node fills it).
	NodeFiles []keyfile.FileMerge `json:"node_files,omitempty"`
}

// Undecoded is one rule the evaluator could not wholly decode: where it
// is, and what in it was not decoded.
type Undecoded struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Handle  uint64 `json:"handle"`
	Verdict string `json:"verdict"`
	What    string `json:"what"` // the expression or match, as the decoder names it
}

// Text is the rule as the preview names it.
func (u Undecoded) Text() string {
	return fmt.Sprintf("chain %s %s %s, rule handle %d (%s): %s", u.Family, u.Table, u.Chain, u.Handle, u.Verdict, u.What)
}
