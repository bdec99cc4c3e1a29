package flip

// The preview on the reference node as listed by the kernel tests (its own
// dockerd, ufw with ufw-docker's DOCKER-USER, Docker 28's raw drops).

import (
	"strings"
	"testing"

	"adoption/internal/fwtest"
	"adoption/vocab"
)

// A published port that ufw routes from one network only (18090, to
// admin's 9090) keeps that restriction in the mesh's table, although
// ufw-docker's DOCKER-USER also accepts docker0 to docker0 from any source
// (traffic between containers, not a client's): the preview approves the
// flip that keeps it, with no widening.
func TestPreviewCarriesForwardSourcesOnReferenceNode(t *testing.T) {
	found, node := fwtest.LoadFixture(t, "reference-node")
	spec := MeshSpec{Node: "refdiff",
		Input:   append(allow(OwnerManagement, "22/tcp"), allow("dns", "5353/udp")...),
		Forward: append(allow("mail", "18025/tcp"), allow("admin", "18090/tcp")...),
		// 9090/tcp: routed to admin's address from that network, which the
		// mesh's table does not carry (the node alone decides it): closing.
		Drop: vocab.MustPorts([]string{"18080/tcp", "19100/tcp", "8443/tcp", "9443/tcp", "9090/tcp"}),
	}
	pv := PreviewFlipOn(found, node, spec)
	if !pv.Approved {
		t.Fatalf("refused:\n%s", strings.Join(pv.Reasons, "\n"))
	}
	for _, f := range pv.Fates {
		if f.Fate == FateWidening {
			t.Errorf("widening: %+v", f)
		}
	}
	d, err := DeriveFor(found, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Text(), "ip saddr @forward_18090_tcp_ip_from") || !strings.Contains(d.Text(), "198.51.100.0/28") {
		t.Errorf("the derived table does not carry 18090's sources:\n%s", d.Text())
	}
}
