package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"golang.org/x/crypto/ssh"

	"adoption/activities/authority"
	"adoption/activities/caller"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/intent"
	"adoption/internal/opkey"
)

const productWorkflow = "node-migration/n1"

// signedNode is hostileSetup with the node's file trusting one operator
// key: the corpus signs with it, or with another.
type signedNode struct {
	a        *Activities
	rec      *recorder
	plan     config.Plan
	op       ssh.Signer // in authority.operators
	stranger ssh.Signer // not
	dirs     []string   // node.root and node.state_dir
	nonces   string
	cfg      string // the node's own file
	opLine   string // op's line in authority.operators
}

func newSignedNode(t *testing.T) *signedNode {
	t.Helper()
	a, rec, plan, cfgPath := hostileSetup(t)
	dir := t.TempDir()
	op, err := opkey.Generate(dir, "op", "alice@laptop")
	must(t, err)
	other, err := opkey.Generate(dir, "stranger", "mallory@elsewhere")
	must(t, err)
	b, err := os.ReadFile(cfgPath)
	must(t, err)
	body := strings.Replace(string(b), "authority: {unsigned: true}", "authority: {operators: [\""+op.Public+"\"]}", 1)
	must(t, os.WriteFile(cfgPath, []byte(body), 0o600))
	cfg, err := config.Load(cfgPath)
	must(t, err)
	sn := &signedNode{a: a, rec: rec, plan: plan, dirs: []string{cfg.Node.Root, cfg.Node.StateDir, stateDir(a)}, nonces: authority.IntentsDir(cfg.Node.StateDir), cfg: cfgPath, opLine: op.Public}
	sn.op, err = intent.SignerFromFile(op.Path)
	must(t, err)
	sn.stranger, err = intent.SignerFromFile(other.Path)
	must(t, err)
	return sn
}

// sign is an intent for action on node n1's plan (hash), issued at now.
func (sn *signedNode) sign(t *testing.T, by ssh.Signer, node, hash, action string, args map[string]string, now time.Time, ttl time.Duration) *intent.Signed {
	t.Helper()
	in, err := intent.New(action, []intent.Target{{Node: node, PlanHash: hash}}, args, now, ttl)
	must(t, err)
	s, err := intent.Sign(in, by)
	must(t, err)
	return &s
}

// stateHash is every file under node.root and node.state_dir: path, mode
// and content.
func (sn *signedNode) stateHash(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, d := range sn.dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			line := p + " " + fi.Mode().String()
			if fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				sum := sha256.Sum256(b)
				line += " " + hex.EncodeToString(sum[:])
			}
			lines = append(lines, line)
			return nil
		})
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// call is one state-changing activity with a signed intent, and the
// intent the CLI signs for it (action and arguments).
type call struct {
	name   string
	action string
	args   map[string]string
	run    func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error
}

func stateChanging() []call {
	mod := map[string]string{"module": "app"}
	flipArgs := map[string]string{"drop": ""}
	return []call{
		{"Adopt", authority.ActStart, nil, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.Adopt(ctx, AdoptInput{Plan: p.Ref(), WorkflowID: productWorkflow, Intent: s})
			return err
		}},
		{"CheckFoundationPorts", authority.ActStart, nil, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CheckFoundationPorts(ctx, ProbeInput{Plan: p.Ref(), Intent: s})
			return err
		}},
		{"OpenRules foundation", authority.ActStart, nil, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: flip.OwnerFoundation, Ports: []config.Port{{Num: 5001, Proto: "tcp"}}, Intent: s})
			return err
		}},
		{"OpenRules module", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: p.Modules[0].Ports, Intent: s})
			return err
		}},
		{"CloseRules", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CloseRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Intent: s})
			return err
		}},
		{"CutoverPreflight", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CutoverPreflight(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"CutoverCreate", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"ConvergeFiles", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"CutoverSwap", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CutoverSwap(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"CutoverWaitHealthy", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CutoverWaitHealthy(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"CutoverRollback", authority.ActMigrate, mod, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CutoverRollback(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
			return err
		}},
		{"Prune", authority.ActPrune, map[string]string{"modules": "app"}, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.Prune(ctx, PruneInput{Plan: p.Ref(), Modules: []string{"app"}, Intent: s})
			return err
		}},
		{"AcceptDrift", authority.ActDriftAccept, nil, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.AcceptDrift(ctx, DriftInput{Plan: p.Ref(), Intent: s})
			return err
		}},
		{"FlipTrip", authority.ActFlip, flipArgs, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout, Preview: true, Intent: s}, Witness: p.Witness.Witnessed()})
			return err
		}},
		{"CommitFlip", authority.ActFlip, flipArgs, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.CommitFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1", Intent: s})
			return err
		}},
		{"RevertFlip", authority.ActFlip, flipArgs, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.RevertFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1", Intent: s})
			return err
		}},
		{"Release", authority.ActRelease, nil, func(ctx context.Context, a *Activities, p config.Plan, s *intent.Signed) error {
			_, err := a.Release(ctx, ProbeInput{Plan: p.Ref(), Intent: s})
			return err
		}},
	}
}

