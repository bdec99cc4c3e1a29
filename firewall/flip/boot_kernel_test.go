package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
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

// A native predecessor's boot file declares, besides its filter table, a
// nat table the flip keeps and a table with both a filter base chain (the
// commit deletes it) and a nat chain (kept). The boot file written at
// commit loads, after an emptied ruleset, the mesh's table as the flip
// wrote it and the kept tables without the deleted chain, and no filter
// table of the predecessor's; loaded twice (a reload) it changes nothing.
func TestKernelBootFileCarriesKeptTables(t *testing.T) {
	n := newFlipNet(t)
	const found = `#!/usr/sbin/nft -f
flush ruleset
define web = { 80, 443 }
table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iifname "lo" accept
		tcp dport 22 accept # ssh
		tcp dport $web accept
	}
	chain forward { type filter hook forward priority filter; policy drop; }
}
table ip natp {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 192.0.2.0/24 masquerade comment "to the lab"
	}
}
table inet mixed {
	chain gate {
		type filter hook input priority 10; policy accept;
	}
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		ip daddr 198.51.100.0/24 masquerade
	}
}
`
	n.Nft(t, found)
	n.Serve(t, []uint16{22, 80, 443})
	spec := MeshSpec{Node: "n1", Input: concat(allow(OwnerManagement, "22/tcp"), allow("web", "80/tcp", "443/tcp"))}
	eff := EffectiveSpec(n.List(t), spec) // the spec the flip records, and the commit writes
	f, _, plan := previewedFlip(t, n, spec)
	if _, err := f.Commit(plan); err != nil {
		t.Fatal(err)
	}
	committed := n.List(t)
	text, notes, err := BootFile(eff, "test", found+"table ip6 gone {\n\tchain c { type filter hook input priority 0; policy drop; }\n}\n", plan, committed)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "flush ruleset") || strings.Contains(text, "table ip6 gone") || len(notes) != 1 || !strings.Contains(notes[0], "table ip6 gone") {
		t.Fatalf("boot file flushes the ruleset or leaves something out (%v):\n%s", notes, text)
	}
	n.Nft(t, "flush ruleset\n")
	n.Nft(t, text)
	n.Nft(t, text)
	booted := n.List(t)
	if got, want := meshOnly(t, booted), meshOnly(t, committed); got != want {
		t.Errorf("the booted mesh table differs from the committed one:\n%s", meshText(booted))
	}
	listing := n.Listing(t)
	for _, want := range []string{"table ip natp", `ip daddr 192.0.2.0/24 masquerade comment "to the lab"`, "table inet mixed", "chain post", "ip daddr 198.51.100.0/24 masquerade"} {
		if !strings.Contains(listing, want) {
			t.Errorf("after the boot %q is missing:\n%s", want, listing)
		}
	}
	for _, gone := range []string{"table inet filter", "chain gate"} {
		if strings.Contains(listing, gone) {
			t.Errorf("after the boot the predecessor's %q is back:\n%s", gone, listing)
		}
	}
	if strings.Count(listing, "198.51.100.0/24") != 1 {
		t.Errorf("a reload doubled a kept table's rules:\n%s", listing)
	}
	n.ExpectReach(t, "booted", true, fwtest.Ports("22/tcp", "80/tcp", "443/tcp")...)

	// The kept tables are all declared in the found file; without the nat
	// table there, the boot would leave it out, and Unbooted names it.
	if missing, rules, err := Unbooted(committed, found, plan, nil); err != nil || len(missing) != 0 || len(rules) != 0 {
		t.Errorf("Unbooted with every kept table declared: %v %v %v", missing, rules, err)
	}
	noNat := strings.Replace(found, "table ip natp", "table ip other", 1)
	if missing, _, err := Unbooted(committed, noNat, plan, nil); err != nil || len(missing) != 1 || missing[0] != (TableRef{Family: "ip", Name: "natp"}) {
		t.Errorf("Unbooted with table ip natp undeclared: %v %v", missing, err)
	}

	// An include cannot be judged: refused, naming it.
	if _, _, err := BootFile(spec, "test", "include \"/etc/nftables.d/*.nft\"\n", plan, committed); err == nil || !strings.Contains(err.Error(), "includes other files") {
		t.Errorf("an include was not refused: %v", err)
	}
}

// previewedFlip previews spec on n's ruleset, which must approve, and
// flips to it.
func previewedFlip(t *testing.T, n *fwtest.TestNet, spec MeshSpec) (*Flipper, Preview, *RevertPlan) {
	t.Helper()
	p := PreviewFlip(n.List(t), spec)
	if !p.Approved {
		t.Fatalf("preview refused: %v", p.Reasons)
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, p.FoundFingerprint, p.DerivedFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	return f, p, plan
}
