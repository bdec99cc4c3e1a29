package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
)

// signedNode writes node n1's configuration trusting key and signing with
// it, and returns its path and plan.
func signedNode(t *testing.T, key string) (string, config.Plan) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "n1.yaml")
	body := "node: {name: n1, role: member}\nmodules:\n  - name: app\n    ports: [\"8080/tcp\"]\nflip: {drop: [\"8081/tcp\"]}\n" + key
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, c.Plan()
}

// TestRequestsCarryAVerifiableIntent: each state-changing request the CLI
// sends carries an intent the node verifies against its own
// authority.operators, for its node, plan, action and arguments; another
// node's verification or another module's refuses it.
func TestRequestsCarryAVerifiableIntent(t *testing.T) {
	k := testKey(t)
	cfg, plan := signedNode(t, k.YAML())
	ops, err := intent.ParseOperators(k.Public)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		update string
		want   intent.Want
	}{
		{[]string{"migrate", "n1", "app"}, workflows.UpdateMigrate, intent.Want{Actions: []string{"migrate"}, Args: map[string]string{"module": "app"}}},
		{[]string{"retry", "n1"}, workflows.UpdateRetry, intent.Want{Actions: []string{"retry"}}},
		{[]string{"flip", "n1"}, workflows.UpdateFlip, intent.Want{Actions: []string{"flip"}, Args: map[string]string{"drop": "8081/tcp"}}},
		{[]string{"prune", "n1"}, workflows.UpdatePrune, intent.Want{Actions: []string{"prune"}, Args: map[string]string{"modules": "app"}}},
		{[]string{"release", "n1"}, workflows.UpdateRelease, intent.Want{Actions: []string{"release"}}},
		{[]string{"drift", "accept", "n1"}, workflows.SignalDriftAccept, intent.Want{Actions: []string{"drift-accept"}}},
	} {
		f := nodeFake(c.update, nil, true)
		f.results[c.update] = workflows.RequestResult{Queued: 1}
		code, out, errs := runCLI(t, f, append(c.args, "--config", cfg)...)
		if code != exitOK || len(f.updates) != 1 {
			t.Fatalf("%v: exit %d, %d update(s)\n%s%s", c.args, code, len(f.updates), out, errs)
		}
		in, ok := f.updates[0].arg.(workflows.RequestInput)
		if !ok || in.Intent == nil {
			t.Fatalf("%v: sent %#v, no intent", c.args, f.updates[0].arg)
		}
		want := c.want
		want.Node, want.PlanHash = "n1", plan.Hash()
		if _, err := intent.Verify(in.Intent, ops, want, time.Now()); err != nil {
			t.Errorf("%v: the node would refuse the intent: %v", c.args, err)
		}
		for what, w := range map[string]intent.Want{
			"another node": {Node: "n2", PlanHash: plan.Hash(), Actions: want.Actions, Args: want.Args},
			"another plan": {Node: "n1", PlanHash: "00", Actions: want.Actions, Args: want.Args},
			"another args": {Node: "n1", PlanHash: plan.Hash(), Actions: want.Actions, Args: map[string]string{"module": "other"}},
		} {
			var r *intent.Refusal
			if _, err := intent.Verify(in.Intent, ops, w, time.Now()); !errors.As(err, &r) {
				t.Errorf("%v: verified for %s", c.args, what)
			}
		}
		v, _ := intent.Verify(in.Intent, ops, want, time.Now())
		if v != nil && v.Expires.Sub(v.Issued) != 30*time.Minute {
			t.Errorf("%v: lifetime %s, want operator.intent_ttl's default 30m", c.args, v.Expires.Sub(v.Issued))
		}
	}
}