// refusedFor is the refusal's reason, or "" (and the error) if err is
// not an intent refusal.
func refusedFor(err error) string {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrIntentRefused || !ae.NonRetryable() {
		return ""
	}
	var reason string
	if ae.Details(&reason) != nil {
		return "?"
	}
	return reason
}

// TestHostileIntentsAreRefused is the corpus of requests a workflow that
// is not the operator's can make with a copied plan: every state-changing
// activity, with no intent, one signed by an unknown key, another node's,
// another plan's, an expired one, one for another action, one whose
// arguments changed after signing, one another workflow presented first,
// one whose operation ended. Each is refused with its reason, and
// nothing under node.root and node.state_dir changes, nor the firewall or
// the containers. The node serves no workflow yet (before its adoption,
// or released), so its intents alone refuse another workflow.
func TestHostileIntentsAreRefused(t *testing.T) {
	for _, c := range stateChanging() {
		t.Run(c.name, func(t *testing.T) {
			sn := newSignedNode(t)
			sn.notAdopted(t)
			ctx := WithWorkflow(context.Background(), productWorkflow)
			now := time.Now()
			hash := sn.plan.Hash()
			otherArgs := map[string]string{"module": "other"}
			if c.action == authority.ActFlip {
				otherArgs = map[string]string{"drop": "25/tcp"}
			}
			if c.args == nil {
				otherArgs = map[string]string{"module": "app"}
			}
			otherAction := authority.ActRelease
			if c.action == authority.ActRelease {
				otherAction = authority.ActFlip
			}
			// A good intent, claimed by the product's workflow, then
			// presented by another; and one whose operation has ended.
			claimed := sn.sign(t, sn.op, "n1", hash, c.action, c.args, now, time.Hour)
			spent := sn.sign(t, sn.op, "n1", hash, c.action, c.args, now, time.Hour)
			for _, s := range []*intent.Signed{claimed, spent} {
				v, err := intent.Verify(s, mustOps(t, sn.op), intent.Want{Node: "n1", PlanHash: hash, Actions: []string{c.action}, Args: c.args}, now)
				must(t, err)
				must(t, intent.Nonces{Dir: sn.nonces}.Claim(s, v, productWorkflow, now))
				if s == spent {
					must(t, intent.Nonces{Dir: sn.nonces}.Spend(v, s, productWorkflow, now))
				}
			}
			cases := []struct {
				what, reason string
				ctx          context.Context
				signed       *intent.Signed
			}{
				{"no intent", intent.NoIntent, ctx, nil},
				{"an unknown key", intent.UnknownKey, ctx, sn.sign(t, sn.stranger, "n1", hash, c.action, c.args, now, time.Hour)},
				{"another node's", intent.WrongNode, ctx, sn.sign(t, sn.op, "n2", hash, c.action, c.args, now, time.Hour)},
				{"another plan's", intent.WrongPlan, ctx, sn.sign(t, sn.op, "n1", strings.Repeat("0", 64), c.action, c.args, now, time.Hour)},
				{"expired", intent.Expired, ctx, sn.sign(t, sn.op, "n1", hash, c.action, c.args, now.Add(-2*time.Hour), time.Hour)},
				{"another action", intent.WrongAction, ctx, sn.sign(t, sn.op, "n1", hash, otherAction, c.args, now, time.Hour)},
				{"arguments changed after signing", intent.WrongArgs, ctx, sn.sign(t, sn.op, "n1", hash, c.action, otherArgs, now, time.Hour)},
				{"presented by another workflow", intent.Replayed, WithWorkflow(context.Background(), "evil/n1"), claimed},
				{"after its operation ended", intent.Replayed, ctx, spent},
			}
			before := sn.stateHash(t)
			for _, tc := range cases {
				err := c.run(tc.ctx, sn.a, clone(t, sn.plan), tc.signed)
				if got := refusedFor(err); got != tc.reason {
					t.Errorf("%s: refused for %q (%v), want %q", tc.what, got, err, tc.reason)
				}
				if len(sn.rec.changes) != 0 {
					t.Fatalf("%s changed the node: %v", tc.what, sn.rec.changes)
				}
				if after := sn.stateHash(t); after != before {
					t.Fatalf("%s changed files under node.root or node.state_dir", tc.what)
				}
			}
		})
	}
}

