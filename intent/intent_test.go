package intent

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func operatorsOf(t *testing.T, signers ...ssh.Signer) *Operators {
	t.Helper()
	var b strings.Builder
	b.WriteString("# operators of n1\n\n")
	for i, s := range signers {
		b.WriteString(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))))
		b.WriteString(" op" + string(rune('a'+i)) + "@example\n")
	}
	ops, err := ParseOperators(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if ops.Len() != len(signers) {
		t.Fatalf("parsed %d operators, want %d", ops.Len(), len(signers))
	}
	return ops
}

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func flipIntent(t *testing.T, signer ssh.Signer) (Intent, Signed) {
	t.Helper()
	in, err := New("flip", []Target{{Node: "n1", PlanHash: "aaaa"}, {Node: "n2", PlanHash: "bbbb"}},
		map[string]string{"drop": List([]string{"8080/tcp", "25/tcp"})}, now, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Sign(in, signer)
	if err != nil {
		t.Fatal(err)
	}
	return in, s
}

func want() Want {
	return Want{Node: "n1", PlanHash: "aaaa", Actions: []string{"flip"}, Args: map[string]string{"drop": "25/tcp,8080/tcp"}}
}

func TestVerifyAcceptsTheOperatorsIntent(t *testing.T) {
	op := newSigner(t)
	_, s := flipIntent(t, op)
	v, err := Verify(&s, operatorsOf(t, newSigner(t), op), want(), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if v.Comment != "opb@example" || v.Action != "flip" {
		t.Fatalf("verified %+v (comment %q), want flip by opb@example", v.Intent, v.Comment)
	}
	w := want()
	w.Node, w.PlanHash = "n2", "bbbb"
	if _, err := Verify(&s, operatorsOf(t, op), w, now); err != nil {
		t.Fatalf("the second target: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	op, stranger := newSigner(t), newSigner(t)
	ops := operatorsOf(t, op)
	_, good := flipIntent(t, op)
	_, foreign := flipIntent(t, stranger)

	tampered := good
	var in Intent
	if err := json.Unmarshal(good.Payload, &in); err != nil {
		t.Fatal(err)
	}
	in.Args["drop"] = "25/tcp,22/tcp,8080/tcp"
	tampered.Payload, _ = json.Marshal(in)

	cases := []struct {
		name   string
		s      *Signed
		want   func(w *Want)
		at     time.Time
		reason string
	}{
		{"no intent", nil, nil, now, NoIntent},
		{"empty intent", &Signed{}, nil, now, NoIntent},
		{"garbage signature", &Signed{Payload: good.Payload, Signature: []byte("not a signature")}, nil, now, Malformed},
		{"unknown key", &foreign, nil, now, UnknownKey},
		{"changed after signing", &tampered, nil, now, BadSignature},
		{"another node", &good, func(w *Want) { w.Node = "n3" }, now, WrongNode},
		{"another plan", &good, func(w *Want) { w.PlanHash = "cccc" }, now, WrongPlan},
		{"another action", &good, func(w *Want) { w.Actions = []string{"release"} }, now, WrongAction},
		{"other arguments", &good, func(w *Want) { w.Args["drop"] = "25/tcp" }, now, WrongArgs},
		{"an argument the request lacks", &good, func(w *Want) { w.Args = map[string]string{} }, now, WrongArgs},
		{"expired", &good, nil, now.Add(16 * time.Minute), Expired},
		{"from the future", &good, nil, now.Add(-time.Hour), Expired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := want()
			if c.want != nil {
				c.want(&w)
			}
			_, err := Verify(c.s, ops, w, c.at)
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != c.reason {
				t.Fatalf("Verify: %v, want a refusal %q", err, c.reason)
			}
		})
	}
}

func TestNewRefusesLongLives(t *testing.T) {
	if _, err := New("flip", []Target{{Node: "n1"}}, nil, now, 25*time.Hour); err == nil {
		t.Fatal("an intent for 25 h was made")
	}
	if _, err := Sign(Intent{Action: "flip", Targets: []Target{{Node: "n1"}}, Issued: now, Expires: now.Add(48 * time.Hour), Nonce: "0123456789abcdef"}, newSigner(t)); err == nil {
		t.Fatal("an intent for 48 h was signed")
	}
}

func TestParseOperatorsRefusesOptions(t *testing.T) {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newSigner(t).PublicKey())))
	if _, err := ParseOperators(`from="10.0.0.1" ` + line); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("options accepted or unnamed: %v", err)
	}
	if _, err := ParseOperators("ssh-ed25519 notbase64"); err == nil {
		t.Fatal("a broken key line accepted")
	}
}

