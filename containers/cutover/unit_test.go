package cutover

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"adoption/units"
)

// fakeUnits is a service manager holding one unit; it records the order of
// what the cutover asked, beside the fake engine's.
type fakeUnits struct {
	st     units.State
	log    *[]string
	onStop func()
}

func (u *fakeUnits) Unit(_ context.Context, name string) (units.State, error) {
	if name != u.st.Name {
		return units.State{Name: name}, nil
	}
	return u.st, nil
}
func (u *fakeUnits) Stop(_ context.Context, name string) error {
	*u.log = append(*u.log, "stop "+name)
	if u.onStop != nil {
		u.onStop()
	}
	u.st.Active = false
	return nil
}
func (u *fakeUnits) Start(_ context.Context, name string) error {
	*u.log = append(*u.log, "start "+name)
	u.st.Active = true
	return nil
}
func (u *fakeUnits) Disable(_ context.Context, name string) error {
	u.st.Enabled = false
	return nil
}
func (u *fakeUnits) Enable(_ context.Context, name string) error {
	*u.log = append(*u.log, "enable "+name)
	u.st.Enabled = true
	return nil
}

// fakeDatagramHold is a fakeHold that holds UDP too.
type fakeDatagramHold struct {
	fakeHold
	udp []uint16
}

func (h *fakeDatagramHold) HoldProto(owner string, tcp, udp []uint16, bound time.Duration) error {
	h.udp = udp
	return h.Hold(owner, tcp, bound)
}

var dnsSpec = Spec{Name: "dns", Image: "mesh/dns:1", Ports: map[string]string{"53/udp": "53/udp", "53/tcp": "53/tcp"}, ReplacesUnit: "dnsmasq.service"}

// TestUnitHandOverFake: a module replacing a unit holds its TCP and UDP
// ports, stops the unit, runs the window, starts the container and lets
// go; the rollback holds again, stops the container, runs the window,
// enables the unit again (as it was) and starts it. A unit the manager
// does not know, or an agent without a manager, refuses at preflight.
func TestUnitHandOverFake(t *testing.T) {
	var log []string
	f := newFake("mesh/dns:1")
	um := &fakeUnits{st: units.State{Name: "dnsmasq.service", Known: true, Active: true, Enabled: true, MainPID: 77}, log: &log}
	h := &fakeDatagramHold{}
	e := NewWith(f).WithHold(h).WithUnits(um)
	e.portFree = func(string, string, uint16) error { return errors.New("held by pid 77 (dnsmasq)") }
	e.udpBound = func(int, uint16) bool { return true }
	var reps []HoldReport
	ctx := WithHoldReport(context.Background(), func(r HoldReport) { reps = append(reps, r) })
	ctx = WithWindow(ctx, func(context.Context) error {
		log = append(log, "window")
		return nil
	})
	if err := cutover(ctx, e, dnsSpec, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"stop dnsmasq.service", "window"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("swap: %v, want %v", log, want)
	}
	if !reflect.DeepEqual(h.udp, []uint16{53}) || len(reps) != 1 || !reflect.DeepEqual(reps[0].Ports, []uint16{53, 53}) || !reps[0].Queued {
		t.Fatalf("hold: udp %v reports %+v", h.udp, reps)
	}
	if len(h.held) != 0 || !reflect.DeepEqual(h.released, []string{"dns"}) {
		t.Fatalf("after the swap: held %v released %v", h.held, h.released)
	}
	if u, err := e.UnitOf(ctx, "dns"); err != nil || u == nil || *u != (UnitRef{Name: "dnsmasq.service", Active: true, Enabled: true}) {
		t.Fatalf("recorded unit %+v %v", u, err)
	}
	// The confirmed cutover's disable, then a rollback anyway (the
	// confirmation was not recorded): the unit back as found.
	_ = um.Disable(ctx, "dnsmasq.service")
	log = nil
	if err := e.Rollback(ctx, "dns"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"window", "enable dnsmasq.service", "start dnsmasq.service"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("rollback: %v, want %v", log, want)
	}
	if !um.st.Active || !um.st.Enabled || len(f.names()) != 0 {
		t.Fatalf("after the rollback: unit %+v containers %v", um.st, f.names())
	}
	if len(reps) != 2 {
		t.Fatalf("the rollback did not hold the ports: %+v", reps)
	}
	// Refusals before anything changes.
	bad := dnsSpec
	bad.ReplacesUnit = "resolved.service"
	if _, err := e.Preflight(ctx, bad); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), `modules[dns].replaces_unit = "resolved.service": the node's service manager has no such unit`) {
		t.Fatalf("unknown unit: %v", err)
	}
	if _, err := NewWith(f).Preflight(ctx, dnsSpec); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "no service manager") {
		t.Fatalf("no manager: %v", err)
	}
}

