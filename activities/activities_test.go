package activities

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/firewall/eval"
	"adoption/nodestate"
	"adoption/sockets"
)

// The shared fakes are the parts these tests give a node.
var (
	_ Firewall   = fake.Firewall{}
	_ NodeReader = fake.NodeFirewall{}
	_ Containers = fake.Engine{}
	_ Sockets    = fake.Sockets{}
	_ Flipper    = &fake.Flipper{}
	_ Marks      = fake.Marks{}
	_ Cutover    = fake.Cutover{}
)

func newActs(t *testing.T) (*Activities, string) {
	t.Helper()
	root, state := t.TempDir(), t.TempDir()
	return &Activities{
		Node:     "n1",
		Firewall: fake.Firewall{Report: eval.Report{Kind: "iptables-nft"}},
		Engine:   fake.Engine{Containers: containers.Report{Available: true}},
		Sockets:  fake.Sockets{},
		Files:    custody.New(root, state),
		State:    nodestate.New(state),
		Flips:    nodestate.New(state),
	}, root
}

// withPlan makes plan the node's own configuration.
func withPlan(a *Activities, plan config.Plan) config.Plan {
	a.Local = authority.Fixed(plan, map[string][]byte{}, 30*time.Minute)
	return plan
}

func appErr(t *testing.T, err error, typ string) string {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != typ {
		t.Fatalf("want a %s application error, got %v", typ, err)
	}
	if !ae.NonRetryable() {
		t.Fatalf("%s must not be retried: %v", typ, err)
	}
	return ae.Message()
}

// Every foundation port collision is reported at once, naming the holder
// and the key.
func TestCheckFoundationPortsNamesEveryCollision(t *testing.T) {
	a, _ := newActs(t)
	a.Sockets = fake.Sockets{Listening: []sockets.Listener{
		{Proto: "tcp", Addr: "0.0.0.0", Port: 5000, PID: 4121, Exe: "registry"},
		{Proto: "tcp", Addr: "127.0.0.1", Port: 15672, PID: 77, Exe: "beam.smp"},
	}}
	a.Engine = fake.Engine{Containers: containers.Report{Available: true, Containers: []containers.Info{
		{Name: "predecessor-proxy", State: "running", Ports: []containers.Published{{HostPort: 443, ContainerPort: 443, Proto: "tcp"}}},
	}}}
	plan := config.Plan{Node: "n1", Role: "control", Foundation: []config.NamedPort{
		{Name: "registry", Port: config.Port{Num: 5000, Proto: "tcp"}},
		{Name: "broker_management", Port: config.Port{Num: 15672, Proto: "tcp"}},
		{Name: "web", Port: config.Port{Num: 443, Proto: "tcp"}},
		{Name: "store", Port: config.Port{Num: 5432, Proto: "tcp"}},
	}}
	withPlan(a, plan)
	_, err := a.CheckFoundationPorts(context.Background(), ProbeInput{Plan: plan.Ref()})
	msg := appErr(t, err, ErrPortCollision)
	for _, want := range []string{
		"3 foundation port(s) collide; nothing was opened or started",
		"foundation port registry 5000/tcp is held by pid 4121 (registry); set foundation.ports.registry",
		"foundation port broker_management 15672/tcp is held by pid 77 (beam.smp); set foundation.ports.broker_management",
		"foundation port web 443/tcp is held by container predecessor-proxy; set foundation.ports.web",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("collision message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "5432") {
		t.Errorf("a free port reported: %s", msg)
	}
}

func TestAdoptRefusesWhileControlDaemonRuns(t *testing.T) {
	a, root := newActs(t)
	a.Sockets = fake.Sockets{Procs: []sockets.Process{{PID: 4242, Exe: "predecessor-sync"}}}
	must(t, os.WriteFile(root+"/hosts", []byte("x"), 0o644))
	plan := withPlan(a, config.Plan{Node: "n1", Control: []string{"predecessor-sync"}, NodeFiles: []config.FilePlan{{Path: "/hosts"}}})
	_, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: "node-migration/n1"})
	msg := appErr(t, err, ErrControlRunning)
	if !strings.Contains(msg, "predecessor-sync (pid 4242)") || !strings.Contains(msg, "adopt retry n1") {
		t.Fatalf("refusal: %s", msg)
	}
	if _, ok, _ := a.State.Adopted(); ok {
		t.Fatal("a refused adoption wrote the adopted marker")
	}
}

func TestActivitiesRefuseAnotherNodesPlan(t *testing.T) {
	a, _ := newActs(t)
	withPlan(a, config.Plan{Node: "n1"})
	_, err := a.Probe(context.Background(), ProbeInput{Plan: config.Plan{Node: "n2"}.Ref()})
	appErr(t, err, ErrWrongNode)
}

// A module whose declared file content is not in the worker's own
// configuration is refused before anything changes.
func TestCutoverPreflightNeedsLocalContent(t *testing.T) {
	a, _ := newActs(t)
	plan := config.Plan{Node: "n1", Modules: []config.ModulePlan{{Name: "mail",
		Files: []config.FilePlan{{Path: "/srv/mail.env", SHA256: strings.Repeat("c", 64)}}}}}
	withPlan(a, plan)
	_, err := a.CutoverPreflight(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "mail"})
	msg := appErr(t, err, ErrMissingContent)
	if !strings.Contains(msg, "/srv/mail.env") || !strings.Contains(msg, "update the node's configuration") {
		t.Fatalf("refusal: %s", msg)
	}
	_, err = a.CutoverPreflight(context.Background(), ModuleInput{Plan: plan.Ref(), Module: "nosuch"})
	appErr(t, err, ErrBadModule)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
