// Package hold holds new TCP connections to a module's published ports
// while the container cutover swaps its container, so a client's SYN waits
// instead of meeting a reset. It writes a table of its own (inet
// adoption_hold), never the found firewall's. Only the cutover uses it;
// docs/firewall.md ("The SYN hold") says how it works.
package hold
