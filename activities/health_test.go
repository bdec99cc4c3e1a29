package activities

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/firewall/marks"
)

// A module with no container is migrated only once its declared health
// answers; one whose check fails is refused with what was checked.
func TestHostServiceHealthIsChecked(t *testing.T) {
	a, _ := newActs(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	deadAddr := closed.Addr().String()
	closed.Close()

	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{
		{Name: "up", Ports: []config.Port{{Num: 8080, Proto: "tcp"}}, Health: &config.Health{TCP: l.Addr().String(), Timeout: 2 * time.Second}},
		{Name: "down", Ports: []config.Port{{Num: 8081, Proto: "tcp"}}, Health: &config.Health{TCP: deadAddr, Timeout: 500 * time.Millisecond}},
		{Name: "bare", Ports: []config.Port{{Num: 8082, Proto: "tcp"}}},
	}})
	// Their ports are opened (the cutover's first step), so each check is
	// one of a cutover under way.
	opened := &listMarks{}
	for _, m := range plan.Modules {
		opened.placed = append(opened.placed, marks.MarkedRule{Mark: marks.Mark{Node: "n1", Owner: m.Name, Port: m.Ports[0].Num, Proto: "tcp"}})
	}
	a.Marks = opened
	if _, err := a.CutoverWaitHealthy(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "up"}); err != nil {
		t.Fatalf("a listening host service: %v", err)
	}
	_, err = a.CutoverWaitHealthy(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "down"})
	if msg := appErr(t, err, ErrUnhealthy); !strings.Contains(msg, "TCP connect to "+deadAddr) || !strings.Contains(msg, "did not pass within 500ms") {
		t.Fatalf("refusal: %s", msg)
	}
	_, err = a.CutoverWaitHealthy(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "bare"})
	appErr(t, err, authority.ErrNotDeclared)
}
