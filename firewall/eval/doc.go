// Package eval is the evaluator: which (port, proto) a new connection from
// outside reaches on the node, through the nat table's DNAT into the input
// or forward hook, per port interval and source region; and the probe's
// read-only report built on it. It writes nothing to the kernel. The
// packet and its path are specified in docs/firewall.md. Beyond ports,
// the input hook is compared over regions of the header space
// (firewall.ClassesOf: protocol, ICMP type, destination, ports, cut by
// both rulesets' rules; classes.go), one synthetic packet per region.
package eval

import ()