// TestTheOperatorsIntentIsAccepted: each activity takes the intent the
// CLI signs for it (no refusal of the intent; the activity may still
// refuse for its own reasons), and claims its nonce for the workflow.
func TestTheOperatorsIntentIsAccepted(t *testing.T) {
	for _, c := range stateChanging() {
		t.Run(c.name, func(t *testing.T) {
			sn := newSignedNode(t)
			ctx := WithWorkflow(context.Background(), productWorkflow)
			s := sn.sign(t, sn.op, "n1", sn.plan.Hash(), c.action, c.args, time.Now(), time.Hour)
			err := c.run(ctx, sn.a, clone(t, sn.plan), s)
			if r := refusedFor(err); r != "" {
				t.Fatalf("the operator's intent refused (%s): %v", r, err)
			}
			if entries, _ := os.ReadDir(sn.nonces); len(entries) != 1 {
				t.Errorf("%d nonce record(s) under %s, want 1", len(entries), sn.nonces)
			}
		})
	}
}

// TestAnEndedOperationsIntentIsSpent: a release done spends its intent; a
// migrate intent for one module does not serve another; a flip's intent
// serves its confirm and commit, and a retry serves a commit.
func TestAnEndedOperationsIntentIsSpent(t *testing.T) {
	sn := newSignedNode(t)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := clone(t, sn.plan)
	rel := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActRelease, nil, time.Now(), time.Hour)
	if _, err := sn.a.Release(ctx, ProbeInput{Plan: p.Ref(), Intent: rel}); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.a.Release(ctx, ProbeInput{Plan: p.Ref(), Intent: rel}); refusedFor(err) != intent.Replayed {
		t.Fatalf("a release's intent used again: %v", err)
	}
	mig := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, map[string]string{"module": "app"}, time.Now(), time.Hour)
	if _, err := sn.a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("migrate app: %v", err)
	}
	if _, err := sn.a.CutoverSwap(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("the next step of the same cutover: %v", err)
	}
	retry := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActRetry, nil, time.Now(), time.Hour)
	if _, err := sn.a.CommitFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1", Intent: retry}); refusedFor(err) != "" {
		t.Fatalf("a retry of a commit: %v", err)
	}
	if _, err := sn.a.FlipTrip(ctx, FlipTripInput{FlipInput: FlipInput{Plan: p.Ref(), Spec: specOf(p), ID: "n1-1", ConfirmTimeout: p.ConfirmTimeout, Preview: true, Intent: retry}, Witness: p.Witness.Witnessed()}); refusedFor(err) != intent.WrongAction {
		t.Fatalf("a retry's intent used for a flip: %v", err)
	}
}

// TestDecisionsNeedTheirResolve: a decision carried to the node without
// the operator's signed resolve, or with one for another decision, is
// refused; with its own it is taken.
func TestDecisionsNeedTheirResolve(t *testing.T) {
	sn := newSignedNode(t)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := clone(t, sn.plan)
	mig := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, map[string]string{"module": "app"}, time.Now(), time.Hour)
	d := FileDecision{Path: "/srv/app/app.env", Key: "APP_PASSWORD", Take: "mesh"}
	before := sn.stateHash(t)
	if _, err := sn.a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig, Decisions: []FileDecision{d}}); refusedFor(err) != intent.NoIntent {
		t.Fatalf("a decision without its resolve: %v", err)
	}
	d.Intent = sn.sign(t, sn.op, "n1", p.Hash(), authority.ActResolve, authority.DecisionArgs(d.Path, d.Key, "node"), time.Now(), time.Hour)
	if _, err := sn.a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig, Decisions: []FileDecision{d}}); refusedFor(err) != intent.WrongArgs {
		t.Fatalf("a decision whose side changed after signing: %v", err)
	}
	if sn.stateHash(t) != before && len(sn.rec.changes) != 0 {
		t.Fatal("a refused decision changed the node")
	}
	d.Intent = sn.sign(t, sn.op, "n1", p.Hash(), authority.ActResolve, authority.DecisionArgs(d.Path, d.Key, d.Take), time.Now(), time.Hour)
	if _, err := sn.a.CutoverPreflight(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig, Decisions: []FileDecision{d}}); refusedFor(err) != "" {
		t.Fatalf("a decision with its own resolve: %v", err)
	}
}

