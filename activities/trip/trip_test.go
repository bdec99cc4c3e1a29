package trip

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/crypto/ssh"

	"adoption/activities/authority"
	"adoption/activities/nodewire"
	"adoption/config"
	"adoption/witness"
)

// Unit tests of the two proofs on Fake, the stand-in of the agent's
// Temporal client beside Client (fake.go).

func signer(seed byte) ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		panic(err)
	}
	return s
}

var (
	theWitness = signer(0x77)
	another    = signer(0x78)
	want       = witness.Want{Node: "n1", ID: "n1-1", Plan: "plan-hash", Since: time.Now().Add(-time.Minute)}
)

// signed is v on want's flip, signed by s for want's node and plan.
func signed(t *testing.T, s ssh.Signer, v nodewire.WitnessVerdict) nodewire.WitnessVerdict {
	t.Helper()
	v.ID = want.ID
	v, err := v.Sign(s, want.Node, want.Plan, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// describing is a stand-in's describes: each of rs in turn.
func describing(rs ...*workflowservice.DescribeWorkflowExecutionResponse) witness.FakeDescriber {
	return witness.FakeDescriber{Answers: rs}
}

// awaited is what AwaitWitness returned, run in an activity's context as
// FlipTrip runs it, and the progress it left.
type awaited struct {
	V      nodewire.WitnessVerdict
	Revert string
	P      Progress
}

func await(t *testing.T, pr Proofs, within time.Duration) awaited {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	keys := []ssh.PublicKey{theWitness.PublicKey()}
	env.RegisterActivityWithOptions(func(ctx context.Context) (awaited, error) {
		p := &Progress{ID: want.ID, Applied: true, Reads: pr.Converter != nil}
		v, why := pr.AwaitWitness(ctx, keys, want, time.Now().Add(within), p)
		return awaited{V: v, Revert: why, P: *p}, nil
	}, activity.RegisterOptions{Name: "await"})
	val, err := env.ExecuteActivity("await")
	if err != nil {
		t.Fatal(err)
	}
	var a awaited
	if err := val.Get(&a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestWitnessKeys(t *testing.T) {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(theWitness.PublicKey())))
	if keys, err := WitnessKeys(&config.Witness{Disabled: true}, false); err != nil || keys != nil {
		t.Fatalf("unwitnessed node: %v %v", keys, err)
	}
	var ae *temporal.ApplicationError
	_, err := WitnessKeys(&config.Witness{Key: config.KeyLines{line}}, false)
	if !errors.As(err, &ae) || ae.Type() != authority.ErrBadRequest || !ae.NonRetryable() {
		t.Fatalf("a request that says a witnessed node's flip is not: %v", err)
	}
	for _, w := range []*config.Witness{nil, {}, {Key: config.KeyLines{"ssh-ed25519 not-base64"}}} {
		_, err := WitnessKeys(w, true)
		if !errors.As(err, &ae) || ae.Type() != nodewire.ErrFlipRefused || !strings.Contains(ae.Message(), "flip.witness.key") {
			t.Fatalf("witness %+v, no key to authenticate with: %v", w, err)
		}
	}
	keys, err := WitnessKeys(&config.Witness{Key: config.KeyLines{line}}, true)
	if err != nil || len(keys) != 1 || !bytes.Equal(keys[0].Marshal(), theWitness.PublicKey().Marshal()) {
		t.Fatalf("the listed key: %v %v", keys, err)
	}
}

func TestProgressOf(t *testing.T) {
	if _, ok := ProgressOf(context.Background()); ok {
		t.Fatal("progress in a context that carries none")
	}
	p := &Progress{ID: "n1-1", Applied: true}
	if got, ok := ProgressOf(WithProgress(context.Background(), p)); !ok || got != p {
		t.Fatalf("progress %v %v, want the one carried", got, ok)
	}
}

// The way out is one heartbeat, through the client, that says applied;
// its failure is the way out's.
func TestWayOut(t *testing.T) {
	run := func(pr Proofs) error {
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(func(ctx context.Context) error { return pr.WayOut(ctx, Progress{ID: "n1-1", Applied: true}) },
			activity.RegisterOptions{Name: "wayout"})
		_, err := env.ExecuteActivity("wayout")
		return err
	}
	if err := run(Proofs{}); err == nil || !strings.Contains(err.Error(), "no Temporal client") {
		t.Fatalf("no client: %v", err)
	}
	c := &Fake{}
	if err := run(Proofs{Temporal: c}); err != nil {
		t.Fatal(err)
	}
	if beats, _, _ := c.Seen(); len(beats) != 1 || !beats[0].Applied || beats[0].ID != "n1-1" || !strings.Contains(beats[0].Step, "the way out") {
		t.Fatalf("heartbeats %+v, want one that says applied", beats)
	}
	c.BeatErr = errors.New("unavailable")
	if err := run(Proofs{Temporal: c}); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("the server did not acknowledge: %v", err)
	}
}

// By query: no verdict yet, then the witness's signed answer, taken.
func TestAwaitAnsweredByQuery(t *testing.T) {
	c := &Fake{Verdicts: []nodewire.WitnessVerdict{{}, signed(t, theWitness, nodewire.WitnessVerdict{State: nodewire.WitnessAnswered, Why: "22/tcp"})}}
	a := await(t, Proofs{Temporal: c}, 10*time.Second)
	if a.Revert != "" || a.V.State != nodewire.WitnessAnswered || a.V.Why != "22/tcp" {
		t.Fatalf("got %+v, want the answer", a)
	}
	if _, q, _ := c.Seen(); q != 2 {
		t.Fatalf("%d queries, want 2", q)
	}
}

// An answer not signed by the node's key, or on another flip, is not
// taken: the wait ends at its bound, reverting, and says why.
func TestAwaitNotTaken(t *testing.T) {
	for name, v := range map[string]nodewire.WitnessVerdict{
		"unsigned":        {ID: want.ID, State: nodewire.WitnessAnswered},
		"another key":     signed(t, another, nodewire.WitnessVerdict{State: nodewire.WitnessAnswered}),
		"another node's":  func() nodewire.WitnessVerdict { w := want; w.Node = "n2"; return signedFor(t, w) }(),
		"another attempt": func() nodewire.WitnessVerdict { w := want; w.ID = "n1-0"; return signedFor(t, w) }(),
	} {
		c := &Fake{Verdicts: []nodewire.WitnessVerdict{v}}
		start := time.Now()
		a := await(t, Proofs{Temporal: c}, 300*time.Millisecond)
		if a.Revert == "" || !strings.Contains(a.Revert, "gave no verdict") {
			t.Fatalf("%s: got %+v, want a revert for no verdict", name, a)
		}
		if name != "another attempt" && !strings.Contains(a.Revert, "an answer not taken") {
			t.Fatalf("%s: the revert %q does not say an answer was refused", name, a.Revert)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("%s: gave up after %v, before its bound", name, d)
		}
	}
}

// signedFor is a signed answer for w rather than want.
func signedFor(t *testing.T, w witness.Want) nodewire.WitnessVerdict {
	t.Helper()
	v, err := nodewire.WitnessVerdict{ID: w.ID, State: nodewire.WitnessAnswered}.Sign(theWitness, w.Node, w.Plan, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Locked out is taken as it comes, signed or not (reverting is safe), but
// only on this flip: the workflow's lock-out of an earlier attempt is not
// this one's.
func TestAwaitLockedOut(t *testing.T) {
	c := &Fake{Verdicts: []nodewire.WitnessVerdict{{ID: want.ID, State: nodewire.WitnessLockedOut, Why: "22/tcp timed out"}}}
	a := await(t, Proofs{Temporal: c}, 10*time.Second)
	if a.Revert != "locked out: 22/tcp timed out" {
		t.Fatalf("got %+v, want the lock-out", a)
	}
	c = &Fake{Verdicts: []nodewire.WitnessVerdict{{ID: "n1-0", State: nodewire.WitnessLockedOut},
		signed(t, theWitness, nodewire.WitnessVerdict{State: nodewire.WitnessAnswered})}}
	if a = await(t, Proofs{Temporal: c}, 10*time.Second); a.Revert != "" {
		t.Fatalf("an earlier attempt's lock-out ended this flip's wait: %+v", a)
	}
}

// By describe: the verdict read from the pending witness's heartbeat is
// taken without a query and acknowledged by a heartbeat saying it was
// read; a pending witness that has not answered is not asked by query;
// no witness pending falls back to the query.
func TestAwaitByDescribe(t *testing.T) {
	v := signed(t, theWitness, nodewire.WitnessVerdict{State: nodewire.WitnessAnswered})
	c := &Fake{FakeDescriber: describing(witness.Pending(witness.ActivityType, v)), Verdicts: []nodewire.WitnessVerdict{{ID: want.ID, State: nodewire.WitnessLockedOut}}}
	a := await(t, Proofs{Temporal: c, Converter: converter.GetDefaultDataConverter()}, 10*time.Second)
	beats, q, _ := c.Seen()
	if a.Revert != "" || q != 0 || !a.P.Read {
		t.Fatalf("got %+v after %d queries, want the heartbeat's answer, read", a, q)
	}
	if len(beats) != 1 || !beats[0].Read || !beats[0].Applied {
		t.Fatalf("heartbeats %+v, want one acknowledging the verdict, still applied", beats)
	}

	c = &Fake{FakeDescriber: describing(witness.Pending(witness.ActivityType, nil)), Verdicts: []nodewire.WitnessVerdict{{ID: want.ID, State: nodewire.WitnessLockedOut}}}
	a = await(t, Proofs{Temporal: c, Converter: converter.GetDefaultDataConverter()}, 300*time.Millisecond)
	if _, q, _ := c.Seen(); q != 0 || !strings.Contains(a.Revert, "gave no verdict") {
		t.Fatalf("a pending witness without a verdict: %+v after %d queries", a, q)
	}

	c = &Fake{FakeDescriber: describing(&workflowservice.DescribeWorkflowExecutionResponse{}), Verdicts: []nodewire.WitnessVerdict{v}}
	a = await(t, Proofs{Temporal: c, Converter: converter.GetDefaultDataConverter()}, 10*time.Second)
	if _, q, _ := c.Seen(); q == 0 || a.Revert != "" || a.P.Read {
		t.Fatalf("no witness pending: %+v after %d queries, want the query's answer", a, q)
	}
}

// While it waits the node heartbeats, still saying applied, so the
// activity's heartbeat timeout (10 s) does not end a wait longer than it.
func TestAwaitHeartbeatsWhileWaiting(t *testing.T) {
	c := &Fake{Verdicts: []nodewire.WitnessVerdict{{}}}
	a := await(t, Proofs{Temporal: c}, waitBeat+500*time.Millisecond)
	beats, _, _ := c.Seen()
	if !strings.Contains(a.Revert, "no answer yet") || len(beats) != 1 || !beats[0].Applied || beats[0].Step != "flip: waiting for the witness" {
		t.Fatalf("got %+v and heartbeats %+v, want one heartbeat while waiting", a, beats)
	}
}
