package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

func plainSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDriftAnswersNoGuess: drift is measured against the node's own
// records, so a request's digest cannot ask "is the file's content X?":
// a right guess and a wrong one get the same answer, and a forged custody
// digest changes nothing in it.
func TestDriftAnswersNoGuess(t *testing.T) {
	ctx := context.Background()
	a, _, plan, cfgPath := hostileSetup(t)
	cfg, err := config.Load(cfgPath)
	must(t, err)
	ad, err := a.Adopt(ctx, AdoptInput{Plan: clone(t, plan).Ref(), WorkflowID: "node-migration/n1"})
	must(t, err)
	var appEnv custody.Record
	for _, r := range ad.Custody {
		if r.Path == "/srv/app/app.env" {
			appEnv = r
		}
	}
	if !appEnv.Found {
		t.Fatalf("no custody record of /srv/app/app.env: %+v", ad.Custody)
	}

	answer := func(r custody.Record) string {
		t.Helper()
		res, err := a.checkDrift(ctx, DriftInput{Plan: clone(t, plan).Ref(), Custody: []custody.Record{r}})
		must(t, err)
		b, err := json.Marshal(res)
		must(t, err)
		return string(b)
	}
	guess := func(content string) string {
		r := appEnv
		r.SHA256 = plainSHA(content)
		return answer(r)
	}
	right, wrong := guess("APP_PASSWORD=found\n"), guess("APP_PASSWORD=wrong\n")
	if right != wrong {
		t.Fatalf("the right and the wrong guess are told apart:\n%s\n%s", right, wrong)
	}
	if right != answer(appEnv) {
		t.Fatalf("a guess changes the answer:\n%s\n%s", right, answer(appEnv))
	}

	forged := appEnv
	forged.Digest = "hmac-sha256:" + strings.Repeat("0", 64)
	res, err := a.checkDrift(ctx, DriftInput{Plan: clone(t, plan).Ref(), Custody: []custody.Record{forged}})
	must(t, err)
	if len(res.Items) != 0 {
		t.Fatalf("a forged digest made drift: %+v", res.Items)
	}
	file := filepath.Join(cfg.Node.Root, "srv/app/app.env")
	must(t, os.WriteFile(file, []byte("APP_PASSWORD=edited\n"), 0o640))
	res, err = a.checkDrift(ctx, DriftInput{Plan: clone(t, plan).Ref(), Custody: []custody.Record{forged}})
	must(t, err)
	if len(res.Items) != 1 || res.Items[0].Recorded != appEnv.Digest {
		t.Fatalf("an edit is drift against the node's own record %s: %+v", appEnv.Digest, res.Items)
	}

	// A migrated module's file is compared with the mesh's content in the
	// node's own configuration, named by the plan's digest.
	mesh := appEnv
	mesh.SHA256 = plan.Modules[0].Files[0].SHA256
	res, err = a.checkDrift(ctx, DriftInput{Plan: clone(t, plan).Ref(), Custody: []custody.Record{mesh}})
	must(t, err)
	if len(res.Items) != 1 {
		t.Fatalf("not the mesh's content, no drift: %+v", res.Items)
	}
	must(t, os.WriteFile(file, []byte("mesh\n"), 0o640))
	res, err = a.checkDrift(ctx, DriftInput{Plan: clone(t, plan).Ref(), Custody: []custody.Record{mesh}})
	must(t, err)
	if len(res.Items) != 0 {
		t.Fatalf("the mesh's content is drift: %+v", res.Items)
	}
}

// TestDigestKindsMustAgree: a plan of plain digests sent to a node that
// keys them (or the reverse) is refused, naming the setting.
func TestDigestKindsMustAgree(t *testing.T) {
	a, _, plan, _ := hostileSetup(t)
	p := clone(t, plan)
	p.Digests = config.DigestHMAC
	_, err := a.Probe(context.Background(), ProbeInput{Plan: p.Ref()})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != authority.ErrPlanMismatch || !strings.Contains(ae.Message(), "hmac-sha256 digests") ||
		!strings.Contains(ae.Message(), config.CodecKeyFileKey) {
		t.Fatalf("a keyed plan to a plain node: %v", err)
	}
}

// TestCheckDriftRecordsNoBaseline: on a node adopted before it kept its
// own firewall baseline, a drift check whose request brings the very
// fingerprint the node measures records nothing: the baseline is recorded
// only under a drift-accept intent (AcceptDrift).
func TestCheckDriftRecordsNoBaseline(t *testing.T) {
	a, _, _ := flipActs(t)
	dir := a.State.(*nodestate.Dir)
	must(t, os.Remove(filepath.Join(dir.Path(), "baseline.json")))
	now := flip.FoundFingerprint(defaultDeny22())
	if _, err := a.checkDrift(context.Background(), DriftInput{Plan: flipPlanN1().Ref(), Firewall: now}); err != nil {
		t.Fatal(err)
	}
	if b, has, err := dir.Baseline(); err != nil || has {
		t.Fatalf("a drift check recorded baseline %+v (%v): only a drift-accept may", b, err)
	}
	if _, err := a.AcceptDrift(context.Background(), DriftInput{Plan: flipPlanN1().Ref(), Firewall: now}); err != nil {
		t.Fatal(err)
	}
	if b, has, err := dir.Baseline(); err != nil || !has || b.Firewall != now {
		t.Fatalf("after drift accept: baseline %+v %v %v", b, has, err)
	}
}
