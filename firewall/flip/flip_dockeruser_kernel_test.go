package flip

import (
	"reflect"
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// The flip on the ufw-docker arrangement: ufw's routed policy lives in
// DOCKER-USER (Docker's chain, the operator's rules), so the flip must take
// those rules out of force without touching Docker's own chains, the
// revert must give the ruleset back byte for byte, and the commit must
// delete them and the ufw chains they jump to, Docker's return staying.
// Real packets from the peer through Docker's DNAT decide each step.
func TestKernelFlipUfwDockerUser(t *testing.T) {
	n := fwtest.NewNamedNet(t, "dn-", "dn", "0e")
	fwtest.RequireTools(t, "iptables-nft-restore", "sysctl")
	ctr := n.Container(t)
	fwtest.Run(t, fwtest.UfwDockerRules, "ip", "netns", "exec", n.Node, "iptables-nft-restore")
	fwtest.ServeIn(t, ctr, []uint16{8080, 8081, 8082, 9100})
	n.Serve(t, []uint16{22})
	node, err := firewall.ReadNode(n.Path(n.Node))
	if err != nil {
		t.Fatal(err)
	}
	probes := func(ps ...uint16) []fwtest.Probe {
		var out []fwtest.Probe
		for _, p := range ps {
			out = append(out, fwtest.Probe{Proto: "tcp", Src: fwtest.PeerV4a, Port: p})
		}
		return out
	}
	expect := func(when string, want bool, ps ...uint16) {
		t.Helper()
		for p, got := range n.Reach(t, probes(ps...)) {
			if got != want {
				t.Errorf("%s: %v reached=%v, want %v", when, p, got, want)
			}
		}
	}
	// ufw routes 18080 (8080 to anyone), not 18082: the found firewall.
	expect("before the flip", true, 22, 18080)
	expect("before the flip", false, 18082, 19100)
	before := n.Listing(t)
	natBefore := fwtest.Counters.ReplaceAllString(n.Quiet(t, "nft", "list", "table", "ip", "nat"), "counter")
	dockerBefore := fwtest.Counters.ReplaceAllString(n.Quiet(t, "nft", "list", "chain", "ip", "filter", "DOCKER"), "counter")

	// The mesh declares 18080 and 18082, which ufw does not route: only if
	// ufw-docker's rules are out of force does 18082 answer after the flip.
	// ufw-docker routes 18082 from private networks only; flip.widen lets
	// that restriction go, so the peer's address (198.18.0.2) reaches it.
	spec := MeshSpec{Node: "n1", Input: allow(OwnerManagement, "22/tcp"), Forward: allow("web", "18080/tcp", "18082/tcp"),
		Widen: vocab.MustPorts([]string{"18082/tcp"})}
	found := n.List(t)
	derived, err := DerivedFingerprint(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFlipper(n.Path(n.Node))
	plan, err := f.Flip(spec, firewall.Fingerprint(found), derived)
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, r := range plan.Neutralised {
		in = append(in, r.Chain)
	}
	if !strings.Contains(strings.Join(in, " "), firewall.DockerUserChain) {
		t.Errorf("neutralised in %v, want DOCKER-USER among them", in)
	}
	save := n.Quiet(t, "iptables-save")
	if !strings.Contains(save, "-A DOCKER-USER -m comment --comment \"adoption:n1:flip:neutralise\" -j RETURN\n-A DOCKER-USER -j ufw-user-forward\n") {
		t.Errorf("DOCKER-USER after the flip, want the marked return at its top:\n%s", fwtest.GrepLines(save, "DOCKER-USER"))
	}
	expect("after the flip", true, 22, 18080, 18082)
	expect("after the flip", false, 19100, 18081)
	// What the preview's model says is what the kernel does.
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	model, err := afterFlip(found, d.Ruleset, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eval.OpenPortsOn(n.List(t), node), eval.OpenPortsOn(model, node); !reflect.DeepEqual(got, want) {
		t.Errorf("openings of the flipped kernel ruleset:\n%v\nof the preview's model:\n%v", got, want)
	}

	// Revert: byte for byte what was found, and ufw decides again.
	if err := f.Revert(plan); err != nil {
		t.Fatal(err)
	}
	if after := n.Listing(t); after != before {
		t.Errorf("revert did not give back the ruleset:\n%s", fwtest.Diff(before, after))
	}
	expect("after the revert", false, 18082)

	// Flip again and commit: DOCKER-USER keeps only Docker's return, ufw's
	// chains are gone, Docker's chains and DNAT are as they were.
	found = n.List(t)
	if plan, err = f.Flip(spec, firewall.Fingerprint(found), derived); err != nil {
		t.Fatal(err)
	}
	saved, err := f.Commit(plan)
	if err != nil {
		t.Fatal(err)
	}
	after := n.Listing(t)
	if strings.Contains(after, "ufw") || strings.Contains(after, "neutralise") {
		t.Errorf("after Commit the ruleset still holds ufw's chains or the flip's rules:\n%s", fwtest.GrepLines(after, "ufw"))
	}
	user := n.Quiet(t, "iptables", "-S", firewall.DockerUserChain)
	if user != "-N DOCKER-USER\n-A DOCKER-USER -j RETURN\n" {
		t.Errorf("DOCKER-USER after Commit:\n%s\nwant Docker's return alone", user)
	}
	if !strings.Contains(saved, "jump ufw-user-forward") {
		t.Errorf("the saved listing lacks DOCKER-USER's jump into ufw's routed rules:\n%s", saved)
	}
	if got := fwtest.Counters.ReplaceAllString(n.Quiet(t, "nft", "list", "table", "ip", "nat"), "counter"); got != natBefore {
		t.Errorf("the nat table changed:\n%s", fwtest.Diff(natBefore, got))
	}
	if got := fwtest.Counters.ReplaceAllString(n.Quiet(t, "nft", "list", "chain", "ip", "filter", "DOCKER"), "counter"); got != dockerBefore {
		t.Errorf("Docker's DOCKER chain changed:\n%s", fwtest.Diff(dockerBefore, got))
	}
	expect("after Commit", true, 22, 18080, 18082)
	expect("after Commit", false, 19100, 18081)
}
