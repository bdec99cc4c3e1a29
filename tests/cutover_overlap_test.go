package tests

// The overlap cutover through the agent on the reference node: a module
// with cutover: overlap is migrated while clients outside hammer its
// published port, and none of their connections fails or waits for a
// retransmission; the predecessor is kept stopped, the data is the same,
// and the port is served by the mesh's steering.

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"adoption/containers/steer"
	"adoption/workflows"
)

func TestCutoverOverlapUnderLoad(t *testing.T) {
	srv := startDevServer(t)
	const name, port = "e2eolap", 18483
	module := strings.Replace(refModule(name, port, ""), `    ports: ["18483/tcp"]
`, `    ports: ["18483/tcp"]
    cutover: overlap
`, 1)
	if !strings.Contains(module, "cutover: overlap") {
		t.Fatalf("the module does not declare the overlap:\n%s", module)
	}
	r := upRefNodeWith(t, name, 123, srv, nil, cutoverFiles(name), refCutoverPlan(module))
	n := r.node
	bind := r.predecessor(t, name, port)
	sums := r.get(t, port, "/sums")
	w := startAgent(t, r)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	// Long enough to cover the cutover on a loaded host (10.9 s seen), so
	// the clients' figures cover all of it.
	h := r.hammer(t, port, 25*time.Second)
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	st := waitFor(t, n, "the overlap cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	done := time.Since(h.start)
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("the overlap failed: %q\n%s", st.Modules[0].LastError, w.log)
	}
	res := h.wait(t)
	t.Logf("overlap under load, published port %d from the peer: %d connections ok, %d refused, %d timed out; slowest answer %s, longest gap between answers %s; cutover done %s into the %s run",
		port, res.OK, res.Refused, res.TimedOut, res.Slowest.Round(time.Millisecond), res.Gap.Round(time.Millisecond), done.Round(time.Millisecond), h.d)
	if done > h.d {
		t.Fatalf("the cutover ended %s after the hammer started, past its %s: the figures do not cover it", done.Round(time.Millisecond), h.d)
	}
	if res.OK == 0 || res.Refused != 0 || res.TimedOut != 0 {
		t.Errorf("the overlap failed clients of published port %d: %+v", port, res)
	}
	r.assertMigrated(t, name, port, sums, bind)
	out, err := exec.Command("ip", "netns", "exec", r.Netns, "nft", "list", "table", "ip", steer.Table).CombinedOutput()
	if err != nil || !strings.Contains(string(out), steer.Comment(n.Name, name, port)) {
		t.Fatalf("the port is not steered to the new container: %v\n%s", err, out)
	}
}