// TestAKeyThatIsNotAtHandSendsNothing: a node that lists operators gets
// nothing unsigned: without a key the CLI refuses before sending.
func TestAKeyThatIsNotAtHandSendsNothing(t *testing.T) {
	k := testKey(t)
	cfg, _ := signedNode(t, "authority:\n  operators: [\""+k.Public+"\"]\n")
	t.Setenv("SSH_AUTH_SOCK", "")
	f := nodeFake(workflows.UpdateMigrate, nil, true)
	code, out, errs := runCLI(t, f, "migrate", "n1", "app", "--config", cfg)
	if code != exitUsage || f.called("UpdateWorkflow") != 0 {
		t.Fatalf("no key: exit %d, %d update(s)\n%s%s", code, f.called("UpdateWorkflow"), out, errs)
	}
	mustContain(t, "no key", errs, "needs the operator's signature", "--sign-key")
	// --sign-key gives it.
	f = nodeFake(workflows.UpdateMigrate, nil, true)
	f.results[workflows.UpdateMigrate] = workflows.RequestResult{Queued: 1}
	if code, out, errs := runCLI(t, f, "migrate", "n1", "app", "--config", cfg, "--sign-key", k.Path); code != exitOK {
		t.Fatalf("--sign-key: exit %d\n%s%s", code, out, errs)
	}
}

// TestAFleetIsOneIntent: fleet start signs one intent naming every node
// with its plan's hash, for the fleet's lifetime.
func TestAFleetIsOneIntent(t *testing.T) {
	path := fleetFile(t, "f1", "n1", "n2")
	fl, err := config.LoadFleet(path)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := fl.Configs[0].Authority.Keys()
	if err != nil {
		t.Fatal(err)
	}
	x := &cli{}
	signed, err := x.fleetIntent(authority.ActFleet, fl.Configs)
	if err != nil || signed == nil {
		t.Fatalf("fleet intent: %v", err)
	}
	for _, c := range fl.Configs {
		v, err := intent.Verify(signed, ops, intent.Want{Node: c.Node.Name, PlanHash: c.Plan().Hash(), Actions: []string{authority.ActFleet}}, time.Now())
		if err != nil {
			t.Fatalf("node %s refuses the fleet's intent: %v", c.Node.Name, err)
		}
		if v.Expires.Sub(v.Issued) != 12*time.Hour {
			t.Errorf("fleet intent lifetime %s, want 12h", v.Expires.Sub(v.Issued))
		}
	}
}

