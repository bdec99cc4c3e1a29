package activities

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/crypto/ssh"

	"adoption/activities/trip"
	"adoption/codec"
	"adoption/config"
	"adoption/nodestate"
	"adoption/witness"
)

// Unit tests of the flip in one round trip: the two proofs, and an attempt
// run again with the same ID resuming from the node's record.

// witnessPending is a description of the workflow with the witness
// pending, its last heartbeat details (none if nil); an answered verdict
// not yet signed is signed as the witness does.
func witnessPending(details any) *workflowservice.DescribeWorkflowExecutionResponse {
	if v, ok := details.(WitnessVerdict); ok && v.State == WitnessAnswered && v.Sig == nil {
		details = signVerdict(v)
	}
	return witness.Pending(witness.ActivityType, details)
}

// witnessAnswers answers the verdict query as the workflow does: on the
// flip asked about, an answer signed by the witness.
func witnessAnswers(id string, v WitnessVerdict) WitnessVerdict {
	v = forgedAnswers(id, v)
	if v.State == WitnessAnswered {
		v = signVerdict(v)
	}
	return v
}

// forgedAnswers answers with the verdict as given, unsigned, on the flip
// asked about.
func forgedAnswers(id string, v WitnessVerdict) WitnessVerdict {
	if v.State != "" {
		v.ID = id
	}
	return v
}

// describing is the workflow's descriptions, each in turn.
func describing(rs ...*workflowservice.DescribeWorkflowExecutionResponse) witness.FakeDescriber {
	return witness.FakeDescriber{Answers: rs}
}

// witnessSigner is the orchestrator's witness key of these tests; the
// node's plan (tripPlanN1) lists witnessKeyLine.
var witnessSigner = func() ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x77}, 32)))
	if err != nil {
		panic(err)
	}
	return s
}()

var witnessKeyLine = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(witnessSigner.PublicKey()))) + " witness@orchestrator"

// signVerdict signs v as the witness does, for node n1's plan, now.
func signVerdict(v WitnessVerdict) WitnessVerdict {
	s, err := v.Sign(witnessSigner, "n1", tripPlanN1().Hash(), time.Now())
	if err != nil {
		panic(err)
	}
	return s
}

// attempt leaves flip id as an attempt of FlipTrip that died leaves it:
// applied (the record flipped), or confirmed too.
func attempt(t *testing.T, a *Activities, id string, confirmed bool) {
	t.Helper()
	if _, err := applyStage(context.Background(), a, tripIn(id, true).FlipInput); err != nil {
		t.Fatal(err)
	}
	if confirmed {
		if _, err := confirmStage(context.Background(), a, id); err != nil {
			t.Fatal(err)
		}
	}
}

// tripActs is flipActs with the boot files a commit writes, and c as the
// agent's client.
func tripActs(t *testing.T, c *trip.Fake) (*Activities, func() int) {
	t.Helper()
	a, fl, root := flipActsWith(t, tripPlanN1())
	debianBoot(t, root, true)
	for p, body := range map[string]string{"etc/nftables.conf": debianNftablesConf, "etc/ufw/ufw.conf": ufwConf} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), []byte(body), 0o644))
	}
	a.Temporal = c
	return a, func() int { return len(fl.Flips) }
}

// runTrip runs FlipTrip as the worker does, in an activity's context.
func runTrip(t *testing.T, a *Activities, in FlipTripInput) (*FlipResult, error) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.FlipTrip, in)
	if err != nil {
		return nil, err
	}
	var res FlipResult
	must(t, v.Get(&res))
	return &res, nil
}

func tripIn(id string, witness bool) FlipTripInput {
	in := flipIn(id)
	in.Plan = tripPlanN1().Ref()
	return FlipTripInput{FlipInput: in, Witness: witness}
}

