package activities

// Hostile requests against the node's own gates (gates.go): a workflow
// that is not the product's, with a copied plan and forged fields, asks
// for what the node's own records do not allow. Each is refused, by type,
// naming why, and nothing on the node changes. Each of these tests fails
// on the agent before the gates.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/nodestate"
)

// gatePlan is a node with one files-only module (its cutover is
// converge files, which confirms it) and the management port.
func gatePlan(t *testing.T, a *Activities, root string) config.Plan {
	t.Helper()
	plan := fileModule(t, a, "/srv/app/app.env", "APP_PASSWORD=mesh\n", nil, "")
	plan.ManagementPorts = []config.Port{{Num: 22, Proto: "tcp"}}
	plan.ConfirmTimeout = time.Minute
	plan.Witness = &config.Witness{Disabled: true} // no verdict to ask
	auth, _ := a.Local()
	a.Local = authority.Fixed(plan, auth.Contents, 30*time.Minute)
	put(t, root, "/srv/app/app.env", "APP_PASSWORD=found\n")
	return plan
}

// gateActs is an adopted node (through Adopt: custody taken, baseline
// recorded) whose found firewall keeps 22/tcp only, so that a flip of the
// management ports is one its preview approves.
func gateActs(t *testing.T) (*Activities, *fake.Flipper, config.Plan, string) {
	t.Helper()
	a, root := newActs(t)
	plan := gatePlan(t, a, root)
	debianBoot(t, root, true)
	// The flip takes defaultDeny22's table out of force whole.
	fl := &fake.Flipper{Dormant: []flip.ChainRef{{Family: "inet", Table: "filter"}}}
	a.Flipper, a.Firewall, a.Marks = fl, fake.Firewall{Rules: defaultDeny22()}, &listMarks{}
	watchdogs := 0
	a.StartWatchdog = func() error { watchdogs++; return nil }
	_, err := a.Adopt(context.Background(), AdoptInput{Plan: plan.Ref(), WorkflowID: testEnvCaller.Workflow})
	must(t, err)
	// The flip runs in the SDK's test activity environment: its workflow
	// is the one the node serves.
	_, err = a.State.SetOwner(nodestate.Owner{Namespace: testEnvCaller.Namespace, Workflow: testEnvCaller.Workflow, At: time.Now().UTC()})
	must(t, err)
	return a, fl, plan, root
}

// nodeState is every file under state_dir and root, by path and content:
// a refusal must leave it as it was.
func nodeState(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		must(t, filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || strings.HasSuffix(p, ".lock") {
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = string(b)
			return err
		}))
	}
	return out
}

func sameState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, b := range before {
		if after[p] != b {
			t.Errorf("a refused request changed %s", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("a refused request wrote %s", p)
		}
	}
}

func stateDir(a *Activities) string { return a.State.(*nodestate.Dir).Path() }

// A hostile flip: take both fingerprints from the node's own refused
// preview and send FlipTrip without asking for a preview. With the module
// not migrated the node refuses, whatever the request's fingerprints; with
// drift pending (a declared file edited, the found firewall changed since
// adoption) too. Nothing is recorded, no watchdog starts, no transaction
// runs, and nothing is confirmed. Once the module is migrated and the
// drift gone, the same flip goes through to the commit.
func TestFlipNeedsModulesMigratedNoDriftAndItsOwnPreview(t *testing.T) {
	ctx := context.Background()
	a, fl, plan, root := gateActs(t)
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}}}
	pv, err := a.Preview(ctx, PreviewInput{Plan: plan.Ref(), Spec: spec})
	must(t, err)
	hostile := FlipInput{Plan: plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute,
		ExpectFound: pv.FoundFingerprint, ExpectDerived: pv.DerivedFingerprint}
	flipRefused := func(want string) {
		t.Helper()
		before := nodeState(t, root, stateDir(a))
		res, err := oneTrip(t, a, hostile)
		if why := refusedTrip(t, res, err); !strings.Contains(why, want) {
			t.Fatalf("refusal lacks %q: %s", want, why)
		}
		sameState(t, before, nodeState(t, root, stateDir(a)))
		if len(fl.Flips) != 0 {
			t.Fatalf("a refused flip ran %d transaction(s)", len(fl.Flips))
		}
	}
	flipRefused("module app has no cutover recorded on node n1")

	_, err = a.ConvergeFiles(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	put(t, root, "/srv/app/app.env", "APP_PASSWORD=edited-by-hand\n")
	flipRefused("/srv/app/app.env changed since module app's cutover wrote it")

	put(t, root, "/srv/app/app.env", "APP_PASSWORD=mesh\n")
	opened := defaultDeny22()
	opened.Tables[0].Chains[0].Rules = append(opened.Tables[0].Chains[0].Rules, opened.Tables[0].Chains[0].Rules[0])
	a.Firewall = fake.Firewall{Rules: opened}
	flipRefused("the found firewall's own rules changed since adoption")

	a.Firewall = fake.Firewall{Rules: defaultDeny22()}
	res, err := oneTrip(t, a, hostile)
	if err != nil || res.State != nodestate.FlipCommitted || len(fl.Flips) != 1 {
		t.Fatalf("the flip the node's gates allow: %+v %v", res, err)
	}
}

