package tests

// Genesis end to end on the reference node (a control node): the
// foundation's containers raised in the node's own engine from images
// built here FROM scratch, their ports answering clients in the peer
// namespace through the found firewall (ufw with ufw-docker); a genesis
// that fails rolls back what it raised, names the step, holds the flip,
// and is retried to success.

import (
	"strings"
	"testing"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

const (
	genesisRegistry = 15000
	genesisStore    = 15001
)

// genesisPlan declares two foundation containers; the store's command is
// storeCmd.
func genesisPlan(storeCmd string) string {
	return `foundation:
  ports:
    registry: 15000/tcp
    store: 15001/tcp
  containers:
    - name: registry
      image: ` + svcV2 + `
      cmd: ["-listen", ":5000", "-data", "/anon"]
      ports: {"15000/tcp": "5000/tcp"}
    - name: store
      image: ` + svcV2 + `
      cmd: ` + storeCmd + `
      ports: {"15001/tcp": "5432/tcp"}
modules: []
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost\n"
flip:
  # The containers' own ports, which ufw-docker lets private sources
  # reach routed (not through DNAT): the mesh's table does not carry that.
  drop: ["5000/tcp", "5432/tcp"]
  confirm_timeout: 1m
cutover:
  stop_timeout: 2s
firewall:
  reconcile_interval: 5s
`
}

// TestReferenceNodeGenesis: the store never answers on its port, so
// genesis fails at that step, names it, and removes both containers it
// raised; a flip is refused while genesis has not succeeded; the store's
// command fixed in the node's file, a retry raises both and clients in the
// peer namespace reach them through the found firewall; the flip then
// carries the foundation's ports, which still answer under the mesh's
// ruleset.
func TestReferenceNodeGenesis(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	r := upRefNodeSpec(t, sandbox.RefSpec{
		Spec: sandbox.Spec{
			Name: "refgen", Index: 166, Role: "control", Dir: t.TempDir(), Binary: bin + "/adopt-sandbox",
			Allowed: config.MustPorts([]string{"22/tcp"}), Files: e2eFiles,
		},
		Images:   []string{svcV2},
		Temporal: srv.Addr(),
	}, genesisPlan(`["-listen", ":5432", "-data", "/anon", "-fail", "nolisten"]`))
	for _, p := range []int{genesisRegistry, genesisStore} {
		if got := r.dial(t, r.Addr, p); got == "open" {
			t.Fatalf("foundation port %d answers before genesis: the test proves nothing", p)
		}
	}
	startAgent(t, r)
	n := r.node
	out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg)
	if code != 0 {
		t.Fatalf("adopt start: %s", errs)
	}
	// Started alone, without a fleet, the control node still says what
	// adopting it costs.
	if want := "the predecessor's pipeline is frozen for every node it manages while control node refgen migrates"; !strings.Contains(out, want) {
		t.Errorf("adopt start on the control node does not state the pipeline freeze (%q):\n%s", want, out)
	}
	st := waitFor(t, n, "genesis to fail", func(st workflows.State) bool { return st.Genesis.State == "failed" })
	for _, want := range []string{"foundation.containers[1] (store): ports answer failed", "what this genesis raised was removed (2 container(s))", "adopt retry refgen"} {
		if !strings.Contains(st.Genesis.Error, want) {
			t.Errorf("genesis error %q does not name %q", st.Genesis.Error, want)
		}
	}
	if ps := r.engine(t, "ps", "-a", "--format", "{{.Names}}"); strings.Contains(ps, "registry") || strings.Contains(ps, "store") {
		t.Errorf("the failed genesis left containers behind: %q", ps)
	}
	if len(st.Opened["foundation"]) != 0 {
		t.Errorf("a failed genesis opened foundation ports: %v", st.Opened["foundation"])
	}

	// A flip while genesis has not succeeded is refused, by name.
	out, errs, code = adopt(t, "flip", n.Name, "--config", n.cfg)
	if code == 0 || !strings.Contains(out+errs, "genesis has not succeeded (failed)") {
		t.Fatalf("flip before genesis succeeded: exit %d, want refused naming the genesis:\n%s%s", code, out, errs)
	}

	// The fix, in the node's own file (the CLI sends the same plan), and a
	// retry.
	fixed := genesisPlan(`["-listen", ":5432", "-data", "/anon"]`)
	if _, err := r.WriteConfig(fixed); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := adopt(t, "retry", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "genesis to succeed", func(st workflows.State) bool { return st.Genesis.State == "done" })
	if got := len(st.Opened["foundation"]); got != 2 {
		t.Errorf("foundation ports opened: %v, want both", st.Opened["foundation"])
	}
	if ps := r.engine(t, "ps", "--format", "{{.Names}} {{.Ports}}"); !strings.Contains(ps, "registry") || !strings.Contains(ps, "15000->5000/tcp") ||
		!strings.Contains(ps, "store") || !strings.Contains(ps, "15001->5432/tcp") {
		t.Fatalf("the node's engine does not run the foundation: %q", ps)
	}
	for _, p := range []int{genesisRegistry, genesisStore} {
		if got := r.dial(t, r.Addr, p); got != "open" {
			t.Errorf("a client in the peer namespace meets %s on foundation port %d after genesis, want open", got, p)
		}
	}
	if got := r.get(t, genesisRegistry, "/version"); got != "v2" {
		t.Errorf("the registry answers %q, want v2", got)
	}

	// The flip carries the foundation's ports: they answer under the
	// mesh's own ruleset too.
	out, errs, code = adopt(t, "flip", n.Name, "--config", n.cfg)
	if code != 0 {
		t.Fatalf("flip after genesis: exit %d:\n%s%s", code, out, errs)
	}
	waitFor(t, n, "the flip to commit", func(st workflows.State) bool {
		return st.Flip != nil && st.Flip.State == workflows.FlipStateCommitted
	})
	for _, p := range []int{genesisRegistry, genesisStore} {
		if got := r.dial(t, r.Addr, p); got != "open" {
			t.Errorf("foundation port %d after the flip: %s, want open", p, got)
		}
	}
}