// TestSignsWithSSHAgent: without a key file the CLI signs with the one key
// ssh-agent holds, as git does.
func TestSignsWithSSHAgent(t *testing.T) {
	k := testKey(t)
	b, err := os.ReadFile(k.Path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(ring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	cfg, plan := signedNode(t, "authority:\n  operators: [\""+k.Public+"\"]\n")
	f := nodeFake(workflows.UpdateRelease, nil, true)
	f.results[workflows.UpdateRelease] = workflows.RequestResult{Queued: 1}
	if code, out, errs := runCLI(t, f, "release", "n1", "--config", cfg); code != exitOK {
		t.Fatalf("release signed by the agent: exit %d\n%s%s", code, out, errs)
	}
	in := f.updates[0].arg.(workflows.RequestInput)
	ops, _ := intent.ParseOperators(k.Public)
	if _, err := intent.Verify(in.Intent, ops, intent.Want{Node: "n1", PlanHash: plan.Hash(), Actions: []string{"release"}}, time.Now()); err != nil {
		t.Fatalf("the agent's signature: %v", err)
	}
}

// TestRequestsWithoutConfigAreSigned: without --config, a request is
// signed with the key at hand (--sign-key, ADOPT_OPERATOR_SIGN_KEY) for
// the plan the node's workflow holds, so a node that lists operators acts
// on it; with no key at hand the CLI says so and why.
func TestRequestsWithoutConfigAreSigned(t *testing.T) {
	k := testKey(t)
	_, plan := signedNode(t, k.YAML())
	ops, err := intent.ParseOperators(k.Public)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Setenv("ADOPT_CONFIG", "")
	for _, c := range []struct {
		what string
		env  string
		args []string
		want intent.Want
	}{
		{"--sign-key", "", []string{"flip", "n1", "--sign-key", k.Path}, intent.Want{Actions: []string{"flip"}, Args: map[string]string{"drop": "8081/tcp"}}},
		{config.EnvVar("operator.sign_key"), k.Path, []string{"migrate", "n1", "app"}, intent.Want{Actions: []string{"migrate"}, Args: map[string]string{"module": "app"}}},
	} {
		t.Setenv(config.EnvVar("operator.sign_key"), c.env)
		update := workflows.UpdateFlip
		if c.args[0] == "migrate" {
			update = workflows.UpdateMigrate
		}
		f := nodeFake(update, nil, true)
		f.results[update] = workflows.RequestResult{Queued: 1}
		f.answers[workflows.WorkflowID("n1")] = workflows.State{Node: "n1", Plan: plan}
		code, out, errs := runCLI(t, f, c.args...)
		if code != exitOK || len(f.updates) != 1 {
			t.Fatalf("%s: exit %d\n%s%s", c.what, code, out, errs)
		}
		in := f.updates[0].arg.(workflows.RequestInput)
		want := c.want
		want.Node, want.PlanHash = "n1", plan.Hash()
		if _, err := intent.Verify(in.Intent, ops, want, time.Now()); err != nil {
			t.Errorf("%s: the node would refuse the request: %v", c.what, err)
		}
	}
	t.Setenv(config.EnvVar("operator.sign_key"), "")
	f := nodeFake(workflows.UpdateMigrate, nil, true)
	f.results[workflows.UpdateMigrate] = workflows.RequestResult{Queued: 1}
	code, out, errs := runCLI(t, f, "migrate", "n1", "app")
	if code != exitOK || len(f.updates) != 1 || f.updates[0].arg.(workflows.RequestInput).Intent != nil {
		t.Fatalf("no key: exit %d\n%s%s", code, out, errs)
	}
	mustContain(t, "no key", errs, "sent unsigned", "no signing key at hand", "--sign-key", config.EnvVar("operator.sign_key"), "SSH_AUTH_SOCK")
}

// TestSignPrintsASignalsInput: adopt sign prints the request as its
// signal's input, with an intent the node verifies for that action and
// its arguments, and sends nothing; without a key it prints nothing.
func TestSignPrintsASignalsInput(t *testing.T) {
	k := testKey(t)
	cfg, plan := signedNode(t, k.YAML())
	ops, err := intent.ParseOperators(k.Public)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want intent.Want
	}{
		{[]string{"sign", "retry", "n1", "app"}, intent.Want{Actions: []string{"retry"}, Args: map[string]string{"module": "app"}}},
		{[]string{"sign", "flip", "n1"}, intent.Want{Actions: []string{"flip"}, Args: map[string]string{"drop": "8081/tcp"}}},
		{[]string{"sign", "drift-accept", "n1"}, intent.Want{Actions: []string{"drift-accept"}}},
	} {
		f := nodeFake(workflows.UpdateRetry, nil, true)
		code, out, errs := runCLI(t, f, append(c.args, "--config", cfg)...)
		if code != exitOK || f.called("UpdateWorkflow") != 0 || f.called("SignalWorkflow") != 0 {
			t.Fatalf("%v: exit %d, %d update(s), %d signal(s)\n%s%s", c.args, code, f.called("UpdateWorkflow"), f.called("SignalWorkflow"), out, errs)
		}
		mustContain(t, "the hint", errs, "signal \""+c.want.Actions[0]+"\"", "node-migration/n1")
		var in workflows.RequestInput
		if err := json.Unmarshal([]byte(out), &in); err != nil || in.Intent == nil {
			t.Fatalf("%v: stdout is not a signed input (%v):\n%s", c.args, err, out)
		}
		want := c.want
		want.Node, want.PlanHash = "n1", plan.Hash()
		if _, err := intent.Verify(in.Intent, ops, want, time.Now()); err != nil {
			t.Errorf("%v: the node would refuse the printed intent: %v", c.args, err)
		}
		if in.Plan == nil || in.Plan.Hash() != plan.Hash() {
			t.Errorf("%v: the input does not carry the plan signed for", c.args)
		}
	}

	cfg, _ = signedNode(t, "authority:\n  operators: [\""+k.Public+"\"]\n")
	t.Setenv("SSH_AUTH_SOCK", "")
	code, out, errs := runCLI(t, nodeFake(workflows.UpdateRetry, nil, true), "sign", "retry", "n1", "app", "--config", cfg)
	if code != exitUsage || out != "" {
		t.Fatalf("no key: exit %d\n%s%s", code, out, errs)
	}
	mustContain(t, "no key", errs, "--sign-key")
}
