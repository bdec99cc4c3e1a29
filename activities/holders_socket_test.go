package activities

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sockets"
)

// The holder checks with real sockets, read from /proc as the agent reads
// them: this test process holds the port, and the refusal names its pid.

// listenUDP and listenTCP hold a free port of the test's namespace.
func listenUDP(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

func listenTCP(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// A member whose overlay port a process holds is refused at adoption,
// naming the port, the holder's pid and the key to change; the control
// node's genesis check and the member's placement check (the same
// activity, on the ports the node binds when placed) say the same.
func TestSocketsMemberOverlayHeldRefused(t *testing.T) {
	a, _ := newActs(t)
	a.Sockets = sockets.Proc{Root: "/proc"}
	port := listenUDP(t)
	overlay := config.NamedPort{Name: "overlay", Port: config.Port{Num: port, Proto: "udp"}}
	// The registry's port is the control node's: held here, it is not a
	// member's concern.
	registry := config.NamedPort{Name: "registry", Port: config.Port{Num: listenTCP(t), Proto: "tcp"}}
	plan := withPlan(a, config.Plan{Node: "n1", Role: "member", Foundation: []config.NamedPort{overlay, registry}})
	pid := fmt.Sprintf("pid %d", os.Getpid())
	want := []string{fmt.Sprintf("foundation port overlay %d/udp is held by %s", port, pid), "set foundation.ports.overlay"}

	_, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
	msg := appErr(t, err, ErrPortCollision)
	for _, w := range append(want, "not adopted") {
		if !strings.Contains(msg, w) {
			t.Errorf("adoption refusal %q lacks %q", msg, w)
		}
	}
	_, err = a.CheckFoundationPorts(context.Background(), ProbeInput{Plan: plan.Ref()})
	msg = appErr(t, err, ErrPortCollision)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("placement refusal %q lacks %q", msg, w)
		}
	}
	if strings.Contains(msg, "registry") {
		t.Errorf("a member's placement was refused for the control node's port: %s", msg)
	}
}

// A host-service module (no container) whose port a process other than
// its own service holds is refused at preflight and in the rehearsal,
// naming the holder's pid.
func TestSocketsHostServiceHeldRefused(t *testing.T) {
	a, _ := newActs(t)
	a.Sockets = sockets.Proc{Root: "/proc"}
	port := listenTCP(t)
	web := config.ModulePlan{Name: "web", Ports: []config.Port{{Num: port, Proto: "tcp"}},
		Health: &config.Health{TCP: fmt.Sprintf("127.0.0.1:%d", port), Timeout: time.Second}, Holders: []string{"nginx"}}
	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{web}})
	in := ModuleInput{Plan: plan.Ref(), Module: "web"}
	pid := fmt.Sprintf("pid %d", os.Getpid())

	_, err := a.CutoverPreflight(context.Background(), in)
	msg := appErr(t, err, ErrCutoverRefused)
	for _, w := range []string{fmt.Sprintf("port %d/tcp", port), pid, "modules[web].holders", "nothing was changed"} {
		if !strings.Contains(msg, w) {
			t.Errorf("preflight refusal %q lacks %q", msg, w)
		}
	}
	r, err := a.Rehearse(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Refusals) != 1 || !strings.Contains(r.Refusals[0], pid) {
		t.Errorf("rehearsal refusals %q, want the holder (%s) named", r.Refusals, pid)
	}
}