// A flip that asks for no preview (the fingerprints-only path) is
// previewed by the node all the same: a spec whose preview refuses is
// refused even with the right fingerprints of a found firewall that opens
// more than the spec keeps.
func TestFlipWithoutPreviewIsPreviewedAnyway(t *testing.T) {
	ctx := context.Background()
	a, fl, plan, root := gateActs(t)
	_, err := a.ConvergeFiles(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	a.Firewall = fake.Firewall{} // opens every port
	must(t, a.State.(*nodestate.Dir).SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(&firewall.Ruleset{})}))
	spec := flip.MeshSpec{Node: "n1", Input: []flip.Allow{{Port: config.Port{Num: 22, Proto: "tcp"}, Owner: "management"}}}
	pv, err := a.Preview(ctx, PreviewInput{Plan: plan.Ref(), Spec: spec})
	must(t, err)
	if pv.Approved {
		t.Fatal("setup: the preview approves")
	}
	before := nodeState(t, root, stateDir(a))
	res, err := oneTrip(t, a, FlipInput{Plan: plan.Ref(), Spec: spec, ID: "n1-1", ConfirmTimeout: time.Minute, ExpectFound: pv.FoundFingerprint, ExpectDerived: pv.DerivedFingerprint})
	if why := refusedTrip(t, res, err); !strings.Contains(why, "would close") {
		t.Fatalf("refusal: %s", why)
	}
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if len(fl.Flips) != 0 {
		t.Fatal("a transaction ran")
	}
}