// Approved, applied once, the way out acknowledged and the witness
// answered: confirmed and committed in the one activity. The first
// acknowledged heartbeat already says applied, and the verdict was asked
// only after it.
func TestFlipTripCommits(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{}, {State: WitnessAnswered, Why: "22/tcp on 192.0.2.1"}}}
	a, flips := tripActs(t, c)
	res, err := runTrip(t, a, tripIn("n1-1", true))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != nodestate.FlipCommitted || res.Preview == nil || !res.Preview.Approved || res.Deadline.IsZero() {
		t.Fatalf("result %+v", res)
	}
	if res.Witness == nil || res.Witness.State != WitnessAnswered || res.Witness.Why != "22/tcp on 192.0.2.1" {
		t.Fatalf("the result carries verdict %+v, want the answer it confirmed on", res.Witness)
	}
	if flips() != 1 || record(t, a).State != nodestate.FlipCommitted {
		t.Fatalf("flips %d, record %s", flips(), record(t, a).State)
	}
	beats, queries, _ := c.Seen()
	if len(beats) == 0 || !beats[0].Applied || beats[0].ID != "n1-1" {
		t.Fatalf("the way out's heartbeat: %+v", beats)
	}
	if queries != 2 {
		t.Fatalf("the verdict was asked %d times, want 2 (pending, then answered)", queries)
	}
}

// The witness says locked out: the flip is reverted on the node, never
// confirmed, and the error says why.
func TestFlipTripLockedOutReverts(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessLockedOut, Why: "22/tcp did not answer from 10.8.0.2"}}}
	a, flips := tripActs(t, c)
	_, err := runTrip(t, a, tripIn("n1-1", true))
	if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "the way in: locked out: 22/tcp did not answer") {
		t.Fatalf("error: %s", msg)
	}
	rec := record(t, a)
	if flips() != 1 || rec.State != nodestate.FlipReverted || !strings.Contains(rec.Reason, "locked out") {
		t.Fatalf("flips %d, record %s (%s)", flips(), rec.State, rec.Reason)
	}
}

// No acknowledged heartbeat after the apply: reverted, not confirmed, and
// the witness's verdict is never asked.
func TestFlipTripWayOutFailsReverts(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, BeatErr: errors.New("context deadline exceeded"), Verdicts: []WitnessVerdict{{State: WitnessAnswered}}}
	a, _ := tripActs(t, c)
	_, err := runTrip(t, a, tripIn("n1-1", true))
	if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "the way out") {
		t.Fatalf("error: %s", msg)
	}
	if _, queries, _ := c.Seen(); record(t, a).State != nodestate.FlipReverted || queries != 0 {
		t.Fatalf("record %s, %d queries", record(t, a).State, queries)
	}
}

// An attempt that applied and died (the record says flipped) is resumed by
// the next one with the same ID: not applied again, proven, confirmed and
// committed. One that died inside the batch (applying) is reverted, never
// applied again. One that confirmed is only committed.
func TestFlipTripResumesByID(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessAnswered}}}
	a, flips := tripActs(t, c)
	attempt(t, a, "n1-1", false)
	if record(t, a).State != nodestate.FlipFlipped || flips() != 1 {
		t.Fatal("the first attempt did not apply")
	}
	res, err := runTrip(t, a, tripIn("n1-1", true))
	if err != nil {
		t.Fatal(err)
	}
	if res.State != nodestate.FlipCommitted || flips() != 1 {
		t.Fatalf("resumed: %s after %d flips, want committed after 1", res.State, flips())
	}
	if beats, _, _ := c.Seen(); len(beats) == 0 || !beats[0].Applied {
		t.Fatalf("the resumed attempt did not prove the way out: %+v", beats)
	}

	b, bflips := tripActs(t, &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessAnswered}}})
	setRecord(t, b, nodestate.FlipRecord{ID: "n1-1", Node: "n1", State: nodestate.FlipApplying, Deadline: time.Now().Add(time.Minute), Revert: []byte(`{"node":"n1"}`)})
	_, err = runTrip(t, b, tripIn("n1-1", true))
	appErr(t, err, ErrFlipReverted)
	if bflips() != 0 || record(t, b).State != nodestate.FlipReverted {
		t.Fatalf("an interrupted apply: %d flips, record %s", bflips(), record(t, b).State)
	}

	cc := &trip.Fake{Answer: witnessAnswers}
	d, dflips := tripActs(t, cc)
	attempt(t, d, "n1-1", true)
	res, err = runTrip(t, d, tripIn("n1-1", true))
	if beats, queries, _ := cc.Seen(); err != nil || res.State != nodestate.FlipCommitted || dflips() != 1 || len(beats) != 0 || queries != 0 {
		t.Fatalf("a confirmed flip resumed: %+v %v, %d flips, %d beats, %d queries", res, err, dflips(), len(beats), queries)
	}
}

