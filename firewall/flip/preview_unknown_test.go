package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/firewall/eval"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// TestPreviewNamesADNATIntoAnUnknownAddress: with docker0 gone from the
// node (the DNAT target 172.17.0.2 on none of its networks), a published
// port is never silently "kept" or "closing": declared, it refuses as
// uncertain with the reason; undeclared, its refusal says why it is
// uncertain; dropped, it is closed on purpose (the mesh's forward chain
// drops it whatever the route). Before and after the flip
// the evaluation changes nothing on any node: it reads a model only.
func TestPreviewNamesADNATIntoAnUnknownAddress(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	var ifs []firewall.Interface
	for _, i := range node.Interfaces {
		if i.Name != "docker0" {
			ifs = append(ifs, i)
		}
	}
	node.Interfaces = ifs
	before := firewall.Fingerprint(rs)
	drop := []vocab.Port{{Num: 18082, Proto: "tcp"}, {Num: 19100, Proto: "tcp"}}

	p := PreviewFlipOn(rs, node, dnatSpec(drop...))
	reasons := strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "18080/tcp (forward, ip") || !strings.Contains(reasons, "stays uncertain: DNAT target 172.17.0.2 is on none of the node's networks") {
		t.Errorf("a declared port DNATed to an unknown address must refuse, naming the target; reasons:\n%s", reasons)
	}
	for _, f := range p.Fates {
		if f.Opening.Port == 18080 && f.Opening.Direction == firewall.HookForward && (f.Fate != FateUncertain || !strings.Contains(f.Reason, "is on none of the node's networks")) {
			t.Errorf("18080's fate %+v, want uncertain with the reason", f)
		}
	}

	undeclared := dnatSpec(drop...)
	undeclared.Forward = nil
	p = PreviewFlipOn(rs, node, undeclared)
	reasons = strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "would close (uncertain now: DNAT target 172.17.0.2 is on none of the node's networks") {
		t.Errorf("an undeclared port DNATed to an unknown address must refuse, saying why it is uncertain; reasons:\n%s", reasons)
	}
	// Dropped, every one: the mesh drops them whatever the route, so the
	// flip may close them on purpose.
	all := undeclared
	all.Drop = vocab.MustPorts([]string{"18080/tcp", "18081/tcp", "18082/tcp", "18083/tcp", "18053/udp", "19100/tcp"})
	if p = PreviewFlipOn(rs, node, all); !p.Approved {
		t.Errorf("with every port DNATed to the unknown address dropped the preview should approve:\n%s", strings.Join(p.Reasons, "\n"))
	}
	if firewall.Fingerprint(rs) != before {
		t.Error("the preview changed the ruleset it was given")
	}
}

// TestDNATUnmappableTargetDroppedWhateverTheRoute: a DNAT target on none
// of the node's networks leaves the output interface undecided, yet a
// forward path that drops whatever the route (ufw-docker's drop of new
// connections to the private ranges, for the unrouted 19100) closes the
// port for the public; a path that may accept (the routed 18080) stays
// uncertain, named.
func TestDNATUnmappableTargetDroppedWhateverTheRoute(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "ufw-docker")
	var ifs []firewall.Interface
	for _, i := range node.Interfaces {
		if i.Name != "docker0" {
			ifs = append(ifs, i)
		}
	}
	node.Interfaces = ifs
	open := eval.OpenPortsOn(rs, node)
	for _, o := range fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 19100) {
		if o.From == "" {
			t.Errorf("19100/tcp: unrouted, dropped whatever the route, yet open to the public: %+v", o)
		}
	}
	got := fwtest.Find(open, firewall.HookForward, firewall.FamilyIP, "tcp", 18080)
	if len(got) == 0 {
		t.Fatal("18080/tcp: no opening; want it uncertain with the reason")
	}
	for _, o := range got {
		if !o.Uncertain || !strings.Contains(o.Reason, "172.17.0.2 is on none of the node's networks") {
			t.Errorf("18080/tcp: %+v; want uncertain naming the unmapped target", o)
		}
	}
}
