package activities

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"adoption/activities/authority"
	"adoption/intent"
	"adoption/internal/opkey"
)

// TestAMigrateIntentIsSpentWhenItsCutoverIsConfirmed: the intent of a
// migrate serves each step of its cutover; once the node confirms the
// cutover (its last check passed), the operation has ended and the same
// intent is refused as replayed, for the workflow that presented it too.
func TestAMigrateIntentIsSpentWhenItsCutoverIsConfirmed(t *testing.T) {
	for _, action := range []string{authority.ActMigrate, authority.ActRetry} {
		t.Run(action, func(t *testing.T) {
			sn := newSignedNode(t)
			ctx := WithWorkflow(context.Background(), productWorkflow)
			p := clone(t, sn.plan)
			mig := sn.sign(t, sn.op, "n1", p.Hash(), action, map[string]string{"module": "app"}, time.Now(), time.Hour)
			if _, err := sn.a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Predecessor: sn.rec.pred, Intent: mig}); err != nil {
				t.Fatalf("create: %v", err)
			}
			if _, err := sn.a.CutoverWaitHealthy(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig}); err != nil {
				t.Fatalf("wait healthy (it confirms the cutover): %v", err)
			}
			before := sn.stateHash(t)
			changes := len(sn.rec.changes)
			for _, step := range []func() error{
				func() error {
					_, err := sn.a.CutoverCreate(ctx, CutoverInput{Plan: p.Ref(), Module: "app", Predecessor: sn.rec.pred, Intent: mig})
					return err
				},
				func() error {
					_, err := sn.a.ConvergeFiles(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: mig})
					return err
				},
				func() error {
					_, err := sn.a.OpenRules(ctx, RulesInput{Plan: p.Ref(), Owner: "app", Ports: p.Modules[0].Ports, Intent: mig})
					return err
				},
			} {
				if err := step(); refusedFor(err) != intent.Replayed {
					t.Fatalf("the confirmed cutover's intent presented again: %v, want refused as replayed", err)
				}
			}
			if sn.stateHash(t) != before || len(sn.rec.changes) != changes {
				t.Fatal("a spent intent changed the node")
			}
		})
	}
}

// TestOperatorKeysRotate: authority.operators is read at every request, so
// a key added to the node's file signs from the next request on, and an
// intent signed by a key removed from it is refused (unknown-key), even
// one the node accepted before, with nothing changed.
func TestOperatorKeysRotate(t *testing.T) {
	sn := newSignedNode(t)
	ctx := WithWorkflow(context.Background(), productWorkflow)
	p := clone(t, sn.plan)
	next, err := opkey.Generate(t.TempDir(), "next", "alice@new-laptop")
	must(t, err)
	nextSigner, err := intent.SignerFromFile(next.Path)
	must(t, err)
	b, err := os.ReadFile(sn.cfg)
	must(t, err)
	oldLine := sn.opLine
	if !strings.Contains(string(b), oldLine) {
		t.Fatalf("the node's file does not list the operator's key:\n%s", b)
	}
	byOld := sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, map[string]string{"module": "app"}, time.Now(), time.Hour)
	byNext := sn.sign(t, nextSigner, "n1", p.Hash(), authority.ActMigrate, map[string]string{"module": "app"}, time.Now(), time.Hour)
	preflight := func(s *intent.Signed) error {
		_, err := sn.a.CutoverPreflight(ctx, ModuleInput{Plan: p.Ref(), Module: "app", Intent: s})
		return err
	}
	if err := preflight(byNext); refusedFor(err) != intent.UnknownKey {
		t.Fatalf("a key not yet listed: %v", err)
	}
	if err := preflight(byOld); refusedFor(err) != "" {
		t.Fatalf("the listed key: %v", err)
	}
	// Both listed: both sign.
	both := strings.Replace(string(b), `"`+oldLine+`"`, `"`+oldLine+`", "`+next.Public+`"`, 1)
	must(t, os.WriteFile(sn.cfg, []byte(both), 0o600))
	if err := preflight(byNext); refusedFor(err) != "" {
		t.Fatalf("an added key: %v", err)
	}
	// The old key removed: its intents are refused, the one the node
	// accepted before included, and nothing changes.
	only := strings.Replace(string(b), `"`+oldLine+`"`, `"`+next.Public+`"`, 1)
	must(t, os.WriteFile(sn.cfg, []byte(only), 0o600))
	before := sn.stateHash(t)
	for _, s := range []*intent.Signed{byOld, sn.sign(t, sn.op, "n1", p.Hash(), authority.ActMigrate, map[string]string{"module": "app"}, time.Now(), time.Hour)} {
		if err := preflight(s); refusedFor(err) != intent.UnknownKey {
			t.Fatalf("an intent signed by a removed key: %v, want refused as unknown-key", err)
		}
	}
	if sn.stateHash(t) != before || len(sn.rec.changes) != 0 {
		t.Fatal("an intent by a removed key changed the node")
	}
	if err := preflight(byNext); refusedFor(err) != "" {
		t.Fatalf("the remaining key: %v", err)
	}
}
