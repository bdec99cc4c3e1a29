package flip

import (
	"testing"

	"adoption/firewall"
	"adoption/firewall/fwtest"
)

// Root tests of the boot-time ruleset file: what a node loads at boot must
// be the table the flip put in force.

// meshText renders the mesh's table, for a failure's message.
func meshText(rs *firewall.Ruleset) string {
	for _, tb := range rs.Tables {
		if firewall.TableOwner(&tb).Owner == firewall.OwnedByMesh {
			return firewall.Render(&firewall.Ruleset{Tables: []firewall.Table{tb}})
		}
	}
	return "(no mesh table)"
}

func meshOnly(t *testing.T, rs *firewall.Ruleset) string {
	t.Helper()
	for _, tb := range rs.Tables {
		if firewall.TableOwner(&tb).Owner == firewall.OwnedByMesh {
			return firewall.Fingerprint(&firewall.Ruleset{Tables: []firewall.Table{tb}})
		}
	}
	t.Fatal("no table inet adoption in the ruleset")
	return ""
}

// The boot file loads with nft -f, loads again over itself (a reload of
// nftables.service) without touching any other table, and gives the very
// table the flip writes; after an emptied ruleset (a reboot) it alone
// decides: the spec's ports answer, the others do not.
func TestKernelBootRulesetLoads(t *testing.T) {
	n := ufwDockerNode(t)
	n.Serve(t, []uint16{22, 80, 8081})
	f := NewFlipper(n.Path(n.Node))
	found := n.List(t)
	if _, err := f.Flip(flipSpec, firewall.Fingerprint(found), derivedFP(t, found, flipSpec)); err != nil {
		t.Fatal(err)
	}
	// The flip record keeps the spec as applied on this firewall: ufw's
	// DHCP client rule makes the DHCP essentials part of it.
	applied := EffectiveSpec(found, flipSpec)
	if !applied.DHCP4 {
		t.Fatal("ufw's DHCP client rule did not make DHCP4 an essential")
	}
	flippedRS := n.List(t)
	flipped, flippedText := meshOnly(t, flippedRS), meshText(flippedRS)
	if err := f.Revert(RevertPlanFor(flipSpec.Node)); err != nil {
		t.Fatal(err)
	}
	text, err := BootRuleset(applied, "test boot file\nsecond line")
	if err != nil {
		t.Fatal(err)
	}
	before := firewall.Fingerprint(n.List(t))
	n.Nft(t, text)
	n.Nft(t, text)
	rs := n.List(t)
	if got := meshOnly(t, rs); got != flipped {
		t.Errorf("the boot file's table differs from the one the flip writes:\n%s\nflip wrote:\n%s", meshText(rs), flippedText)
	}
	var others []firewall.Table
	for _, tb := range rs.Tables {
		if firewall.TableOwner(&tb).Owner != firewall.OwnedByMesh {
			others = append(others, tb)
		}
	}
	if firewall.Fingerprint(&firewall.Ruleset{Tables: others}) != before {
		t.Errorf("loading the boot file twice changed tables other than the mesh's")
	}
	n.Nft(t, "flush ruleset\n")
	n.Nft(t, text)
	n.ExpectReach(t, "booted", true, fwtest.Ports("22/tcp", "80/tcp")...)
	n.ExpectReach(t, "booted", false, fwtest.Ports("8081/tcp")...)

	// Something flushes the ruleset after the boot: the guard's Reassert
	// puts the same table back, once.
	n.Nft(t, "flush ruleset\n")
	did, err := f.Reassert(applied)
	if err != nil || !did {
		t.Fatalf("Reassert after a flush: %v %v", did, err)
	}
	if got := meshOnly(t, n.List(t)); got != flipped {
		t.Errorf("the reasserted table differs from the one the flip writes:\n%s\nflip wrote:\n%s", meshText(n.List(t)), flippedText)
	}
	if did, err := f.Reassert(applied); err != nil || did {
		t.Fatalf("Reassert with the table in place: %v %v; want nothing done", did, err)
	}
	n.ExpectReach(t, "reasserted", true, fwtest.Ports("22/tcp", "80/tcp")...)
	n.ExpectReach(t, "reasserted", false, fwtest.Ports("8081/tcp")...)
}