// boundHold is a fakeDatagramHold that tells whether the unit's UDP
// socket is bound: only from the third ask after the unit started, as a
// service binds some time after its start job is done.
type boundHold struct {
	fakeDatagramHold
	unit    *fakeUnits
	asks    int
	boundAt int // asks when Release came
}

func (h *boundHold) UDPBound(port uint16) bool {
	if port != 53 || !h.unit.st.Active {
		return false
	}
	h.asks++
	return h.asks >= 3
}

func (h *boundHold) Release(owner string) error {
	h.boundAt = h.asks
	return h.fakeDatagramHold.Release(owner)
}

// TestUnitHandOverFailedStartKeepsTheHoldFake: a container that exits
// before it answers in the unit's place fails the swap as unhealthy (the
// workflow rolls back at once) and keeps the ports held; the rollback
// starts the unit and lets the clients go only once the unit is back on
// its ports: its UDP socket bound, so no held datagram meets a closed port.
func TestUnitHandOverFailedStartKeepsTheHoldFake(t *testing.T) {
	var log []string
	f := newFake("mesh/dns:1")
	f.onStart = func(c *container.InspectResponse) {
		c.State.Running, c.State.Status, c.State.ExitCode = false, "exited", 3
	}
	um := &fakeUnits{st: units.State{Name: "dnsmasq.service", Known: true, Active: true, Enabled: true, MainPID: 77}, log: &log}
	h := &boundHold{unit: um}
	e := NewWith(f).WithHold(h).WithUnits(um)
	e.portFree = func(string, string, uint16) error { return nil }
	ctx := context.Background()
	pred, err := e.Preflight(ctx, dnsSpec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, dnsSpec, pred); err != nil {
		t.Fatal(err)
	}
	err = e.Swap(ctx, "dns", time.Second)
	if !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "exited (status 3)") {
		t.Fatalf("swap: %v, want unhealthy naming the exit", err)
	}
	if len(h.held["dns"]) == 0 || len(h.released) != 0 || um.st.Active {
		t.Fatalf("after the failed start: held %v released %v unit %+v; want the ports held, the unit stopped", h.held, h.released, um.st)
	}
	if err := e.Rollback(ctx, "dns"); err != nil {
		t.Fatal(err)
	}
	if !um.st.Active || len(h.held) != 0 || len(h.released) != 1 || len(f.names()) != 0 {
		t.Fatalf("after the rollback: unit %+v held %v released %v containers %v", um.st, h.held, h.released, f.names())
	}
	if h.boundAt < 3 {
		t.Fatalf("the rollback released the hold after %d asks whether the unit's 53/udp is bound: before it was", h.boundAt)
	}
}

// queuedHold is a fakeDatagramHold whose unit has datagrams unread on its
// UDP port until it is asked the third time, or for ever (stuck).
type queuedHold struct {
	fakeDatagramHold
	asks    int
	stuck   bool
	stopped int // asks when the unit was stopped
}

func (h *queuedHold) UDPQueued(port uint16) bool {
	if port != 53 {
		return false
	}
	h.asks++
	return h.stuck || h.asks < 3
}

// TestUnitStoppedOnceItReadItsDatagrams: the unit is stopped only once it
// has read the datagrams that reached it before the hold (a stop drops
// them, each a client waiting out its timeout), and at most drainMax
// later when it never does.
func TestUnitStoppedOnceItReadItsDatagrams(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		var log []string
		f := newFake("mesh/dns:1")
		um := &fakeUnits{st: units.State{Name: "dnsmasq.service", Known: true, Active: true, Enabled: true, MainPID: 77}, log: &log}
		h := &queuedHold{stuck: stuck}
		um.onStop = func() { h.stopped = h.asks }
		e := NewWith(f).WithHold(h).WithUnits(um)
		e.portFree = func(string, string, uint16) error { return errors.New("held by pid 77 (dnsmasq)") }
		e.udpBound = func(int, uint16) bool { return true }
		start := time.Now()
		if err := cutover(context.Background(), e, dnsSpec, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		switch {
		case !stuck && h.stopped != 3:
			t.Fatalf("the unit was stopped after %d asks of its queue, want 3 (read on the third)", h.stopped)
		case stuck && took < drainMax:
			t.Fatalf("a unit that never reads: stopped after %s, before drainMax %s", took, drainMax)
		case stuck && h.stopped < 3:
			t.Fatalf("a unit that never reads: its queue asked %d times before the stop", h.stopped)
		}
	}
}
