package tests

// End to end on the reference node, clients outside: the agent on the node,
// the real CLI and dev server, a module migrated, then the flip the operator
// previewed; the packets of every traffic class from the peer namespace,
// before and after, held to the preview the workflow recorded.

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/internal/fwtest"
	"adoption/sandbox"
	"adoption/workflows"
)

// outsideJump is the one source ssh is allowed from on this node.
const outsideJump = "198.51.100.7"

const outsidePlan = `modules:
  - name: mail
    ports: []
    container:
      name: mail
      image: ` + svcV2 + `
      cmd: ["-listen", ":8025", "-data", "/named,/anon"]
      ports: {"18025/tcp": "8025/tcp"}
    health:
      http: http://127.0.0.1:18025/health
      timeout: 15s
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost\n"
flip:
  drop: ["18080/tcp", "8443/tcp"]
  confirm_timeout: 1m
cutover:
  stop_timeout: 2s
firewall:
  reconcile_interval: 5s
`

// TestReferenceNodeFlipClientsOutside: the published ports (mail migrated
// and kept, web dropped), a host service (8443/tcp, dropped), ssh allowed
// from one jump address only, through a flip the operator previews and
// approves, with clients in the peer namespace: no packet passes after
// that did not pass before (nothing widens), and none that passed before
// is dropped unless the preview named it closing. The management port
// stays restricted to its one source.
func TestReferenceNodeFlipClientsOutside(t *testing.T) {
	needE2E(t)
	srv := startDevServer(t)
	r := upRefNodeSpec(t, sandbox.RefSpec{
		Spec: sandbox.Spec{
			Name: "refout", Index: 164, Dir: t.TempDir(), Binary: filepath.Join(bin, "adopt-sandbox"),
			// 22 is the management port (allowed to all at first, then
			// restricted below); 8443 a host service; 8081 closed.
			Allowed: config.MustPorts([]string{"22/tcp", "8443/tcp"}),
			Closed:  config.MustPorts([]string{"8081/tcp"}),
			Files:   e2eFiles,
		},
		Services: []sandbox.Service{
			refService("mail", 18025, 8025, true),
			refService("web", 18080, 8080, true),
		},
		Images:   []string{svcV1, svcV2},
		Temporal: srv.Addr(),
	}, outsidePlan)
	r.ufw(t, "delete", "allow", "22/tcp")
	r.ufw(t, "allow", "from", outsideJump, "to", "any", "port", "22", "proto", "tcp")
	docker28RawDrops(t, r)
	jump := netip.MustParseAddr(outsideJump)
	// Outside the jump address, on either side of it.
	near := []netip.Addr{jump.Prev(), jump.Next()}
	addSources(t, r, append([]netip.Addr{jump}, near...))
	e := &diffEnv{r: r,
		sources:   append([]netip.Addr{netip.MustParseAddr(r.PeerAddr), netip.MustParseAddr(r.PeerAddr6), jump}, near...),
		hostPorts: []uint16{22, 8081, 8443, 40111},
		published: []uint16{18025, 18080, 18099},
	}
	run := newClassRun(e)

	startAgent(t, r)
	n := r.node
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: %s", errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if _, errs, code := adopt(t, "migrate", n.Name, "mail", "--config", n.cfg); code != 0 {
		t.Fatalf("migrate mail: %s", errs)
	}
	waitFor(t, n, "mail to migrate", func(st workflows.State) bool { return moduleState(st, "mail") == workflows.ModuleMigrated })

	out, errs, _ := adopt(t, "preview", n.Name, "--config", n.cfg)
	if !strings.Contains(out, "APPROVED") {
		t.Fatalf("the preview should approve (web's 18080 and the host service 8443 dropped, the rest kept):\n%s%s", out, errs)
	}
	st, err := status(t, n)
	if err != nil || st.LastPreview == nil {
		t.Fatalf("no preview in status: %v", err)
	}
	pv := *st.LastPreview
	for _, f := range pv.Fates {
		t.Logf("fate: %-8s %-10s %+v", f.Fate, f.By, f.Opening)
	}

	before := run.reach(t)
	for _, c := range []struct {
		src  string
		port uint16
		want bool
	}{{outsideJump, 22, true}, {r.PeerAddr, 22, false}, {r.PeerAddr, 18025, true}, {r.PeerAddr, 18080, true}, {r.PeerAddr, 8443, true}} {
		p := fwtest.Packet{Class: "input, uplink", Peer: r.Peer, Proto: "tcp", Src: c.src, Dst: r.Addr, Port: c.port}
		if c.port > 18000 {
			p.Class = "forward through DNAT"
		}
		if got, ok := before[p]; !ok || got != c.want {
			t.Fatalf("before the flip: %v reached=%v (sent %v), want %v: the node is not what the test needs", p, got, ok, c.want)
		}
	}
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: %s%s", out, errs)
	}
	waitPhase(t, n, workflows.PhaseConverged, 120*time.Second)
	after := run.reach(t)
	total := run.check(t, "reference node, clients outside, through the workflow's flip", &pv, before, after)
	if total.Kept == 0 || total.Closing == 0 {
		t.Errorf("%v: the test wants kept and closing packets", total)
	}
	for src, want := range map[string]bool{outsideJump: true, r.PeerAddr: false, near[0].String(): false, near[1].String(): false} {
		p := fwtest.Packet{Class: "input, uplink", Peer: r.Peer, Proto: "tcp", Src: src, Dst: r.Addr, Port: 22}
		if after[p] != want {
			t.Errorf("after the flip, ssh from %s reached=%v, want %v: it is allowed from %s only", src, after[p], want, outsideJump)
		}
	}
	fmt.Printf("clients outside: %d sources, %d packets per side\n", len(e.sources), len(run.pkts))
}
