package authority

// Unit tests of the intents' forms: which signed actions each activity
// takes.

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"adoption/config"
	"adoption/intent"
)

// A fleet migrate's intent (the module as its argument) and a fleet flip's
// (no argument: the plan's hash binds the drops) are taken by the module's
// cutover and the flip as the node's own migrate and flip are; a fleet
// migrate of another module, or a fleet flip for another plan, is not.
func TestFleetIntentsForms(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := intent.ParseOperators(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " op@example\n")
	if err != nil {
		t.Fatal(err)
	}
	plan := config.Plan{Node: "n1", Role: "member", Drop: []config.Port{{Num: 8443, Proto: "tcp"}}}
	auth := &Authority{Plan: plan, Operators: ops}
	now := time.Now()
	sign := func(action string, p config.Plan, args map[string]string) *intent.Signed {
		in, err := intent.New(action, []intent.Target{{Node: "n1", PlanHash: p.Hash()}, {Node: "n2", PlanHash: "x"}}, args, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s, err := intent.Sign(in, signer)
		if err != nil {
			t.Fatal(err)
		}
		return &s
	}
	other := plan
	other.Drop = nil
	for _, c := range []struct {
		what  string
		s     *intent.Signed
		forms []Form
		ok    bool
	}{
		{"fleet migrate web, web's cutover", sign(ActFleetMigrate, plan, map[string]string{"module": "web"}), ModuleIntent("web"), true},
		{"fleet migrate web, mail's cutover", sign(ActFleetMigrate, plan, map[string]string{"module": "web"}), ModuleIntent("mail"), false},
		{"fleet flip, the flip", sign(ActFleetFlip, plan, nil), FlipIntent(plan, false), true},
		{"fleet flip for another plan", sign(ActFleetFlip, other, nil), FlipIntent(plan, false), false},
		{"fleet flip, a cutover", sign(ActFleetFlip, plan, nil), ModuleIntent("web"), false},
		{"the node's own flip still", sign(ActFlip, plan, FlipArgs(plan)), FlipIntent(plan, false), true},
	} {
		_, err := Verify("n1", auth, c.s, c.forms, now)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.what, err, c.ok)
		}
	}
}