// The node's own preview refuses (a module it has not cut over): a result
// saying so, no record, nothing applied, no heartbeat through the client.
func TestFlipTripPreviewRefused(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessAnswered}}}
	a, flips := tripActs(t, c)
	plan := tripPlanN1()
	plan.Modules = []config.ModulePlan{{Name: "web", Ports: []config.Port{{Num: 8080, Proto: "tcp"}}}}
	withPlan(a, plan)
	in := tripIn("n1-1", true)
	in.Plan = plan.Ref()
	res, err := runTrip(t, a, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != FlipPreviewRefused || res.Preview == nil || res.Preview.Approved {
		t.Fatalf("result %+v", res)
	}
	rec, err := a.Flips.(*nodestate.Dir).Flip()
	must(t, err)
	if beats, _, _ := c.Seen(); rec != nil || flips() != 0 || len(beats) != 0 {
		t.Fatalf("a refused flip left record %+v, %d flips, %d beats", rec, flips(), len(beats))
	}
}

// An agent that reads verdicts by describe announces it from its first
// heartbeat, waits through a pending witness with no verdict (and an older
// witness's plain heartbeat), reads the verdict from the witness's
// heartbeat without a query, says it read it, then confirms and commits.
func TestFlipTripVerdictByDescribe(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, FakeDescriber: describing(
		witnessPending(nil),
		witnessPending("waiting for flip n1-1 to be applied"),
		witnessPending(WitnessVerdict{ID: "n1-0", State: WitnessLockedOut}),
		witnessPending(WitnessVerdict{ID: "n1-1", State: WitnessAnswered, Why: "22/tcp on 192.0.2.1"}),
	)}
	a, flips := tripActs(t, c)
	a.Converter = converter.GetDefaultDataConverter()
	res, err := runTrip(t, a, tripIn("n1-1", true))
	if err != nil || res.State != nodestate.FlipCommitted || flips() != 1 {
		t.Fatalf("result %+v %v after %d flips", res, err, flips())
	}
	beats, queries, describes := c.Seen()
	if queries != 0 || describes != 4 {
		t.Fatalf("%d queries, %d describes; want 0 and 4", queries, describes)
	}
	if want := (WitnessVerdict{ID: "n1-1", State: WitnessAnswered, Why: "22/tcp on 192.0.2.1"}); res.Witness == nil || res.Witness.ID != want.ID || res.Witness.State != want.State || res.Witness.Why != want.Why {
		t.Fatalf("the result carries verdict %+v, want the one confirmed on, %+v", res.Witness, want)
	}
	if len(beats) < 2 || !beats[0].Applied || !beats[0].Reads || beats[0].Read {
		t.Fatalf("the way out's heartbeat should announce reads, not read: %+v", beats)
	}
	if last := beats[len(beats)-1]; !last.Read || !last.Applied || last.ID != "n1-1" {
		t.Fatalf("the node did not say it read the verdict: %+v", beats)
	}
}

