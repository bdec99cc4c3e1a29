package activities

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"adoption/activities/authority"
	"adoption/activities/caller"
	"adoption/config"
	"adoption/intent"
	"adoption/nodestate"
)

func callerName(ctx context.Context) string {
	c, _ := caller.Of(ctx)
	return c.String()
}

// wrongWorkflowErr reports whether err is the refusal of a workflow the
// node does not serve.
func wrongWorkflowErr(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrWrongWorkflow && ae.NonRetryable()
}

// testEnvCaller is the workflow the SDK's test activity environment
// calls from.
var testEnvCaller = caller.Caller{Namespace: "default-test-namespace", Workflow: "default-test-workflow-id"}

// adoptedAs leaves a's node adopted and serving c, as an adoption by c's
// verified start leaves it: the adopted marker and the owner record.
func adoptedAs(t *testing.T, a *Activities, c caller.Caller) {
	t.Helper()
	must(t, a.State.MarkAdopted(nodestate.Marker{Node: "n1", Workflow: c.Workflow}))
	if o, err := a.State.SetOwner(nodestate.Owner{Namespace: c.Namespace, Workflow: c.Workflow, At: time.Now().UTC()}); err != nil || o.Workflow != c.Workflow {
		t.Fatalf("record owner %s: %+v, %v", c, o, err)
	}
}

// notAdopted leaves sn's node as before any start: no marker, no owner.
func (sn *signedNode) notAdopted(t *testing.T) {
	t.Helper()
	must(t, sn.a.State.ClearOwner())
	must(t, sn.a.State.ClearAdopted())
}

// adoptedBy makes wf the workflow sn's node serves, as the operator's
// start does: a verified start intent presented by wf.
func (sn *signedNode) adoptedBy(t *testing.T, wf string) {
	t.Helper()
	sn.adoptedByIn(t, caller.Caller{Namespace: "default", Workflow: wf})
}

func (sn *signedNode) adoptedByIn(t *testing.T, c caller.Caller) {
	t.Helper()
	wf := c.Workflow
	ctx := caller.With(context.Background(), c)
	s := sn.sign(t, sn.op, "n1", sn.plan.Hash(), authority.ActStart, nil, time.Now(), time.Hour)
	if _, err := sn.a.CheckFoundationPorts(ctx, ProbeInput{Plan: clone(t, sn.plan).Ref(), Intent: s}); refusedFor(err) != "" || wrongWorkflowErr(err) {
		t.Fatalf("the operator's start by %s: %v", wf, err)
	}
	if o, ok, err := sn.a.State.Owner(); err != nil || !ok || o.Workflow != wf || o.Namespace != c.Namespace {
		t.Fatalf("owner after the start by %s: %+v, %v, %v", wf, o, ok, err)
	}
}

// TestAnotherWorkflowIsRefused: once the product's workflow adopted the
// node, a workflow that is not the product's, with a copied plan and a
// valid-looking request (an intent the operator's key really signed, for
// this node, plan, action and arguments), is refused for every activity,
// state-changing or not, and nothing changes: not the files under
// node.root and node.state_dir, not the firewall or the containers, and
// the intent's nonce is not claimed, so the operator's own workflow can
// still present it.
func TestAnotherWorkflowIsRefused(t *testing.T) {
	sn := newSignedNode(t)
	sn.adoptedBy(t, productWorkflow)
	evil := caller.With(context.Background(), caller.Caller{Namespace: "default", Workflow: "evil/n1"})
	otherNS := caller.With(context.Background(), caller.Caller{Namespace: "elsewhere", Workflow: productWorkflow})
	p := sn.plan
	readOnly := []call{
		{"Probe", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.Probe(ctx, ProbeInput{Plan: p.Ref()})
			return err
		}},
		{"Preview", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.Preview(ctx, PreviewInput{Plan: p.Ref(), Spec: specOf(p)})
			return err
		}},
		{"CheckDrift", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.checkDrift(ctx, DriftInput{Plan: p.Ref()})
			return err
		}},
		{"Rehearse", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.Rehearse(ctx, ModuleInput{Plan: p.Ref(), Module: "app"})
			return err
		}},
		{"Reconcile", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.reconcile(ctx, ReconcileInput{Plan: p.Ref()})
			return err
		}},
		{"Plan", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
			_, err := a.Plan(ctx, PlanInput{Node: p.Node})
			return err
		}},
	}
	before := sn.stateHash(t)
	for _, c := range append(stateChanging(), readOnly...) {
		var s *intent.Signed
		if c.action != "" {
			s = sn.sign(t, sn.op, "n1", p.Hash(), c.action, c.args, time.Now(), time.Hour)
		}
		for _, ctx := range []context.Context{evil, otherNS} {
			err := c.run(ctx, sn.a, clone(t, p), s)
			if !wrongWorkflowErr(err) {
				t.Errorf("%s by %s: %v, want a non-retryable %s", c.name, callerName(ctx), err, ErrWrongWorkflow)
			} else if msg := err.Error(); !strings.Contains(msg, "serves workflow "+productWorkflow) || !strings.Contains(msg, "nothing was changed") {
				t.Errorf("%s: the refusal does not say whom the node serves: %s", c.name, msg)
			}
		}
		if len(sn.rec.changes) != 0 {
			t.Fatalf("%s by another workflow changed the node: %v", c.name, sn.rec.changes)
		}
		if after := sn.stateHash(t); after != before {
			t.Fatalf("%s by another workflow changed files under node.root or node.state_dir", c.name)
		}
	}
	// The product's workflow is still served, and a new run of it (after
	// continue-as-new: the same workflow ID) too.
	if _, err := sn.a.Probe(WithWorkflow(context.Background(), productWorkflow), ProbeInput{Plan: clone(t, p).Ref()}); err != nil {
		t.Fatalf("the product's workflow: %v", err)
	}
}