// TestUnsignedNodeActsWithoutIntent: a node whose file says
// authority.unsigned (and lists no key) takes requests without one.
func TestUnsignedNodeActsWithoutIntent(t *testing.T) {
	a, rec, plan, _ := hostileSetup(t)
	if _, err := a.Release(context.Background(), ProbeInput{Plan: clone(t, plan).Ref()}); err != nil {
		t.Fatal(err)
	}
	if len(rec.changes) != 1 || rec.changes[0] != "release" {
		t.Fatalf("changes: %v", rec.changes)
	}
}

func mustOps(t *testing.T, s ssh.Signer) *intent.Operators {
	t.Helper()
	ops, err := intent.ParseOperators(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	must(t, err)
	return ops
}

// TestTheWayBackOutlivesTheIntent: an intent the node acted on in time
// still serves, after it expired, to undo what it began (a cutover's
// rollback and closing its rules, a flip's revert), for the same workflow
// only; going further under it is refused as expired.
func TestTheWayBackOutlivesTheIntent(t *testing.T) {
	sn := newSignedNode(t)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := clone(t, sn.plan)
	issued := time.Now().Add(-2 * time.Hour)
	mod := map[string]string{"module": "app"}
	mig := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, mod, issued, time.Hour)
	flipped := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActFlip, map[string]string{"drop": ""}, issued, time.Hour)
	for _, c := range []struct {
		s    *intent.Signed
		want intent.Want
	}{
		{mig, intent.Want{Node: "n1", PlanHash: p.Hash(), Actions: []string{authority.ActMigrate}, Args: mod}},
		{flipped, intent.Want{Node: "n1", PlanHash: p.Hash(), Actions: []string{authority.ActFlip}, Args: map[string]string{"drop": ""}}},
	} {
		v, err := intent.Verify(c.s, mustOps(t, sn.op), c.want, issued.Add(time.Minute))
		must(t, err)
		must(t, intent.Nonces{Dir: sn.nonces}.Claim(c.s, v, productWorkflow, issued.Add(time.Minute)))
	}
	if _, err := sn.a.CutoverSwap(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != intent.Expired {
		t.Fatalf("going on under an expired intent: %v", err)
	}
	// Another workflow: refused as not the node's, and on a node that
	// serves none (released) by the intent's claim.
	if _, err := sn.a.CutoverRollback(WithWorkflow(context.Background(), "evil/n1"), ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); !wrongWorkflowErr(err) {
		t.Fatalf("another workflow undoing under it: %v", err)
	}
	sn.notAdopted(t)
	if _, err := sn.a.CutoverRollback(WithWorkflow(context.Background(), "evil/n1"), ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != intent.Replayed {
		t.Fatalf("another workflow undoing under it on a node that serves none: %v", err)
	}
	adoptedAs(t, sn.a, caller.Caller{Namespace: "default", Workflow: productWorkflow})
	if _, err := sn.a.CutoverRollback(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("the rollback of what the intent began: %v", err)
	}
	if _, err := sn.a.CloseRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("closing the rules of what the intent began: %v", err)
	}
	if _, err := sn.a.RevertFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1", Intent: flipped}); refusedFor(err) != "" {
		t.Fatalf("the revert of what the intent began: %v", err)
	}
	// CloseRules ended the cutover's rollback: the intent is spent.
	if _, err := sn.a.CutoverRollback(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != intent.Replayed {
		t.Fatalf("after its rollback ended: %v", err)
	}
}