// A locked-out verdict read from the witness's heartbeat reverts the flip
// as the query's does, and the node still says it read it.
func TestFlipTripVerdictByDescribeLockedOutReverts(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, FakeDescriber: describing(
		witnessPending(WitnessVerdict{ID: "n1-1", State: WitnessLockedOut, Why: "22/tcp did not answer from 10.8.0.2"}),
	)}
	a, flips := tripActs(t, c)
	a.Converter = converter.GetDefaultDataConverter()
	_, err := runTrip(t, a, tripIn("n1-1", true))
	if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "the way in: locked out: 22/tcp did not answer") {
		t.Fatalf("error: %s", msg)
	}
	beats, queries, _ := c.Seen()
	if rec := record(t, a); flips() != 1 || rec.State != nodestate.FlipReverted || queries != 0 {
		t.Fatalf("flips %d, record %s, %d queries", flips(), rec.State, queries)
	}
	if last := beats[len(beats)-1]; !last.Read {
		t.Fatalf("the node did not say it read the verdict: %+v", beats)
	}
}

// An older orchestrator's witness tells nothing by heartbeat and completes
// at once: once it is no longer pending (or the describe fails), the agent
// asks its workflow by query, and never says it read a heartbeat verdict.
func TestFlipTripVerdictFallsBackToQuery(t *testing.T) {
	for name, describes := range map[string][]*workflowservice.DescribeWorkflowExecutionResponse{
		"witness completed": {witnessPending("waiting for flip n1-1 to be applied"), {}},
		"describe fails":    nil,
	} {
		t.Run(name, func(t *testing.T) {
			c := &trip.Fake{Answer: witnessAnswers, FakeDescriber: describing(describes...), Verdicts: []WitnessVerdict{{}, {State: WitnessAnswered}}}
			a, _ := tripActs(t, c)
			a.Converter = converter.GetDefaultDataConverter()
			res, err := runTrip(t, a, tripIn("n1-1", true))
			if err != nil || res.State != nodestate.FlipCommitted {
				t.Fatalf("result %+v %v", res, err)
			}
			beats, queries, _ := c.Seen()
			if queries != 2 {
				t.Fatalf("%d queries, want 2 (pending, then answered)", queries)
			}
			for _, b := range beats {
				if b.Read {
					t.Fatalf("said it read a heartbeat verdict: %+v", beats)
				}
			}
		})
	}
}

// An agent without the converter (as agents before the verdict heartbeat)
// never describes and does not announce that it reads verdicts by describe.
func TestFlipTripQueryOnlyAgent(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessAnswered}},
		FakeDescriber: describing(witnessPending(WitnessVerdict{ID: "n1-1", State: WitnessLockedOut}))}
	a, _ := tripActs(t, c)
	res, err := runTrip(t, a, tripIn("n1-1", true))
	beats, queries, describes := c.Seen()
	if err != nil || res.State != nodestate.FlipCommitted || describes != 0 || queries != 1 {
		t.Fatalf("result %+v %v, %d describes, %d queries", res, err, describes, queries)
	}
	if beats[0].Reads {
		t.Fatalf("a query-only agent announced it reads by describe: %+v", beats[0])
	}
}

