package ufwfixture

// This file holds the control node's ruleset: ufw's layout with many user
// rules and Docker's chains beside it, as the bench's probe loads it.

import (
	_ "embed"
	"fmt"
	"strings"
)

// Control4 is iptables-restore input for the control node: ufw
// 0.36's own chain layout and fixed rules (as ufw writes them on Debian 12),
// `in` user rules in ufw-user-input (single ports, ranges, UDP, some from a
// source network), `fwd` route rules in ufw-user-forward (to containers),
// and Docker's chains and nat beside them.
func Control4(in, fwd int) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, c := range Chains() {
		fmt.Fprintf(&b, ":ufw-%s - [0:0]\n", c)
	}
	b.WriteString(":DOCKER - [0:0]\n:DOCKER-USER - [0:0]\n:DOCKER-FORWARD - [0:0]\n")
	b.WriteString(Fixed4())
	b.WriteString("-I FORWARD -j DOCKER-USER\n-I FORWARD 2 -j DOCKER-FORWARD\n-A DOCKER-USER -j RETURN\n")
	b.WriteString("-A DOCKER-FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A DOCKER-FORWARD -o docker0 -j DOCKER\n-A DOCKER-FORWARD -i docker0 -j ACCEPT\n")
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, "-A DOCKER -d 172.17.0.%d/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 8080 -j ACCEPT\n", 2+i)
	}
	for _, r := range userInputRules(in, true) {
		b.WriteString("-A ufw-user-input " + r + "\n")
	}
	for i := 0; i < fwd; i++ {
		fmt.Fprintf(&b, "-A ufw-user-forward -d 172.17.%d.%d/32 -p tcp -m tcp --dport %d -j ACCEPT\n", i/50, 2+i%50, 8000+i)
	}
	b.WriteString("COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:DOCKER - [0:0]\n")
	b.WriteString("-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER\n")
	b.WriteString("-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n-A DOCKER -i docker0 -j RETURN\n")
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&b, "-A DOCKER ! -i docker0 -p tcp -m tcp --dport %d -j DNAT --to-destination 172.17.0.%d:8080\n", 31000+i, 2+i)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Control6 is the IPv6 half: the same layout, ufw6- chains, and the
// user rules that have no IPv4 source.
func Control6(in int) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, c := range Chains() {
		if c == "not-local" {
			continue
		}
		fmt.Fprintf(&b, ":ufw6-%s - [0:0]\n", c)
	}
	b.WriteString(Fixed6)
	for _, r := range userInputRules(in, false) {
		b.WriteString("-A ufw6-user-input " + r + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// userInputRules are `n` ufw allow rules: the served ports first, then a
// mix of single ports, ranges, UDP, and (IPv4 only) ports open to a source
// network. withSource false leaves the sourced ones out.
func userInputRules(n int, withSource bool) []string {
	var out []string
	for i, p := range []int{22, 25, 53, 80, 443, 587, 993, 5000, 8080, 8443, 9100} {
		if i >= n {
			return out
		}
		out = append(out, fmt.Sprintf("-p tcp -m tcp --dport %d -j ACCEPT", p))
	}
	for i := len(out); i < n; i++ {
		port := 20000 + i*10
		switch i % 5 {
		case 0:
			out = append(out, fmt.Sprintf("-p tcp -m multiport --dports %d:%d -j ACCEPT", port, port+5))
		case 1:
			out = append(out, fmt.Sprintf("-p udp -m udp --dport %d -j ACCEPT", port))
		case 2:
			switch {
			case !withSource:
			case i < 256:
				out = append(out, fmt.Sprintf("-s 10.%d.0.0/16 -p tcp -m tcp --dport %d -j ACCEPT", i, port))
			default: // a node many times the control node's size
				out = append(out, fmt.Sprintf("-s 100.%d.%d.0/24 -p tcp -m tcp --dport %d -j ACCEPT", 64+i/256, i%256, port))
			}
		default:
			out = append(out, fmt.Sprintf("-p tcp -m tcp --dport %d -j ACCEPT", port))
		}
	}
	return out
}

// Fixed6 is the IPv6 counterpart of Fixed4, shortened to the rules that
// decide (not derived from Save6, which holds more).
//
//go:embed testdata/fixed6.rules
var Fixed6 string