// TestARunOfTheNodesWorkflowIsServed: the caller is read from the
// activity's own info (namespace and workflow ID, never the run), so a
// workflow continued as new, a new run under the same ID, is served, and
// a workflow under another ID is not.
func TestARunOfTheNodesWorkflowIsServed(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	sn := newSignedNode(t)
	// The test environment's workflow and namespace.
	sn.notAdopted(t)
	sn.adoptedByIn(t, testEnvCaller)
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(sn.a)
	if _, err := env.ExecuteActivity(sn.a.Probe, ProbeInput{Plan: clone(t, sn.plan).Ref()}); err != nil {
		t.Fatalf("a run of the node's workflow: %v", err)
	}
	must(t, sn.a.State.ClearOwner())
	sn.adoptedBy(t, "node-migration/other")
	if _, err := env.ExecuteActivity(sn.a.Probe, ProbeInput{Plan: clone(t, sn.plan).Ref()}); !wrongWorkflowErr(err) {
		t.Fatalf("a workflow under another ID: %v, want %s", err, ErrWrongWorkflow)
	}
}

// TestReleaseHandsTheNodeOn: a release by the node's workflow clears the
// record, and the next verified start (another workflow, e.g. a fleet's
// child after the node workflow ended) adopts it; the first workflow is
// refused from then on. Before any start, another workflow's start with no
// valid intent records nothing.
func TestReleaseHandsTheNodeOn(t *testing.T) {
	sn := newSignedNode(t)
	sn.notAdopted(t)
	before := sn.stateHash(t)
	if _, err := sn.a.CheckFoundationPorts(WithWorkflow(context.Background(), "evil/n1"), ProbeInput{Plan: clone(t, sn.plan).Ref()}); refusedFor(err) != intent.NoIntent {
		t.Fatalf("an unsigned start: %v", err)
	}
	if sn.stateHash(t) != before {
		t.Fatal("an unsigned start recorded an owner")
	}
	sn.adoptedBy(t, productWorkflow)
	rel := sn.sign(t, sn.op, "n1", sn.plan.Hash(), authority.ActRelease, nil, time.Now(), time.Hour)
	if _, err := sn.a.Release(WithWorkflow(context.Background(), productWorkflow), ProbeInput{Plan: clone(t, sn.plan).Ref(), Intent: rel}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, ok, _ := sn.a.State.Owner(); ok {
		t.Fatal("the owner record outlived the release")
	}
	sn.adoptedBy(t, "node-migration/n1-again")
	if _, err := sn.a.Probe(WithWorkflow(context.Background(), productWorkflow), ProbeInput{Plan: clone(t, sn.plan).Ref()}); !wrongWorkflowErr(err) {
		t.Fatalf("the released workflow after another adopted the node: %v", err)
	}
}

// TestPlanAnswersTheNodesWorkflowAndItsFleet: Plan answers the fleet the
// node's file names (authority.fleet), under the operator's intent to
// start the node in it, and the workflow the node serves; any other
// caller is refused, and a file naming no fleet lets none read.
func TestPlanAnswersTheNodesWorkflowAndItsFleet(t *testing.T) {
	sn := newSignedNode(t)
	sn.notAdopted(t)
	fleetStart := sn.sign(t, sn.op, "n1", sn.plan.Hash(), authority.ActFleet, nil, time.Now(), time.Hour)
	ask := func(wf string) error {
		in := PlanInput{Node: "n1"}
		if strings.HasPrefix(wf, "fleet/") {
			in.Intent = fleetStart
		}
		_, err := sn.a.Plan(WithWorkflow(context.Background(), wf), in)
		return err
	}
	if err := ask("fleet/prod"); !wrongWorkflowErr(err) || !strings.Contains(err.Error(), "names no fleet") {
		t.Fatalf("a fleet the file does not name: %v", err)
	}
	sn.setFleet(t, "prod")
	if err := ask("fleet/prod"); err != nil {
		t.Fatalf("the fleet the file names: %v", err)
	}
	for _, wf := range []string{"fleet/other", productWorkflow, "evil/n1"} {
		if err := ask(wf); !wrongWorkflowErr(err) {
			t.Errorf("%s before the node is adopted: %v, want %s", wf, err, ErrWrongWorkflow)
		}
	}
	sn.adoptedBy(t, productWorkflow)
	for _, wf := range []string{productWorkflow, "fleet/prod"} {
		if err := ask(wf); err != nil {
			t.Errorf("%s: %v", wf, err)
		}
	}
	if err := ask("evil/n1"); !wrongWorkflowErr(err) {
		t.Errorf("another workflow: %v", err)
	}
}

// setFleet writes authority.fleet into the node's file.
func (sn *signedNode) setFleet(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(sn.cfg)
	must(t, err)
	body := strings.Replace(string(b), "authority: {operators:", "authority: {fleet: "+name+", operators:", 1)
	must(t, os.WriteFile(sn.cfg, []byte(body), 0o600))
}

// TestTheNodesOwnToolsAreServed: the agent's own commands on the node
// (adopt-worker probe, brief), which call the activities outside Temporal
// as root there, are served whichever workflow the node serves.
func TestTheNodesOwnToolsAreServed(t *testing.T) {
	sn := newSignedNode(t)
	sn.adoptedBy(t, productWorkflow)
	if _, err := sn.a.Probe(context.Background(), ProbeInput{Plan: clone(t, sn.plan).Ref()}); err != nil {
		t.Fatalf("adopt-worker probe on the node: %v", err)
	}
	if _, err := sn.a.Plan(context.Background(), PlanInput{Node: "n1"}); err != nil {
		t.Fatalf("the plan, asked on the node: %v", err)
	}
}

// TestAdoptRecordsTheVerifiedWorkflow: the adopted marker names the
// workflow the node verified the start from (the caller its intent was
// claimed for), never the workflow ID the request carries.
func TestAdoptRecordsTheVerifiedWorkflow(t *testing.T) {
	sn := newSignedNode(t)
	must(t, sn.a.State.ClearAdopted()) // a node not adopted yet
	ctx := WithWorkflow(context.Background(), productWorkflow)
	s := sn.sign(t, sn.op, "n1", sn.plan.Hash(), authority.ActStart, nil, time.Now(), time.Hour)
	if _, err := sn.a.Adopt(ctx, AdoptInput{Plan: clone(t, sn.plan).Ref(), Intent: s, WorkflowID: "evil/n1"}); err != nil {
		t.Fatal(err)
	}
	m, ok, err := sn.a.State.Adopted()
	if err != nil || !ok || m.Workflow != productWorkflow {
		t.Fatalf("adopted marker %+v (%v, %v): want workflow %s, the verified caller, not the request's evil/n1", m, ok, err, productWorkflow)
	}
}

// TestAnUnknownOwnerServesNoWorkflow: an adopted node whose owner record
// is gone serves no workflow, not the one its adopted marker names (on
// older agents the request's word) in any namespace, nor a fresh start
// under a valid intent: every activity is refused, the plan too, and
// nothing changes. Root on the node names the owner again (adopt-worker
// own records it), and that workflow alone is served.
func TestAnUnknownOwnerServesNoWorkflow(t *testing.T) {
	sn := newSignedNode(t)
	must(t, sn.a.State.ClearOwner())
	if m, ok, err := sn.a.State.Adopted(); err != nil || !ok || m.Workflow != productWorkflow {
		t.Fatalf("the marker: %+v %v %v", m, ok, err)
	}
	sn.setFleet(t, "prod")
	p := sn.plan
	before := sn.stateHash(t)
	marker := caller.With(context.Background(), caller.Caller{Namespace: "default", Workflow: productWorkflow})
	otherNS := caller.With(context.Background(), caller.Caller{Namespace: "elsewhere", Workflow: productWorkflow})
	plan := call{"Plan", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
		_, err := a.Plan(ctx, PlanInput{Node: p.Node})
		return err
	}}
	probe := call{"Probe", "", nil, func(ctx context.Context, a *Activities, p config.Plan, _ *intent.Signed) error {
		_, err := a.Probe(ctx, ProbeInput{Plan: p.Ref()})
		return err
	}}
	for _, c := range append(stateChanging(), probe, plan) {
		var s *intent.Signed
		if c.action != "" {
			s = sn.sign(t, sn.op, "n1", p.Hash(), c.action, c.args, time.Now(), time.Hour)
		}
		for _, ctx := range []context.Context{marker, otherNS} {
			err := c.run(ctx, sn.a, clone(t, p), s)
			var ae *temporal.ApplicationError
			if c.name == "Plan" {
				if !wrongWorkflowErr(err) || !strings.Contains(err.Error(), "owner record") {
					t.Errorf("Plan by %s: %v, want %s naming the missing owner record", callerName(ctx), err, ErrWrongWorkflow)
				}
				continue
			}
			if !errors.As(err, &ae) || ae.Type() != ErrOwnerUnknown || !ae.NonRetryable() {
				t.Errorf("%s by %s: %v, want a non-retryable %s", c.name, callerName(ctx), err, ErrOwnerUnknown)
			} else if msg := err.Error(); !strings.Contains(msg, "adopt-worker own") || !strings.Contains(msg, "nothing was changed") {
				t.Errorf("%s: the refusal does not say what to do: %s", c.name, msg)
			}
		}
		if len(sn.rec.changes) != 0 {
			t.Fatalf("%s to a node of unknown owner changed it: %v", c.name, sn.rec.changes)
		}
		if after := sn.stateHash(t); after != before {
			t.Fatalf("%s to a node of unknown owner changed files under node.root or node.state_dir", c.name)
		}
	}
	// Root on the node names the owner: that workflow alone is served.
	if _, err := sn.a.State.SetOwner(nodestate.Owner{Namespace: "default", Workflow: productWorkflow, At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := probe.run(marker, sn.a, clone(t, p), nil); err != nil {
		t.Fatalf("the owner named again: %v", err)
	}
	if err := probe.run(otherNS, sn.a, clone(t, p), nil); !wrongWorkflowErr(err) {
		t.Fatalf("the same ID in another namespace: %v", err)
	}
}

// TestPlanAnswersOnlyASignedFleetRun: a workflow started under the
// fleet's ID (anyone can, while the fleet does not run) is refused the
// plan without an operator's intent to start the node in the fleet: with
// none, one by a key the node does not list, another node's, another
// plan's, an expired one, one for another action. Each is refused with
// its reason and nothing changes; the fleet's own, verified, is answered
// and its nonce left for the node's workflow to claim.
func TestPlanAnswersOnlyASignedFleetRun(t *testing.T) {
	sn := newSignedNode(t)
	sn.notAdopted(t)
	sn.setFleet(t, "prod")
	ctx := WithWorkflow(context.Background(), "fleet/prod")
	now, hash := time.Now(), sn.plan.Hash()
	before := sn.stateHash(t)
	for _, tc := range []struct {
		what, reason string
		signed       *intent.Signed
	}{
		{"no intent", intent.NoIntent, nil},
		{"an unknown key", intent.UnknownKey, sn.sign(t, sn.stranger, "n1", hash, authority.ActFleet, nil, now, time.Hour)},
		{"another node's", intent.WrongNode, sn.sign(t, sn.op, "n2", hash, authority.ActFleet, nil, now, time.Hour)},
		{"another plan's", intent.WrongPlan, sn.sign(t, sn.op, "n1", strings.Repeat("0", 64), authority.ActFleet, nil, now, time.Hour)},
		{"expired", intent.Expired, sn.sign(t, sn.op, "n1", hash, authority.ActFleet, nil, now.Add(-2*time.Hour), time.Hour)},
		{"a flip's", intent.WrongAction, sn.sign(t, sn.op, "n1", hash, authority.ActFleetFlip, nil, now, time.Hour)},
	} {
		p, err := sn.a.Plan(ctx, PlanInput{Node: "n1", Intent: tc.signed})
		if got := refusedFor(err); got != tc.reason || p != nil {
			t.Errorf("%s: plan %v, refused for %q (%v), want %q", tc.what, p != nil, got, err, tc.reason)
		}
		if after := sn.stateHash(t); after != before {
			t.Fatalf("%s changed files under node.root or node.state_dir", tc.what)
		}
	}
	for _, act := range []string{authority.ActFleet, authority.ActFleetNext, authority.ActFleetResume, authority.ActFleetRetry} {
		s := sn.sign(t, sn.op, "n1", hash, act, nil, now, time.Hour)
		if p, err := sn.a.Plan(ctx, PlanInput{Node: "n1", Intent: s}); err != nil || p == nil || p.Node != "n1" {
			t.Fatalf("the fleet under a %s intent: %v, %v", act, p, err)
		}
		if sn.stateHash(t) != before {
			t.Fatalf("reading the plan under a %s intent claimed its nonce or changed the node", act)
		}
	}
}