// TestTheWayBackOutlivesARestart: the agent restarts (its start prunes the
// records of expired intents) after the migrate and flip intents it acted
// on expired. Their records are kept, their operations not having ended,
// so the rollback, the closing of its rules and the revert still work
// under them; once the rollback ended (spent), the next restart prunes
// the migrate's record, and a start's expired record is pruned at once.
func TestTheWayBackOutlivesARestart(t *testing.T) {
	sn := newSignedNode(t)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := clone(t, sn.plan)
	issued := time.Now().Add(-3 * time.Hour)
	mod := map[string]string{"module": "app"}
	mig := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, mod, issued, time.Hour)
	flipped := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActFlip, map[string]string{"drop": ""}, issued, time.Hour)
	start := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActStart, nil, issued, time.Hour)
	for _, c := range []struct {
		s    *intent.Signed
		want intent.Want
	}{
		{mig, intent.Want{Node: "n1", PlanHash: p.Hash(), Actions: []string{authority.ActMigrate}, Args: mod}},
		{flipped, intent.Want{Node: "n1", PlanHash: p.Hash(), Actions: []string{authority.ActFlip}, Args: map[string]string{"drop": ""}}},
		{start, intent.Want{Node: "n1", PlanHash: p.Hash(), Actions: []string{authority.ActStart}}},
	} {
		v, err := intent.Verify(c.s, mustOps(t, sn.op), c.want, issued.Add(time.Minute))
		must(t, err)
		must(t, intent.Nonces{Dir: sn.nonces}.Claim(c.s, v, productWorkflow, issued.Add(time.Minute)))
	}
	restart := func() int {
		n, err := authority.PruneIntents(sn.dirs[1], time.Now())
		must(t, err)
		return n
	}
	if n := restart(); n != 1 {
		t.Fatalf("the restart pruned %d records, want 1 (the start's)", n)
	}
	if _, err := sn.a.CutoverRollback(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("the rollback after a restart past the intent's expiry: %v", err)
	}
	if _, err := sn.a.RevertFlip(ctx, ConfirmInput{Plan: p.Ref(), ID: "n1-1", Intent: flipped}); refusedFor(err) != "" {
		t.Fatalf("the revert after a restart past the intent's expiry: %v", err)
	}
	restart()
	if _, err := sn.a.CloseRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Intent: mig}); refusedFor(err) != "" {
		t.Fatalf("closing the rules after another restart: %v", err)
	}
	if n := restart(); n != 1 {
		t.Fatalf("after the rollback ended the restart pruned %d records, want 1 (the migrate's)", n)
	}
}

// TestActivitiesWithoutIntentChangeNothing extends the hostile corpus to
// every activity that takes no intent (reconcile, plan, probe, preview,
// check drift; the watch runs these checks, activities/watch), called by
// the node's own workflow, so past every check but the intent's, with
// what a forger would send: owners the node never opened for, a forged
// firewall fingerprint, forged custody records. Each is refused or answers
// changing nothing: no firewall, container or file change, the files under
// node.root and node.state_dir as they were, no nonce claimed.
func TestActivitiesWithoutIntentChangeNothing(t *testing.T) {
	sn := newSignedNode(t)
	sn.adoptedBy(t, productWorkflow)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := sn.plan
	forged := []custody.Record{{FileState: custody.FileState{Path: "/srv/app/app.env", Exists: true, SHA256: strings.Repeat("0", 64)}, Found: true}}
	calls := []struct {
		name string
		run  func() error
	}{
		{"Reconcile of a module never migrated", func() error {
			res, err := sn.a.reconcile(ctx, ReconcileInput{Plan: clone(t, p).Ref(), Owners: map[string][]config.Port{"app": p.Modules[0].Ports}})
			if err == nil && len(res.NotPlaced) != 1 {
				return fmt.Errorf("answered %+v, want app not placed", res)
			}
			return err
		}},
		{"Plan", func() error { _, err := sn.a.Plan(ctx, PlanInput{Node: "n1"}); return err }},
		{"Probe", func() error { _, err := sn.a.Probe(ctx, ProbeInput{Plan: clone(t, p).Ref()}); return err }},
		{"Preview", func() error {
			_, err := sn.a.Preview(ctx, PreviewInput{Plan: clone(t, p).Ref(), Spec: specOf(p)})
			return err
		}},
		{"CheckDrift with a forged fingerprint and records", func() error {
			_, err := sn.a.checkDrift(ctx, DriftInput{Plan: clone(t, p).Ref(), Firewall: strings.Repeat("f", 64), Custody: forged})
			return err
		}},
		{"CheckDrift with the fingerprint the node measures", func() error {
			rs, err := sn.a.Firewall.Ruleset()
			if err != nil {
				return err
			}
			_, err = sn.a.checkDrift(ctx, DriftInput{Plan: clone(t, p).Ref(), Firewall: flip.FoundFingerprint(rs)})
			return err
		}},
	}
	if _, has, err := sn.a.State.Baseline(); err != nil || has {
		t.Fatalf("the node should have no firewall baseline yet (an older node's): %v %v", has, err)
	}
	before := sn.stateHash(t)
	for _, c := range calls {
		if err := c.run(); err != nil && !strings.Contains(err.Error(), "nothing was changed") && !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: %v, want an answer changing nothing or a refusal saying so", c.name, err)
		}
		if len(sn.rec.changes) != 0 {
			t.Fatalf("%s changed the node: %v", c.name, sn.rec.changes)
		}
		if after := sn.stateHash(t); after != before {
			t.Fatalf("%s changed files under node.root or node.state_dir", c.name)
		}
	}
}