func TestNoncesServeOneWorkflowUntilSpent(t *testing.T) {
	op := newSigner(t)
	_, s := flipIntent(t, op)
	v, err := Verify(&s, operatorsOf(t, op), want(), now)
	if err != nil {
		t.Fatal(err)
	}
	n := Nonces{Dir: filepath.Join(t.TempDir(), "intents")}
	if err := n.Claim(&s, v, "adoption-n1", now); err != nil {
		t.Fatal(err)
	}
	if !n.Has(v.Nonce) || n.Has("0123456789abcdef") || n.Has("../x") {
		t.Fatal("Has: the claimed nonce must be known, another or a malformed one not")
	}
	if err := n.Claim(&s, v, "adoption-n1", now.Add(time.Second)); err != nil {
		t.Fatalf("the same workflow's next step: %v", err)
	}
	var r *Refusal
	if err := n.Claim(&s, v, "evil", now); !errors.As(err, &r) || r.Reason != Replayed {
		t.Fatalf("another workflow: %v, want replayed", err)
	}
	if err := n.Spend(v, &s, "adoption-n1", now); err != nil {
		t.Fatal(err)
	}
	if err := n.Claim(&s, v, "adoption-n1", now); !errors.As(err, &r) || r.Reason != Replayed {
		t.Fatalf("after spend: %v, want replayed", err)
	}
	fi, err := os.Stat(n.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("records dir %v %v, want 0700", fi.Mode(), err)
	}
	if k, err := n.Prune(now.Add(time.Hour), func(string) bool { return true }); err != nil || k != 1 {
		t.Fatalf("prune: %d %v, want 1 removed", k, err)
	}
	v.Nonce = "../../etc/passwd"
	if err := n.Claim(&s, v, "adoption-n1", now); !errors.As(err, &r) || r.Reason != Malformed {
		t.Fatalf("a path as nonce: %v, want malformed", err)
	}
}

// An intent signed by OpenSSH's own ssh-keygen -Y sign verifies, and one
// signed here verifies with ssh-keygen -Y verify: the format is sshsig.
func TestInteroperatesWithSSHKeygen(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatal("ssh-keygen (openssh-client) is needed for this test: apt-get install openssh-client")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "op")
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "op@example", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	signer, err := SignerFromFile(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(key + ".pub")
	ops, err := ParseOperators(string(pub))
	if err != nil {
		t.Fatal(err)
	}

	in, _ := flipIntent(t, signer)
	payload, _ := json.Marshal(in)
	msg := filepath.Join(dir, "intent.json")
	os.WriteFile(msg, payload, 0o600)
	if out, err := exec.Command(keygen, "-Y", "sign", "-n", Namespace, "-f", key, msg).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	armored, _ := os.ReadFile(msg + ".sig")
	if _, err := Verify(&Signed{Payload: payload, Signature: armored}, ops, want(), now); err != nil {
		t.Fatalf("ssh-keygen's signature: %v", err)
	}

	ours, err := Sign(in, signer)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(msg+".sig", ours.Signature, 0o600)
	allowed := filepath.Join(dir, "allowed")
	os.WriteFile(allowed, []byte("op@example "+string(pub)), 0o600)
	cmd := exec.Command(keygen, "-Y", "verify", "-f", allowed, "-I", "op@example", "-n", Namespace, "-s", msg+".sig")
	cmd.Stdin = strings.NewReader(string(payload))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify of our signature: %v: %s", err, out)
	}
	if _, _, err := SignerFromAgent("", ""); err == nil {
		t.Fatal("no agent socket accepted")
	}
}

// Each signs one intent per node: each verifies on its own node, and is
// refused by every other node of the same request (even one whose plan
// hash it happens to carry), each under its own nonce.
func TestEachIsOneIntentPerNode(t *testing.T) {
	op := newSigner(t)
	targets := []Target{{Node: "n1", PlanHash: "aaaa"}, {Node: "n2", PlanHash: "bbbb"}, {Node: "n3", PlanHash: "aaaa"}}
	ins, err := Each("fleet-migrate", targets, map[string]string{"module": "web"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != len(targets) {
		t.Fatalf("%d intents for %d targets", len(ins), len(targets))
	}
	nonces := map[string]bool{}
	for i, in := range ins {
		s, err := Sign(in, op)
		if err != nil {
			t.Fatal(err)
		}
		nonces[in.Nonce] = true
		for j, tg := range targets {
			w := Want{Node: tg.Node, PlanHash: tg.PlanHash, Actions: []string{"fleet-migrate"}, Args: map[string]string{"module": "web"}}
			_, err := Verify(&s, operatorsOf(t, op), w, now.Add(time.Minute))
			var r *Refusal
			switch {
			case i == j && err != nil:
				t.Errorf("node %s refuses its own intent: %v", tg.Node, err)
			case i != j && (!errors.As(err, &r) || r.Reason != WrongNode):
				t.Errorf("node %s given node %s's intent: %v, want refused %q", tg.Node, targets[i].Node, err, WrongNode)
			}
		}
		if len(in.Targets) != 1 || in.Targets[0] != targets[i] {
			t.Errorf("intent %d names %+v, want only %+v", i, in.Targets, targets[i])
		}
	}
	if len(nonces) != len(targets) {
		t.Errorf("%d distinct nonces for %d intents", len(nonces), len(targets))
	}
	if _, err := Each("fleet-migrate", targets, nil, now, 2*MaxLifetime); err == nil {
		t.Error("Each took a lifetime past MaxLifetime")
	}
}
