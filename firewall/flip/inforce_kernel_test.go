package flip

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/fwtest"
)

// What a confirmation checks of the kernel: the flip as applied passes;
// a reboot inside the confirm window (the ruleset emptied, ufw's rules
// loaded again, the mesh's table gone), a lost neutralising rule, a mesh
// table that is not the approved one, and a hand edit of the predecessor
// are each refused, named.
func TestKernelFlipInForce(t *testing.T) {
	n := ufwDockerNode(t)
	f := NewFlipper(n.Path(n.Node))
	found := n.List(t)
	derived := derivedFP(t, found, flipSpec)
	plan, err := f.Flip(flipSpec, firewall.Fingerprint(found), derived)
	if err != nil {
		t.Fatal(err)
	}
	if plan.FoundOwn == "" {
		t.Fatal("the revert plan records no fingerprint of the found firewall's own rules")
	}
	if err := f.InForce(plan, derived); err != nil {
		t.Fatalf("the flip just applied is not in force: %v", err)
	}
	notInForce := func(when, want string) {
		t.Helper()
		err := f.InForce(plan, derived)
		if !errors.Is(err, ErrNotInForce) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: InForce = %v; want %q", when, err, want)
		}
	}
	// Another ruleset than the one approved.
	if err := f.InForce(plan, "sha256:other"); !errors.Is(err, ErrNotInForce) || !strings.Contains(err.Error(), "not the ruleset the flip applied") {
		t.Fatalf("InForce against another derived fingerprint: %v", err)
	}
	// One neutralising accept deleted by hand: ufw decides there again.
	var lost RuleRef
	for _, r := range plan.Neutralised {
		if r.Chain == "ufw-before-logging-input" {
			lost = r
		}
	}
	if lost.Handle == 0 {
		t.Fatalf("no neutralising rule in ufw-before-input: %+v", plan.Neutralised)
	}
	in(n, t, "nft", "delete", "rule", lost.Family, lost.Table, lost.Chain, "handle", strconv.FormatUint(lost.Handle, 10))
	notInForce("a neutralising rule deleted", "chain ip filter ufw-before-logging-input has lost the flip's neutralising rule")

	// A reboot inside the window: an empty ruleset, then ufw's rules again.
	n.Nft(t, "flush ruleset\n")
	fwtest.RestoreUfw(t, n)
	notInForce("after a reboot", "table inet adoption is not in the ruleset")
}