// A cutover the node confirmed is not rolled back, its marks are not
// closed: the request is refused by type, and the files stay as converged.
// Before the confirmation, both go through (a rollback's cleanup).
func TestRollbackAndCloseOnlyOfAnUnconfirmedCutover(t *testing.T) {
	ctx := context.Background()
	a, _, plan, root := gateActs(t)
	lm := a.Marks.(*listMarks)
	lm.placed = []marks.MarkedRule{{Mark: marks.Mark{Node: "n1", Owner: "app", Port: 8080, Proto: "tcp"}}}
	_, err := a.ConvergeFiles(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"}) // files-only: confirmed
	must(t, err)
	before := nodeState(t, root, stateDir(a))
	_, err = a.CutoverRollback(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	if msg := appErr(t, err, ErrCutoverConfirmed); !strings.Contains(msg, "module app's cutover was confirmed on node n1") {
		t.Fatalf("refusal: %s", msg)
	}
	_, err = a.CloseRules(ctx, RulesInput{Plan: plan.Ref(), Owner: "app"})
	appErr(t, err, ErrCutoverConfirmed)
	_, err = a.CloseRules(ctx, RulesInput{Plan: plan.Ref(), Owner: flip.OwnerFoundation})
	appErr(t, err, ErrNodeState)
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if got := read(t, root, "/srv/app/app.env"); got != "APP_PASSWORD=mesh\n" || len(lm.closed) != 0 {
		t.Fatalf("file %q, closed %v", got, lm.closed)
	}

	// Not confirmed (a second node, converge not run): both are served.
	b, _, plan2, root2 := gateActs(t)
	bm := b.Marks.(*listMarks)
	bm.placed = lm.placed
	_, err = b.CutoverRollback(ctx, ModuleInput{Plan: plan2.Ref(), Module: "app"})
	must(t, err)
	_, err = b.CloseRules(ctx, RulesInput{Plan: plan2.Ref(), Owner: "app"})
	must(t, err)
	if got := read(t, root2, "/srv/app/app.env"); got != "APP_PASSWORD=found\n" || len(bm.closed) != 1 {
		t.Fatalf("file %q, closed %v", got, bm.closed)
	}
}

// Prune removes only predecessors of modules the node counts as migrated.
func TestPruneOnlyOfMigratedModules(t *testing.T) {
	ctx := context.Background()
	a, _, plan, root := hostileSetup(t)
	rec := a.Cutover.(*recorder)
	_, err := a.CutoverCreate(ctx, CutoverInput{Plan: plan.Ref(), Module: "app", Predecessor: rec.pred})
	must(t, err)
	rec.changes = nil
	before := nodeState(t, root, stateDir(a))
	_, err = a.Prune(ctx, PruneInput{Plan: plan.Ref(), Modules: []string{"app"}})
	if msg := appErr(t, err, ErrNotMigrated); !strings.Contains(msg, "module app's cutover is not confirmed on node n1") {
		t.Fatalf("refusal: %s", msg)
	}
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if len(rec.changes) != 0 {
		t.Fatalf("a refused prune changed %v", rec.changes)
	}
	must(t, a.State.(*nodestate.Dir).UpdateCutover("app", func(*nodestate.CutoverRecord) (*nodestate.CutoverRecord, error) {
		return &nodestate.CutoverRecord{State: nodestate.CutoverConfirmed}, nil
	}))
	_, err = a.Prune(ctx, PruneInput{Plan: plan.Ref(), Modules: []string{"app"}})
	must(t, err)
	if strings.Join(rec.changes, ",") != "prune" {
		t.Fatalf("changes: %v", rec.changes)
	}
}

// Release is refused under a flip that may be in force and on a converged
// node; on a node not adopted it removes nothing.
func TestReleaseChecksTheNodesOwnState(t *testing.T) {
	ctx := context.Background()
	a, _, plan, root := gateActs(t)
	lm := a.Marks.(*listMarks)
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipFlipped, Deadline: time.Now().Add(time.Minute)})
	before := nodeState(t, root, stateDir(a))
	_, err := a.Release(ctx, ProbeInput{Plan: plan.Ref()})
	if msg := appErr(t, err, ErrNodeState); !strings.Contains(msg, "flip n1-1 is flipped on node n1") {
		t.Fatalf("refusal: %s", msg)
	}
	sameState(t, before, nodeState(t, root, stateDir(a)))
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipCommitted})
	must(t, a.Flips.MarkConverged("n1", time.Now()))
	before = nodeState(t, root, stateDir(a))
	_, err = a.Release(ctx, ProbeInput{Plan: plan.Ref()})
	if msg := appErr(t, err, ErrNodeState); !strings.Contains(msg, "node n1 is converged") {
		t.Fatalf("refusal: %s", msg)
	}
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if lm.released != 0 {
		t.Fatal("a refused release removed marks")
	}
}

