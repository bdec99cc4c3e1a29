package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/crypto/ssh"

	"adoption/config"
)

// The witness of a flip in one round trip dials only once the node's
// pending flip activity heartbeats this flip applied: a plain step, another
// flip's progress, and this flip not yet applied are waited through.
func TestWitnessWaitsUntilApplied(t *testing.T) {
	d := &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		Pending("FlipTrip", nil),
		Pending("FlipTrip", "flip: preview"),
		Pending("FlipTrip", map[string]any{"id": "n1-0", "applied": true}),
		Pending("FlipTrip", map[string]any{"id": "n1-1"}),
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "step": "flip: applied; the way out"}),
	}}
	var dialledAt int
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond,
		Dialer: func(netip.Addr) *net.Dialer {
			dialledAt = d.Reads()
			return &net.Dialer{Timeout: time.Second}
		}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	in := Input{Node: "n1", Addresses: []string{"127.0.0.1"}, Ports: []config.Port{{Num: port, Proto: "tcp"}},
		After: &After{WorkflowID: "adoption-n1", Activity: "FlipTrip", FlipID: "n1-1"}}
	res, err := w.Witness(context.Background(), in)
	if err != nil || len(res.Answered) != 1 {
		t.Fatalf("witness: %+v %v", res, err)
	}
	if dialledAt != 5 {
		t.Fatalf("dialled after %d reads, want 5 (once applied)", dialledAt)
	}
}

// The flip's activity ended before it said applied: nothing is dialled,
// and the error says the flip ended.
func TestWitnessFlipEnded(t *testing.T) {
	d := &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		Pending("FlipTrip", map[string]any{"id": "n1-1"}),
		{},
	}}
	dialled := false
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond,
		Dialer: func(netip.Addr) *net.Dialer { dialled = true; return &net.Dialer{} }}
	_, err := w.Witness(context.Background(), Input{Node: "n1", Addresses: []string{"127.0.0.1"}, Ports: []config.Port{{Num: 22, Proto: "tcp"}},
		After: &After{Activity: "FlipTrip", FlipID: "n1-1"}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrFlipEnded || dialled {
		t.Fatalf("err %v, dialled %v", err, dialled)
	}
}

// beats is a client recording the witness's acknowledged heartbeats.
type beats struct {
	mu  sync.Mutex
	got []Verdict
}

func (b *beats) RecordActivityHeartbeat(_ context.Context, _ []byte, details ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, details[0].(Verdict))
	return nil
}

// runWitness runs the witness as the orchestrator's worker does, in an
// activity's context.
func runWitness(t *testing.T, w *Witness, in Input) (*Result, error) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(w)
	v, err := env.ExecuteActivity(w.Witness, in)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return &res, nil
}

// listen is a management port that answers.
func listen(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// A node that announces it reads verdicts by describe is told the verdict
// by the witness's heartbeat (read back as ReadVerdict reads it), and the
// witness stays pending until the node says it read it; then it completes
// with the same result as ever.
func TestWitnessTellsByHeartbeat(t *testing.T) {
	d := &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "reads_verdict": true}),
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "reads_verdict": true}),
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "reads_verdict": true, "verdict_read": true}),
	}}
	b := &beats{}
	signer, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond, Heartbeat: b, Timeout: time.Second, Signer: signer}
	in := Input{Node: "n1", Addresses: []string{"127.0.0.1"}, Ports: []config.Port{{Num: listen(t), Proto: "tcp"}}, PlanHash: "3df689a2983b",
		After: &After{WorkflowID: "adoption-n1", Activity: "FlipTrip", FlipID: "n1-1"}}
	res, err := runWitness(t, w, in)
	if err != nil || len(res.Answered) != 1 {
		t.Fatalf("witness: %+v %v", res, err)
	}
	if len(b.got) != 1 || b.got[0].ID != "n1-1" || b.got[0].State != Answered || b.got[0].Why != res.Answered[0] {
		t.Fatalf("verdict heartbeats %+v", b.got)
	}
	if d.Reads() != 3 {
		t.Fatalf("%d reads, want 3: it completed before the node read the verdict", d.Reads())
	}
	// The node reads it back from the witness's pending activity.
	pa := Pending(ActivityType, b.got[0])
	v, isPending, err := ReadVerdict(context.Background(), &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{pa}}, converter.GetDefaultDataConverter(), "adoption-n1", "", "n1-1")
	if err != nil || !isPending || v.ID != b.got[0].ID || v.State != b.got[0].State || !bytes.Equal(v.Sig, b.got[0].Sig) {
		t.Fatalf("read back %+v pending %v %v", v, isPending, err)
	}
	// Signed for the node, the flip, the plan and now, with the witness's
	// key; the result carries it for the workflow's query.
	want := Want{Node: "n1", ID: "n1-1", Plan: "3df689a2983b", Since: began}
	if err := v.Authentic([]ssh.PublicKey{signer.PublicKey()}, want, time.Now()); err != nil {
		t.Fatalf("the verdict told is not authentic: %v", err)
	}
	if res.Verdict == nil || !bytes.Equal(res.Verdict.Sig, v.Sig) {
		t.Fatalf("the result does not carry the signed verdict: %+v", res.Verdict)
	}
	want.Plan = "e2603922ef74"
	if err := v.Authentic([]ssh.PublicKey{signer.PublicKey()}, want, time.Now()); err == nil {
		t.Fatal("a verdict for another plan was taken")
	}
	if v, isPending, _ := ReadVerdict(context.Background(), &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{pa}}, converter.GetDefaultDataConverter(), "adoption-n1", "", "n1-2"); v.State != "" || !isPending {
		t.Fatalf("another flip's verdict was read: %+v", v)
	}
}

// Locked out, told by heartbeat: the witness stops waiting once the node's
// activity ended (it reverted), and fails as ever.
func TestWitnessTellsLockedOut(t *testing.T) {
	d := &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "reads_verdict": true}),
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "reads_verdict": true}),
		{},
	}}
	b := &beats{}
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond, Heartbeat: b,
		Dialer: func(netip.Addr) *net.Dialer { return &net.Dialer{Timeout: time.Nanosecond} }}
	_, err := runWitness(t, w, Input{Node: "n1", Addresses: []string{"192.0.2.1"}, Ports: []config.Port{{Num: 22, Proto: "tcp"}},
		After: &After{Activity: "FlipTrip", FlipID: "n1-1"}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrLockedOut {
		t.Fatalf("err %v", err)
	}
	if len(b.got) != 1 || b.got[0].State != LockedOut || b.got[0].ID != "n1-1" || d.Reads() != 3 {
		t.Fatalf("verdict heartbeats %+v after %d reads", b.got, d.Reads())
	}
}

// An older agent does not announce it reads by describe: the witness
// heartbeats nothing and completes at once, for the workflow's query.
func TestWitnessOlderAgentCompletesAtOnce(t *testing.T) {
	d := &FakeDescriber{Answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		Pending("FlipTrip", map[string]any{"id": "n1-1", "applied": true, "step": "flip: applied; the way out"}),
	}}
	b := &beats{}
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond, Heartbeat: b, Timeout: time.Second}
	res, err := runWitness(t, w, Input{Node: "n1", Addresses: []string{"127.0.0.1"}, Ports: []config.Port{{Num: listen(t), Proto: "tcp"}},
		After: &After{Activity: "FlipTrip", FlipID: "n1-1"}})
	if err != nil || len(res.Answered) != 1 || len(b.got) != 0 || d.Reads() != 1 {
		t.Fatalf("witness %+v %v, heartbeats %+v, %d reads", res, err, b.got, d.Reads())
	}
}