// A forged verdict is not the witness's word: a heartbeat written in clear
// on the pending witness ({"id":"n1-1","state":"answered"}, refused by the
// codec once a key is set), an answer by query that is not signed, one
// signed by another key, and one the witness signed for another flip, plan
// or node. None confirms: the flip is reverted when the wait for a verdict
// ends, and the node never says it read one.
func TestFlipTripForgedVerdictReverts(t *testing.T) {
	cd, err := codec.New(bytes.Repeat([]byte{0x42}, 32))
	must(t, err)
	other, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x13}, 32)))
	must(t, err)
	plan := tripPlanN1()
	plan.ConfirmTimeout = 2 * time.Second // the wait for a verdict ends at 1.5 s
	sign := func(s ssh.Signer, node, id, hash string, at time.Time) WitnessVerdict {
		v, err := WitnessVerdict{ID: id, State: WitnessAnswered, Why: "22/tcp on 192.0.2.1"}.Sign(s, node, hash, at)
		must(t, err)
		return v
	}
	now := time.Now()
	for name, forged := range map[string]WitnessVerdict{
		"unsigned":      {ID: "n1-1", State: WitnessAnswered},
		"another key":   sign(other, "n1", "n1-1", plan.Hash(), now),
		"another flip":  sign(witnessSigner, "n1", "n1-0", plan.Hash(), now),
		"another plan":  sign(witnessSigner, "n1", "n1-1", tripPlanN1().Hash(), now),
		"another node":  sign(witnessSigner, "n2", "n1-1", plan.Hash(), now),
		"an older flip": sign(witnessSigner, "n1", "n1-1", plan.Hash(), now.Add(-time.Hour)),
		"signature lost": func() WitnessVerdict {
			v := sign(witnessSigner, "n1", "n1-1", plan.Hash(), now)
			v.Why = "altered"
			return v
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			plain, err := converter.GetDefaultDataConverter().ToPayloads(WitnessVerdict{ID: "n1-1", State: WitnessAnswered})
			must(t, err)
			pa := &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: "Witness"}, HeartbeatDetails: plain}
			c := &trip.Fake{Answer: forgedAnswers, Verdicts: []WitnessVerdict{forged},
				FakeDescriber: describing(&workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{pa}}, &workflowservice.DescribeWorkflowExecutionResponse{})}
			a, flips := tripActs(t, c)
			withPlan(a, plan)
			a.Converter = codec.DataConverter(cd)
			in := tripIn("n1-1", true)
			in.Plan, in.ConfirmTimeout = plan.Ref(), plan.ConfirmTimeout
			_, err = runTrip(t, a, in)
			if msg := appErr(t, err, ErrFlipReverted); !strings.Contains(msg, "the witness gave no verdict") || !strings.Contains(msg, "an answer not taken") {
				t.Fatalf("error: %s", msg)
			}
			if rec := record(t, a); flips() != 1 || rec.State != nodestate.FlipReverted {
				t.Fatalf("flips %d, record %s", flips(), rec.State)
			}
			beats, _, _ := c.Seen()
			for _, b := range beats {
				if b.Read {
					t.Fatalf("the node said it read a forged verdict: %+v", beats)
				}
			}
		})
	}
}

// A node whose flips are witnessed refuses, before applying, a flip it
// could not authenticate a verdict for (no flip.witness.key) and a request
// that says the flip is not witnessed.
func TestFlipTripRefusedWithoutWitnessKey(t *testing.T) {
	c := &trip.Fake{Answer: witnessAnswers, Verdicts: []WitnessVerdict{{State: WitnessAnswered}}}
	a, flips := tripActs(t, c)
	plan := tripPlanN1()
	plan.Witness = nil
	withPlan(a, plan)
	in := tripIn("n1-1", true)
	in.Plan = plan.Ref()
	_, err := runTrip(t, a, in)
	if msg := appErr(t, err, ErrFlipRefused); !strings.Contains(msg, "flip.witness.key is not set") || !strings.Contains(msg, "nothing was changed") {
		t.Fatalf("error: %s", msg)
	}
	withPlan(a, tripPlanN1())
	_, err = runTrip(t, a, tripIn("n1-1", false))
	if msg := appErr(t, err, "BadRequest"); !strings.Contains(msg, "witnessed") {
		t.Fatalf("error: %s", msg)
	}
	beats, _, _ := c.Seen()
	if rec, err := a.Flips.(*nodestate.Dir).Flip(); err != nil || rec != nil || flips() != 0 || len(beats) != 0 {
		t.Fatalf("a refused flip left record %+v (%v), %d flips, %d beats", rec, err, flips(), len(beats))
	}
}
