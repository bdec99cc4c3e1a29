package flip

import (
	"strings"
	"testing"

	"adoption/firewall"
	"adoption/internal/fwtest"
	"adoption/vocab"
)

// The preview on the Docker 28 node of fwtest's testdata/dnat (listed from
// a namespace loaded with Docker 28's chains, its raw drops of the
// container's address, a DNAT to a port range and a ufw-like INPUT
// allowing 22/tcp): the raw drops are decided against the node's own
// addresses, so nothing is uncertain, the management port is kept, and the
// flip is approved once every published port is declared or dropped.

func TestPreviewDocker28NotRefusedFalsely(t *testing.T) {
	rs, node := fwtest.LoadFixture(t, "docker28")
	spec := MeshSpec{Node: "n1",
		Input: []Allow{{Port: vocab.Port{Num: 22, Proto: "tcp"}, Owner: OwnerManagement}},
		Forward: []Allow{
			{Port: vocab.Port{Num: 18080, Proto: "tcp"}, Owner: "web"},
			{Port: vocab.Port{Num: 18053, Proto: "udp"}, Owner: "dns"},
			{Port: vocab.Port{Num: 18090, Proto: "tcp"}, Owner: "web"},
		},
	}
	for p := uint16(18100); p <= 18110; p++ {
		spec.Drop = append(spec.Drop, vocab.Port{Num: p, Proto: "tcp"})
	}
	p := PreviewFlipOn(rs, node, spec)
	reasons := strings.Join(p.Reasons, "\n")
	if !p.Approved {
		t.Fatalf("refused:\n%s", reasons)
	}
	for _, w := range []struct {
		fam, proto string
		port       uint16
		by         string
	}{
		{firewall.FamilyIP, "tcp", 22, OwnerManagement}, {firewall.FamilyIP6, "tcp", 22, OwnerManagement},
		{firewall.FamilyIP, "tcp", 18080, "web"}, {firewall.FamilyIP6, "tcp", 18080, "web"}, {firewall.FamilyIP, "udp", 18053, "dns"},
		{firewall.FamilyIP, "tcp", 18090, "web"}, // published at the uplink's address only
	} {
		seen := false
		for _, f := range p.Fates {
			o := f.Opening
			if o.Family == w.fam && o.Proto == w.proto && o.Port == w.port {
				seen = true
				if f.Fate != FateKept || f.By != w.by || o.Uncertain {
					t.Errorf("%s %d/%s: %+v; want kept by %s, certain", w.fam, w.port, w.proto, f, w.by)
				}
			}
		}
		if !seen {
			t.Errorf("%s %d/%s: no fate", w.fam, w.port, w.proto)
		}
	}

	// Without the port range dropped the preview refuses, naming the
	// host ports the DNAT to a range sends on, and nothing else.
	spec.Drop = nil
	p = PreviewFlipOn(rs, node, spec)
	reasons = strings.Join(p.Reasons, "\n")
	if p.Approved || !strings.Contains(reasons, "18100-18102/tcp") || !strings.Contains(reasons, "172.17.0.2:18102") {
		t.Errorf("the port range not dropped: want a refusal naming 18100-18102/tcp to 172.17.0.2:18102; reasons:\n%s", reasons)
	}
	if strings.Contains(reasons, "management port") || strings.Contains(reasons, "uncertain") {
		t.Errorf("a false reason:\n%s", reasons)
	}
}
