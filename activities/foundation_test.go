package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers"
	"adoption/containers/cutover"
	"adoption/sockets"
)

// stepCutover records each step by container and fails the one named in
// fail ("wait healthy registry"); preds are containers already there.
type stepCutover struct {
	fake.Cutover
	steps []string
	fail  string
	preds map[string]*cutover.Predecessor
}

func (c *stepCutover) did(step, name string) error {
	c.steps = append(c.steps, step+" "+name)
	if c.fail == step+" "+name {
		return errors.New("no answer")
	}
	return nil
}

func (c *stepCutover) Preflight(_ context.Context, sp cutover.Spec) (*cutover.Predecessor, error) {
	return c.preds[sp.Name], c.did("preflight", sp.Name)
}
func (c *stepCutover) Create(_ context.Context, sp cutover.Spec, _ *cutover.Predecessor) (*cutover.Carried, error) {
	return nil, c.did("create", sp.Name)
}
func (c *stepCutover) Swap(_ context.Context, name string, _ time.Duration) error {
	return c.did("start", name)
}
func (c *stepCutover) WaitHealthy(_ context.Context, name string, _ func(context.Context) error, _ time.Duration) error {
	return c.did("wait healthy", name)
}
func (c *stepCutover) Rollback(_ context.Context, name string) error { return c.did("rollback", name) }

func foundationActs(t *testing.T) (*Activities, *stepCutover, config.Plan) {
	a, _ := newActs(t)
	cut := &stepCutover{}
	a.Cutover = cut
	plan := withPlan(a, config.Plan{Node: "n1", Role: "control",
		Foundation: []config.NamedPort{{Name: "registry", Port: config.Port{Num: 5001, Proto: "tcp"}}, {Name: "bus", Port: config.Port{Num: 4222, Proto: "tcp"}}},
		FoundationContainers: []config.Container{
			{Name: "registry", Image: "mesh/registry:1", Ports: map[string]string{"5001/tcp": "5000/tcp"}},
			{Name: "bus", Image: "mesh/bus:1", Ports: map[string]string{"4222/tcp": "4222/tcp"}},
		}})
	return a, cut, plan
}

// Genesis raises each foundation container (preflight, create, start,
// wait healthy) and reports which foundation ports then listen.
func TestRaiseFoundationRaisesAndListsWhatListens(t *testing.T) {
	a, cut, plan := foundationActs(t)
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 5001, PID: 9, Exe: "docker-proxy"}}}
	res, err := a.RaiseFoundation(context.Background(), ProbeInput{Plan: plan.Ref()})
	must(t, err)
	want := "preflight registry,create registry,start registry,wait healthy registry,preflight bus,create bus,start bus,wait healthy bus"
	if got := strings.Join(cut.steps, ","); got != want {
		t.Errorf("steps %s\nwant  %s", got, want)
	}
	if len(res.Raised) != 2 || len(res.Listening) != 1 || res.Listening[0].Name != "registry" || len(res.Silent) != 1 || res.Silent[0].Name != "bus" {
		t.Errorf("result %+v: want both raised, registry listening, bus silent", res)
	}
}

// A container that does not become healthy rolls back what this genesis
// raised, newest first, and names the container and the step.
func TestRaiseFoundationFailureRollsBack(t *testing.T) {
	a, cut, plan := foundationActs(t)
	cut.fail = "wait healthy bus"
	_, err := a.RaiseFoundation(context.Background(), ProbeInput{Plan: plan.Ref()})
	msg := appErr(t, err, ErrGenesis)
	for _, w := range []string{"foundation.containers[1] (bus): wait healthy failed", "2 container(s)", "adopt retry n1"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q lacks %q", msg, w)
		}
	}
	if got := strings.Join(cut.steps[len(cut.steps)-2:], ","); got != "rollback bus,rollback registry" {
		t.Errorf("rollback steps %s, want bus then registry", got)
	}
}

// A container of the same name that is not the mesh's is never taken over.
func TestRaiseFoundationTakesNothingOver(t *testing.T) {
	a, cut, plan := foundationActs(t)
	cut.preds = map[string]*cutover.Predecessor{"registry": {ID: "abcdef0123456789", Name: "registry"}}
	_, err := a.RaiseFoundation(context.Background(), ProbeInput{Plan: plan.Ref()})
	msg := appErr(t, err, ErrGenesis)
	if !strings.Contains(msg, "takes none over") || !strings.Contains(msg, "foundation.containers[0].name") {
		t.Errorf("error %q must refuse the takeover and name the key", msg)
	}
	for _, s := range cut.steps {
		if strings.HasPrefix(s, "create") || strings.HasPrefix(s, "start") {
			t.Errorf("a refused genesis did %s", s)
		}
	}
}

// A genesis run again finds the foundation's own containers on their
// ports and goes on; anything else on a foundation port still collides.
func TestCheckFoundationPortsKeepsOwnContainers(t *testing.T) {
	a, _, plan := foundationActs(t)
	a.Engine = fake.Engine{Containers: containers.Report{Available: true, Containers: []containers.Info{
		{Name: "registry", State: "running", Ports: []containers.Published{{HostPort: 5001, ContainerPort: 5000, Proto: "tcp"}}},
	}}}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 5001, PID: 70, Exe: "docker-proxy"}}}
	if _, err := a.CheckFoundationPorts(context.Background(), ProbeInput{Plan: plan.Ref()}); err != nil {
		t.Fatalf("the foundation's own registry on its port: %v", err)
	}
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 4222, PID: 71, Exe: "natsd"}}}
	_, err := a.CheckFoundationPorts(context.Background(), ProbeInput{Plan: plan.Ref()})
	if msg := appErr(t, err, ErrPortCollision); !strings.Contains(msg, "pid 71 (natsd)") {
		t.Errorf("collision %q does not name the holder", msg)
	}
}
