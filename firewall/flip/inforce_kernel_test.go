package flip

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
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
	// What is previewed is what is written: the kernel lists the table
	// the preview approved.
	if plan.MeshFingerprint != derived {
		t.Errorf("the kernel lists table inet adoption as %s, the preview approved %s", plan.MeshFingerprint, derived)
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
	other := *plan
	other.MeshFingerprint = "sha256:other"
	if err := f.InForce(&other, derived); !errors.Is(err, ErrNotInForce) || !strings.Contains(err.Error(), "not the one the flip applied") {
		t.Fatalf("InForce against another mesh table: %v", err)
	}
	other.MeshFingerprint = ""
	if err := f.InForce(&other, "sha256:other"); !errors.Is(err, ErrNotInForce) || !strings.Contains(err.Error(), "not the ruleset the flip applied") {
		t.Fatalf("InForce of a plan without the table's fingerprint, against another derived one: %v", err)
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
	// A rule added by hand to the mesh's table.
	in(n, t, "nft", "add", "rule", "inet", firewall.MeshTable, "input", "tcp", "dport", "9999", "accept")
	notInForce("a rule added to the mesh's table", "table inet adoption is not the one the flip applied")

	// A reboot inside the window: an empty ruleset, then ufw's rules again.
	n.Nft(t, "flush ruleset\n")
	fwtest.RestoreUfw(t, n)
	notInForce("after a reboot", "table inet adoption is not in the ruleset")
}
