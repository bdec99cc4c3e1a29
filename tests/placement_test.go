package tests

// A member node's placement end to end: the overlay's port held on the
// node refuses its adoption, naming the holder; the port fixed in the
// node's file, a retry adopts it and places it.

import (
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

func placementPlan(overlay string) string {
	return `foundation:
  ports:
    overlay: ` + overlay + `
modules: []
`
}

// TestMemberOverlayHeldRefusedAtAdoption: the sandbox serves 53/udp on the
// node; a member whose overlay is 53/udp is refused at adoption naming the
// holder's pid and the key, nothing adopted; with a free port, a retry
// adopts it and its placement checks the port again.
func TestMemberOverlayHeldRefusedAtAdoption(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	n := upNodeWith(t, sandbox.Spec{Name: "e2eplace", Index: 171,
		Allowed: config.MustPorts([]string{"22/tcp", "53/udp"})}, srv.Addr(), placementPlan("53/udp"))
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: %s", errs)
	}
	st := waitPhase(t, n, workflows.PhaseFailed, 90*time.Second)
	for _, want := range []string{"foundation port overlay 53/udp is held by pid ", "adopt-sandbox", "set foundation.ports.overlay", "not adopted"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("adoption refusal %q does not name %q", st.LastError, want)
		}
	}
	if len(st.Custody) != 0 {
		t.Errorf("a refused adoption took %d file(s) into custody", len(st.Custody))
	}

	if _, err := n.WriteConfig(srv.Addr(), placementPlan("51820/udp")); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := adopt(t, "retry", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "the member to be placed", func(st workflows.State) bool {
		return st.Phase == workflows.PhaseAdopted && st.Genesis.State == "done"
	})
	placed := false
	for _, e := range st.Events {
		placed = placed || e.Text == "placed: 1 foundation port(s) free for the overlay"
	}
	if !placed {
		t.Errorf("no placement event: %v", st.Events)
	}
	if len(st.Opened["foundation"]) != 0 {
		t.Errorf("a member's placement opened %v: nothing listens on the overlay yet", st.Opened["foundation"])
	}
}
