// This file holds the probe's report of the found firewall: its kind, its
// tables and chains in summary, and what it opens.

package firewall

// Report is what the probe says of the found firewall.
type Report struct {
	// Kind is iptables-nft, nftables or none; Unsupported is set (and the node
	// refused) for whatever the product does not speak (nft.Unspoken,
	// iptables-legacy), naming the table, the chain and the reason.
	Kind        string         `json:"kind"`
	Unsupported string         `json:"unsupported,omitempty"`
	Tables      []TableSummary `json:"tables"`
	Open        []Opening      `json:"open"`
	// Classes are the openings of the traffic classes beyond TCP and UDP
	// by port (ClassOpenings): ICMP types, other protocols, broadcast and
	// multicast services.
	Classes []Opening `json:"classes,omitempty"`
	// Containers are the openings to the node itself from its container
	// bridges (BridgeOpenings): a container reaching a host service.
	Containers []Opening `json:"containers,omitempty"`
	Error      string    `json:"error,omitempty"`
	// Node is what the evaluation knew of the node: its interfaces and
	// whether it forwards. NodeError says why it could not be read (the
	// evaluation then knew nothing, and says more is uncertain).
	Node      Node   `json:"node"`
	NodeError string `json:"node_error,omitempty"`
}

// TableSummary describes a table without its rules.
type TableSummary struct {
	Family string `json:"family"`
	Name   string `json:"name"`
	Ownership
	Chains []ChainSummary `json:"chains"`
}

// ChainSummary describes one chain: base chains carry hook, priority, policy.
type ChainSummary struct {
	Name     string `json:"name"`
	Hook     string `json:"hook,omitempty"`
	Priority *int   `json:"priority,omitempty"`
	Policy   string `json:"policy,omitempty"`
	Rules    int    `json:"rules"`
	Ownership
}
