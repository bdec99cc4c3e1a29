package activities

import (
	"context"
	"strings"
	"testing"
	"time"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/sockets"
)

// A host-service module (no container) whose port another process holds
// is refused at preflight and in the rehearsal, naming the holder, its pid
// and what to do; its own service (modules[].holders) may hold it.
func TestHostServicePortHolderRefused(t *testing.T) {
	a, _ := newActs(t)
	dnsmasq := sockets.Listener{Proto: "udp", Addr: "0.0.0.0", Port: 53, PID: 412, Exe: "dnsmasq"}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{dnsmasq}}
	resolver := config.ModulePlan{Name: "resolver", Ports: []config.Port{{Num: 53, Proto: "udp"}},
		Health: &config.Health{TCP: "127.0.0.1:53", Timeout: time.Second}, Holders: []string{"unbound"}}
	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{resolver}})
	in := ModuleInput{Plan: plan.Ref(), Module: "resolver"}

	_, err := a.CutoverPreflight(context.Background(), in)
	msg := appErr(t, err, ErrCutoverRefused)
	for _, want := range []string{"port 53/udp", "pid 412 (dnsmasq)", "modules[resolver].holders", "nothing was changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight refusal %q does not name %q", msg, want)
		}
	}
	r, err := a.Rehearse(context.Background(), in)
	must(t, err)
	if len(r.Refusals) != 1 || !strings.Contains(r.Refusals[0], "pid 412 (dnsmasq)") {
		t.Errorf("rehearsal refusals %q, want the holder dnsmasq named", r.Refusals)
	}

	// The module's own service on its port is let through.
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "udp", Addr: "0.0.0.0", Port: 53, PID: 500, Exe: "unbound"}}}
	if _, err := a.CutoverPreflight(context.Background(), in); err != nil {
		t.Fatalf("the module's own service holds its port: %v", err)
	}
	if r, err := a.Rehearse(context.Background(), in); err != nil || len(r.Refusals) != 0 {
		t.Fatalf("rehearsal with the module's own service: %v %q", err, r.Refusals)
	}
}

// A member node whose overlay port is held is refused at adoption, naming
// the holder and the key, and nothing is taken into custody; the other
// foundation ports are the control node's (genesis), not a member's.
func TestAdoptMemberRefusesHeldOverlayPort(t *testing.T) {
	a, _ := newActs(t)
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{
		{Proto: "udp", Addr: "0.0.0.0", Port: 51820, PID: 88, Exe: "tunneld"},
		{Proto: "tcp", Addr: "0.0.0.0", Port: 5001, PID: 90, Exe: "registry"},
	}}
	plan := withPlan(a, config.Plan{Node: "n1", Role: "member", Foundation: []config.NamedPort{
		{Name: "overlay", Port: config.Port{Num: 51820, Proto: "udp"}},
		{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}},
	}})
	_, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
	msg := appErr(t, err, ErrPortCollision)
	for _, want := range []string{"foundation port overlay 51820/udp is held by pid 88 (tunneld); set foundation.ports.overlay", "not adopted"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "registry") {
		t.Errorf("a member was refused for the control node's port: %s", msg)
	}
	if _, adopted, _ := a.State.Adopted(); adopted {
		t.Error("a refused adoption marked the node adopted")
	}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 5001, PID: 90, Exe: "registry"}}}
	if _, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"}); err != nil {
		t.Fatalf("the overlay port freed, adoption: %v", err)
	}
}
