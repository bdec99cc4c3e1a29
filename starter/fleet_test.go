// `adopt fleet next` and `adopt fleet retry` are Updates: the fleet's
// validator decides; the CLI reports its refusal (exit 2) and its answer.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/intent"
	"adoption/workflows/fleet"
)

// fleetFake is a running fleet f1.
func fleetFake() *fakeClient {
	f := newFake()
	id := fleet.FleetID("f1")
	f.runs[id] = execution(id, "", "", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	return f
}

func TestFleetRetryRefusedByTheFleet(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	f := fleetFake()
	f.outcome[fleet.UpdateFleetRetry] = wire(errors.New("it has not failed (waiting); it starts in its turn"))
	code, out, errs := runCLI(t, f, "fleet", "retry", "n3", "--fleet", path)
	if code != exitRefused || len(f.signals) != 0 {
		t.Errorf("retry n3: exit %d, %d signal(s), want 2 and none\n%s%s", code, len(f.signals), out, errs)
	}
	mustContain(t, "retry n3", errs, "retry of node n3 refused", "it has not failed (waiting)", "nothing was sent")

	f = fleetFake()
	f.results[fleet.UpdateFleetRetry] = fleet.FleetAnswer{Node: "n2"}
	code, out, errs = runCLI(t, f, "fleet", "retry", "n2", "--fleet", path, "--json")
	if code != exitOK || len(f.updates) != 1 || f.updates[0].name != fleet.UpdateFleetRetry {
		t.Fatalf("retry of a failed node: exit %d, updates %+v, want 0 and one retry\n%s%s", code, f.updates, out, errs)
	}
	in, _ := f.updates[0].arg.(fleet.FleetRequest)
	if in.Node != "n2" || time.Until(in.NotAfter) <= 0 {
		t.Errorf("retry sent %+v, want node n2 and a NotAfter ahead", in)
	}
}

func TestFleetNextAnswersWhatTheFleetDid(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	f := fleetFake()
	f.outcome[fleet.UpdateFleetNext] = wire(errors.New("every node has started (the last: n3); there is no next node"))
	code, out, errs := runCLI(t, f, "fleet", "next", "--fleet", path)
	if code != exitRefused {
		t.Errorf("next refused: exit %d, want 2\n%s%s", code, out, errs)
	}
	mustContain(t, "next refused", errs, "fleet f1: next refused", "every node has started (the last: n3)")

	f = fleetFake()
	f.results[fleet.UpdateFleetNext] = fleet.FleetAnswer{Node: "n3", PassedOver: []string{"n2"}}
	code, out, errs = runCLI(t, f, "fleet", "next", "--fleet", path, "--json")
	var res struct {
		Node       string   `json:"node"`
		PassedOver []string `json:"passed_over"`
	}
	if code != exitOK || len(f.updates) != 1 || json.Unmarshal([]byte(out), &res) != nil || res.Node != "n3" || len(res.PassedOver) != 1 || res.PassedOver[0] != "n2" {
		t.Fatalf("next past a failed node: exit %d, output %q, want 0, node n3, n2 passed over\n%s", code, out, errs)
	}
	f = fleetFake()
	f.results[fleet.UpdateFleetNext] = fleet.FleetAnswer{PassedOver: []string{"n3"}}
	code, out, errs = runCLI(t, f, "fleet", "next", "--fleet", path)
	if code != exitOK {
		t.Fatalf("next past the last, failed node: exit %d\n%s%s", code, out, errs)
	}
	mustContain(t, "next past the last, failed node", out, "goes on without n3")
	if strings.Contains(out, "may start now") {
		t.Errorf("next past the last node says a node starts:\n%s", out)
	}
}

// A finished fleet refuses (exit 2) and is sent nothing; a late request
// is not delivered (exit 1).
func TestFleetRequestsToAFleetNotRunning(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	f := newFake()
	id := fleet.FleetID("f1")
	f.runs[id] = execution(id, "", "", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
	code, out, errs := runCLI(t, f, "fleet", "retry", "n2", "--fleet", path)
	if code != exitRefused || len(f.updates) != 0 {
		t.Errorf("retry on a finished fleet: exit %d, %d update(s), want 2 and none\n%s%s", code, len(f.updates), out, errs)
	}
	mustContain(t, "retry on a finished fleet", errs, "fleet f1 has finished")

	f = fleetFake()
	f.outcome[fleet.UpdateFleetNext] = wire(lateErr())
	code, out, errs = runCLI(t, f, "fleet", "next", "--fleet", path)
	if code != exitError {
		t.Errorf("a late next: exit %d, want 1\n%s%s", code, out, errs)
	}
	mustContain(t, "a late next", errs, "did not answer next", "it does not run")
}

// A name that cannot be a node's is a usage error, asked of nobody.
func TestFleetRetryOfAnInvalidNameIsUsage(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	f := fleetFake()
	if code, out, errs := runCLI(t, f, "fleet", "retry", "n2'; rm -rf /", "--fleet", path); code != exitUsage || len(f.updates)+len(f.signals) != 0 {
		t.Fatalf("retry of an invalid name: exit %d, want 3 with nothing asked\n%s%s", code, out, errs)
	}
}

func lateErr() error {
	return temporal.NewApplicationError("the request reached the workflow at 2026-01-01T00:00:12Z, after its sender stopped waiting (2026-01-01T00:00:08Z): it was reported as not delivered and does not run; send it again", "Late")
}

// pause and resume are Updates like next: the fleet's refusal is exit 2,
// its answer is printed; resume carries a signed intent, pause none.
func TestFleetPauseResumeAsUpdates(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	f := fleetFake()
	f.outcome[fleet.UpdateFleetPause] = wire(errors.New("the fleet is already paused (paused by the operator at 10:00:00)"))
	code, out, errs := runCLI(t, f, "fleet", "pause", "--fleet", path)
	if code != exitRefused {
		t.Errorf("pause refused: exit %d, want 2\n%s%s", code, out, errs)
	}
	mustContain(t, "pause refused", errs, "fleet f1: pause refused", "already paused")

	f = fleetFake()
	code, out, errs = runCLI(t, f, "fleet", "pause", "--fleet", path)
	if code != exitOK || len(f.updates) != 1 || f.updates[0].name != fleet.UpdateFleetPause {
		t.Fatalf("pause: exit %d, updates %+v\n%s%s", code, f.updates, out, errs)
	}
	if in, _ := f.updates[0].arg.(fleet.FleetRequest); in.Intent != nil || time.Until(in.NotAfter) <= 0 {
		t.Errorf("pause sent %+v, want no intent and a NotAfter ahead", in)
	}
	mustContain(t, "pause", out, "fleet f1: paused")

	f = fleetFake()
	f.results[fleet.UpdateFleetResume] = fleet.FleetAnswer{Node: "n2"}
	code, out, errs = runCLI(t, f, "fleet", "resume", "--fleet", path)
	if code != exitOK || len(f.updates) != 1 || f.updates[0].name != fleet.UpdateFleetResume {
		t.Fatalf("resume: exit %d, updates %+v\n%s%s", code, f.updates, out, errs)
	}
	if in, _ := f.updates[0].arg.(fleet.FleetRequest); in.Intent != nil {
		t.Errorf("resume sent one intent for every node: %+v", in)
	} else {
		eachOwn(t, "resume", in.Intents, authority.ActFleetResume, nil, "n1", "n2", "n3")
	}
	mustContain(t, "resume", out, "fleet f1: resumed; node n2 starts now")
}

// A fleet file whose waves do not cover the fleet is refused before the
// CLI asks the cluster anything.
func TestFleetStartRefusesBadWaves(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, []byte("waves: [1]\nmax_failed: \"120%\"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	f := fleetFake()
	code, out, errs := runCLI(t, f, "fleet", "start", "--fleet", path)
	if code == exitOK || f.called("DescribeWorkflow") != 0 || len(f.updates) != 0 {
		t.Errorf("bad waves: exit %d, %d describe(s), want refused before any call\n%s%s", code, f.called("DescribeWorkflow"), out, errs)
	}
	mustContain(t, "bad waves", errs, "waves: [1] cover 1 of the fleet's 2 node(s)", "max_failed: 120%: a percentage over 100")
}

// The fleet file's waves and ask_after reach the fleet's input as they
// were resolved and checked.
func TestFleetStartSendsWavesAndAskAfter(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, []byte("waves: [1, \"100%\"]\nmax_failed: 1\nask_after: 90s\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFake()
	code, out, errs := runCLI(t, f, "fleet", "start", "--fleet", path)
	if code != exitOK || len(f.started) != 1 {
		t.Fatalf("fleet start: exit %d, started %+v\n%s%s", code, f.started, out, errs)
	}
	in, _ := f.started[0].arg.(fleet.FleetInput)
	if f.started[0].workflowID != fleet.FleetID("f1") || in.AskFirst != 90*time.Second || in.Waves == nil ||
		fmt.Sprint(in.Waves.Sizes, in.Waves.Budgets) != "[1 1] [1 1]" || len(in.Members) != 3 || in.Intent != nil {
		t.Errorf("fleet start sent %s %+v, want fleet/f1 with ask_first 1m30s, waves [1 1] budgets [1 1], three members, signed per node", f.started[0].workflowID, in)
	}
	eachOwn(t, "fleet start", in.Intents, authority.ActFleet, nil, "n1", "n2", "n3")
}

// fleet migrate of a module no node declares is refused before anything is
// sent, naming the key; one that nodes declare goes to the fleet as one
// Update naming them, signed for them with the module as its argument.
func TestFleetMigrateAndFlip(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2", "n3")
	f := fleetFake()
	code, out, errs := runCLI(t, f, "fleet", "migrate", "nosuch", "--fleet", path)
	if code != exitRefused || len(f.updates) != 0 {
		t.Errorf("migrate nosuch: exit %d, updates %+v, want 2 and none\n%s%s", code, f.updates, out, errs)
	}
	mustContain(t, "migrate nosuch", errs, `modules: no node of fleet f1 declares module "nosuch"`)

	for _, n := range []string{"n2", "n3"} {
		cf, err := os.OpenFile(filepath.Join(filepath.Dir(path), n+".yaml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cf.WriteString("modules: [{name: web, ports: [8080/tcp]}]\n")
		if cerr := cf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f = fleetFake()
	f.results[fleet.UpdateFleetMigrate] = fleet.FleetAnswer{Targets: []string{"n2", "n3"}}
	code, out, errs = runCLI(t, f, "fleet", "migrate", "web", "--fleet", path)
	if code != exitOK || len(f.updates) != 1 || f.updates[0].name != fleet.UpdateFleetMigrate {
		t.Fatalf("migrate web: exit %d, updates %+v\n%s%s", code, f.updates, out, errs)
	}
	in, _ := f.updates[0].arg.(fleet.FleetRequest)
	if in.Module != "web" || strings.Join(in.Nodes, ",") != "n2,n3" || in.Intent != nil {
		t.Errorf("migrate sent %+v, want module web on n2, n3, signed per node", in)
	}
	eachOwn(t, "migrate web", in.Intents, authority.ActFleetMigrate, map[string]string{"module": "web"}, "n2", "n3")
	mustContain(t, "migrate web", out, "fleet f1: migrate web on n2, n3, wave by wave")

	f = fleetFake()
	code, out, errs = runCLI(t, f, "fleet", "flip", "--fleet", path)
	if code != exitOK || len(f.updates) != 1 || f.updates[0].name != fleet.UpdateFleetFlip {
		t.Fatalf("flip: exit %d, updates %+v\n%s%s", code, f.updates, out, errs)
	}
	in, _ = f.updates[0].arg.(fleet.FleetRequest)
	eachOwn(t, "flip", in.Intents, authority.ActFleetFlip, nil, "n1", "n2", "n3")

	f = fleetFake()
	f.outcome[fleet.UpdateFleetFlip] = wire(errors.New("no node of the fleet is migrated and running"))
	code, out, errs = runCLI(t, f, "fleet", "flip", "--fleet", path)
	if code != exitRefused {
		t.Errorf("flip refused: exit %d, want 2\n%s%s", code, out, errs)
	}
	mustContain(t, "flip refused", errs, "fleet f1: flip refused", "no node of the fleet is migrated")
}

// eachOwn checks that a fleet request carries one signed intent for each
// of nodes and no other, each naming its node alone (with a plan hash),
// for action with args, each under its own nonce.
func eachOwn(t *testing.T, what string, got map[string]*intent.Signed, action string, args map[string]string, nodes ...string) {
	t.Helper()
	if len(got) != len(nodes) {
		t.Fatalf("%s: %d intents, want one for each of %v", what, len(got), nodes)
	}
	nonces := map[string]bool{}
	for _, n := range nodes {
		s, ok := got[n]
		if !ok || s == nil || len(s.Signature) == 0 {
			t.Fatalf("%s: no signed intent for node %s", what, n)
		}
		var in intent.Intent
		if err := json.Unmarshal(s.Payload, &in); err != nil {
			t.Fatal(err)
		}
		if len(in.Targets) != 1 || in.Targets[0].Node != n || len(in.Targets[0].PlanHash) != 64 || in.Action != action || fmt.Sprint(in.Args) != fmt.Sprint(args) {
			t.Errorf("%s: node %s's intent is %s %v on %+v, want %s %v on node %s alone", what, n, in.Action, in.Args, in.Targets, action, args, n)
		}
		nonces[in.Nonce] = true
	}
	if len(nonces) != len(nodes) {
		t.Errorf("%s: %d distinct nonces for %d intents", what, len(nonces), len(nodes))
	}
}

// A fleet request past maxRequestBytes is refused as usage, before it is
// sent, naming its size and what signs in less; one under it passes.
func TestFleetRequestFits(t *testing.T) {
	in := fleet.FleetRequest{Intents: map[string]*intent.Signed{}}
	for i := range 1000 { // RSA-4096's size: 2.5 KiB a node
		in.Intents[fmt.Sprintf("sim%05d", i)] = &intent.Signed{Payload: make([]byte, 300), Signature: make([]byte, 1500)}
	}
	err := requestFits("fleet migrate web", len(in.Intents), in)
	var ee *exitErr
	if !errors.As(err, &ee) || ee.code != exitUsage {
		t.Fatalf("a request of 1000 RSA-4096 intents: %v, want a usage error", err)
	}
	mustContain(t, "too big", err.Error(), "fleet migrate web: the request is 2", "KiB, more than the 1536 KiB", "each of 1000 node(s); nothing was sent", "ed25519")
	for k, s := range in.Intents { // ed25519's: 0.8 KiB a node
		s.Payload, s.Signature = make([]byte, 230), make([]byte, 340)
		in.Intents[k] = s
	}
	if err := requestFits("fleet migrate web", len(in.Intents), in); err != nil {
		t.Errorf("a request of 1000 ed25519 intents: %v, want it sent", err)
	}
}