// A forged AcceptDrift record (the found file's digest for a file a
// cutover converged) no longer makes the node take the mesh's bytes into
// custody as "found": the node's own check finds no drift, custody keeps
// what was found, and a rollback would restore it. Real drift is accepted:
// the found firewall's baseline is renewed from the node's own listing.
func TestAcceptDriftAcceptsOnlyWhatTheNodeFinds(t *testing.T) {
	ctx := context.Background()
	a, _, plan, root := gateActs(t)
	found, ok, err := a.Files.Record("/srv/app/app.env")
	if err != nil || !ok {
		t.Fatalf("custody: %v %v", ok, err)
	}
	_, err = a.CutoverPreflight(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	_, err = a.ConvergeFiles(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	must(t, err)
	forged := found
	forged.FileState = forged.FileState.Public()
	res, err := a.AcceptDrift(ctx, DriftInput{Plan: plan.Ref(), Custody: []custody.Record{forged}, Firewall: "forged"})
	must(t, err)
	if len(res.Items) != 0 || len(res.Custody) != 0 {
		t.Fatalf("accepted %+v", res)
	}
	if after, _, _ := a.Files.Record("/srv/app/app.env"); after.SHA256 != found.SHA256 {
		t.Fatalf("the custody baseline of /srv/app/app.env was replaced: %s, was %s", after.SHA256, found.SHA256)
	}
	if base, _, _ := a.State.(*nodestate.Dir).Baseline(); base.Firewall != flip.FoundFingerprint(defaultDeny22()) || res.Firewall != base.Firewall {
		t.Fatalf("baseline %q, answered %q", base.Firewall, res.Firewall)
	}
	// Drift the node finds itself is what is accepted.
	opened := defaultDeny22()
	opened.Tables[0].Chains[0].Policy = "accept"
	a.Firewall = fake.Firewall{Rules: opened}
	res, err = a.AcceptDrift(ctx, DriftInput{Plan: plan.Ref()})
	must(t, err)
	if base, _, _ := a.State.(*nodestate.Dir).Baseline(); len(res.Items) != 1 || base.Firewall != flip.FoundFingerprint(opened) {
		t.Fatalf("accepted %+v, baseline %q", res, base.Firewall)
	}
	// A rollback (were the cutover not confirmed) restores what was found.
	_ = root
}

// listMarks lists the marks it was given and counts what would change.
type listMarks struct {
	placed   []marks.MarkedRule
	closed   []string
	released int
}

func (m *listMarks) Open(string, string, []config.Port) ([]marks.MarkedRule, []marks.MarkedRule, error) {
	return nil, nil, nil
}
func (m *listMarks) Close(_ string, owner string) ([]marks.MarkedRule, error) {
	m.closed = append(m.closed, owner)
	return nil, nil
}
func (m *listMarks) Release(string) ([]marks.MarkedRule, error) {
	m.released++
	return nil, nil
}
func (m *listMarks) List(string) ([]marks.MarkedRule, error) { return m.placed, nil }

// RevertFlip acts only on the node's current flip record while it is
// pending: a guessed ID of another flip, or the current one once
// confirmed, changes nothing (the firewall is not touched).
func TestRevertFlipOnlyOfTheCurrentPendingFlip(t *testing.T) {
	ctx := context.Background()
	a, fl, plan, root := gateActs(t)
	setRecord(t, a, nodestate.FlipRecord{ID: "n1-2", Node: "n1", State: nodestate.FlipConfirmed, Deadline: time.Now().Add(time.Minute)})
	before := nodeState(t, root, stateDir(a))
	res, err := a.RevertFlip(ctx, ConfirmInput{Plan: plan.Ref(), ID: "n1-1"})
	if err != nil || res.State != nodestate.FlipNotApplied {
		t.Fatalf("revert of another flip: %+v %v", res, err)
	}
	_, err = a.RevertFlip(ctx, ConfirmInput{Plan: plan.Ref(), ID: "n1-2"})
	appErr(t, err, ErrFlipConfirmed)
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if len(fl.Reverts) != 0 {
		t.Fatalf("the firewall was reverted %d time(s)", len(fl.Reverts))
	}
}

// A health check asked of a module whose cutover never started (its
// predecessor answers under the same name) confirms nothing: refused, no
// record, so the flip's gate and the rollback's still see it unmigrated.
func TestWaitHealthyConfirmsOnlyACutoverUnderWay(t *testing.T) {
	ctx := context.Background()
	a, _, plan, root := hostileSetup(t)
	before := nodeState(t, root, stateDir(a))
	_, err := a.CutoverWaitHealthy(ctx, ModuleInput{Plan: plan.Ref(), Module: "app"})
	if msg := appErr(t, err, ErrNotMigrated); !strings.Contains(msg, "no cutover of module app is under way on node n1") {
		t.Fatalf("refusal: %s", msg)
	}
	sameState(t, before, nodeState(t, root, stateDir(a)))
	if rec, _ := a.confirmedCutover("app"); rec != nil {
		t.Fatalf("confirmed: %+v", rec)
	}
}
