// Package ufwfixture is the ufw ruleset that tests, the sandbox and the
// bench load into a namespace with iptables-restore: ufw 0.36's recorded
// layout (Save4, Save6), a control node grown from it (Control4, Control6)
// and the short default-deny layout the sandbox raises (DefaultDeny). It
// runs nothing and is imported by no production code.
package ufwfixture

import (
	_ "embed"
	"fmt"
	"strings"

	"adoption/config"
)

// Chains are ufw's own IPv4 chains, without the "ufw-" prefix, in the
// order Save4 declares them. IPv6 has the same ones but not-local.
func Chains() []string {
	var out []string
	for _, l := range strings.Split(Save4, "\n") {
		if name, ok := strings.CutPrefix(l, ":ufw-"); ok {
			out = append(out, strings.TrimSuffix(name, " - [0:0]"))
		}
	}
	return out
}

// Fixed4 is what ufw 0.36 writes around the user rules (IPv4): the rules
// of Save4 outside ufw-user-input and ufw-user-forward, one a line.
func Fixed4() string {
	var b strings.Builder
	for _, l := range strings.Split(Save4, "\n") {
		if !strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, "-A ufw-user-input ") || strings.HasPrefix(l, "-A ufw-user-forward ") {
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// defaultDenyHead is DefaultDeny up to its allowed ports: base chains that
// drop and the ufw-* chains that decide.
//
//go:embed testdata/defaultdeny.rules
var defaultDenyHead string

// DefaultDeny is an iptables-restore input laid out as ufw lays out its
// default-deny ruleset, shortened: base chains that drop, the ufw-* chains
// that decide, and one accept per allowed port in ufw-user-input.
func DefaultDeny(allowed []config.Port) string {
	var b strings.Builder
	b.WriteString(defaultDenyHead)
	for _, p := range allowed {
		fmt.Fprintf(&b, "-A ufw-user-input -p %s -m %s --dport %d -j ACCEPT\n", p.Proto, p.Proto, p.Num)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
