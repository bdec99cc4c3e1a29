package ufwfixture

import (
	"strings"
	"testing"

	"adoption/config"
)

func count(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// The layout derived from the recorded save keeps all of ufw's chains and
// fixed rules and none of the recorded node's own user rules.
func TestFixedIsSaveWithoutUserRules(t *testing.T) {
	if got := len(Chains()); got != 32 {
		t.Errorf("Chains() = %d, want ufw 0.36's 32", got)
	}
	f := Fixed4()
	if got := count(f, "-A "); got != 65 {
		t.Errorf("Fixed4 has %d rules, want 65", got)
	}
	if count(f, "-A ufw-user-input ")+count(f, "-A ufw-user-forward ") != 0 {
		t.Error("Fixed4 holds the recorded node's user rules")
	}
}

func TestControlHoldsTheAskedRules(t *testing.T) {
	r4, r6 := Control4(54, 52), Control6(54)
	if got := count(r4, "-A ufw-user-input "); got != 54 {
		t.Errorf("IPv4 user input rules = %d, want 54", got)
	}
	if got := count(r4, "-A ufw-user-forward "); got != 52 {
		t.Errorf("IPv4 user forward rules = %d, want 52", got)
	}
	// The sourced IPv4 rules (every fifth past the served ports) have no
	// IPv6 twin.
	if got := count(r6, "-A ufw6-user-input "); got >= 54 || got < 40 {
		t.Errorf("IPv6 user input rules = %d, want the unsourced ones of 54", got)
	}
	if count(r6, ":ufw6-not-local") != 0 {
		t.Error("IPv6 declares not-local, which ufw6 has not")
	}
}

func TestDefaultDenyAcceptsEachAllowedPort(t *testing.T) {
	r := DefaultDeny(config.MustPorts([]string{"22/tcp", "53/udp"}))
	for _, want := range []string{"-A ufw-user-input -p tcp -m tcp --dport 22 -j ACCEPT", "-A ufw-user-input -p udp -m udp --dport 53 -j ACCEPT", ":INPUT DROP"} {
		if !strings.Contains(r, want) {
			t.Errorf("DefaultDeny lacks %q", want)
		}
	}
}
