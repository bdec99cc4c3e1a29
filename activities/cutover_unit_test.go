package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/firewall/marks"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/units"
)

// unitsFake is a service manager with one unit.
type unitsFake struct{ st units.State }

func (u *unitsFake) Unit(_ context.Context, name string) (units.State, error) {
	if name != u.st.Name {
		return units.State{Name: name}, nil
	}
	return u.st, nil
}
func (u *unitsFake) Stop(context.Context, string) error    { u.st.Active = false; return nil }
func (u *unitsFake) Start(context.Context, string) error   { u.st.Active = true; return nil }
func (u *unitsFake) Disable(context.Context, string) error { u.st.Enabled = false; return nil }
func (u *unitsFake) Enable(context.Context, string) error  { u.st.Enabled = true; return nil }

// A module replacing a system unit: the unit's own process may hold its
// ports at preflight, any other holder is refused naming it and the unit;
// the unit's file goes into custody at create; the unit is disabled only
// by the confirming check, and a release enables it again.
func TestReplacedUnitLifecycle(t *testing.T) {
	a, root := newActs(t)
	ctx := context.Background()
	unitFile := "/etc/systemd/system/dnsmasq.service"
	must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, unitFile), []byte("[Service]\nExecStart=/usr/sbin/dnsmasq -k\n"), 0o644))
	um := &unitsFake{st: units.State{Name: "dnsmasq.service", Known: true, Active: true, Enabled: true, MainPID: 412, FragmentPath: unitFile}}
	a.Units, a.Cutover = um, fake.Cutover{}
	dns := config.ModulePlan{Name: "dns", Ports: []config.Port{{Num: 53, Proto: "udp"}, {Num: 53, Proto: "tcp"}}, ReplacesUnit: "dnsmasq.service",
		Container: &config.Container{Name: "dns", Image: "mesh/dns:1", Ports: map[string]string{"53/udp": "53/udp", "53/tcp": "53/tcp"}}}
	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{dns}})
	in := ModuleInput{Plan: plan.Ref(), Module: "dns"}

	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "udp", Addr: "0.0.0.0", Port: 53, PID: 412, Exe: "dnsmasq"}}}
	if _, err := a.CutoverPreflight(ctx, in); err != nil {
		t.Fatalf("the replaced unit's own process holds the port: %v", err)
	}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 53, PID: 99, Exe: "unbound"}}}
	_, err := a.CutoverPreflight(ctx, in)
	msg := appErr(t, err, ErrCutoverRefused)
	for _, want := range []string{"port 53/tcp is held by pid 99 (unbound)", "predecessor unit dnsmasq.service (pid 412)", "modules[dns].replaces_unit", "nothing was changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q lacks %q", msg, want)
		}
	}
	um.st.Known = false
	_, err = a.CutoverPreflight(ctx, in)
	if msg := appErr(t, err, ErrCutoverRefused); !strings.Contains(msg, `modules[dns].replaces_unit = "dnsmasq.service": the node has no such unit`) {
		t.Errorf("unknown unit: %s", msg)
	}
	um.st.Known = true
	a.Sockets = fake.Sockets{}
	// The rehearsal says where the unit stops.
	rh, err := a.Rehearse(ctx, in)
	must(t, err)
	said := false
	for _, st := range rh.Steps {
		for _, touch := range st.Touches {
			said = said || (st.Name == "swap: stop the predecessor" && strings.Contains(touch, "stop unit dnsmasq.service"))
		}
	}
	if !said {
		t.Errorf("the rehearsal does not show the unit stopped in the swap: %+v", rh.Steps)
	}

	if _, err := a.CutoverCreate(ctx, CutoverInput{Plan: plan.Ref(), Module: "dns"}); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := a.Files.Record(unitFile); err != nil || !ok || !rec.Found {
		t.Fatalf("the unit's file is not in custody: %+v %v %v", rec, ok, err)
	}
	if _, err := a.CutoverSwap(ctx, in); err != nil {
		t.Fatal(err)
	}
	if !um.st.Enabled {
		t.Fatal("the unit was disabled before its cutover was confirmed")
	}
	a.Marks = &listMarks{placed: []marks.MarkedRule{{Mark: marks.Mark{Node: "n1", Owner: "dns", Port: 53, Proto: "udp"}}}}
	if _, err := a.CutoverWaitHealthy(ctx, in); err != nil {
		t.Fatal(err)
	}
	recs, _ := a.State.Cutovers()
	if um.st.Enabled || !recs["dns"].UnitDisabled || recs["dns"].State != nodestate.CutoverConfirmed {
		t.Fatalf("after the confirming check: unit %+v record %+v", um.st, recs["dns"])
	}
	must(t, a.State.MarkAdopted(nodestate.Marker{Node: "n1"}))
	res, err := a.Release(ctx, ProbeInput{Plan: plan.Ref()})
	if err != nil {
		t.Fatal(err)
	}
	if !um.st.Enabled || len(res.Units) != 1 || res.Units[0] != "dnsmasq.service" {
		t.Fatalf("after the release: unit %+v result %+v", um.st, res)
	}
}

// A module replacing a bare executable (replaces_exe): any process of that
// executable may hold its ports at preflight (a daemon's forked child
// too); another holder is refused, naming the key.
func TestReplacedExeHolders(t *testing.T) {
	a, _ := newActs(t)
	ctx := context.Background()
	a.Units, a.Cutover = &unitsFake{st: units.State{Name: "exe:dnsmasq", Known: true, Active: true, Enabled: true, MainPID: 412}}, fake.Cutover{}
	dns := config.ModulePlan{Name: "dns", Ports: []config.Port{{Num: 53, Proto: "udp"}}, ReplacesExe: "dnsmasq",
		Container: &config.Container{Name: "dns", Image: "mesh/dns:1", Ports: map[string]string{"53/udp": "53/udp"}}}
	plan := withPlan(a, config.Plan{Node: "n1", Modules: []config.ModulePlan{dns}})
	in := ModuleInput{Plan: plan.Ref(), Module: "dns"}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "udp", Addr: "0.0.0.0", Port: 53, PID: 413, Exe: "dnsmasq"}}}
	if _, err := a.CutoverPreflight(ctx, in); err != nil {
		t.Fatalf("a process of the replaced executable holds the port: %v", err)
	}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "udp", Addr: "0.0.0.0", Port: 53, PID: 99, Exe: "unbound"}}}
	_, err := a.CutoverPreflight(ctx, in)
	if msg := appErr(t, err, ErrCutoverRefused); !strings.Contains(msg, "pid 99 (unbound)") {
		t.Errorf("refusal %q does not name the holder", msg)
	}
	a.Units = &unitsFake{st: units.State{Name: "other"}}
	_, err = a.CutoverPreflight(ctx, in)
	if msg := appErr(t, err, ErrCutoverRefused); !strings.Contains(msg, `modules[dns].replaces_exe = "dnsmasq": the node has no such unit`) {
		t.Errorf("an executable that does not run: %s", msg)
	}
}
