package witness

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
)

// describer answers each describe with the next of its answers (the last
// one repeats), counting the reads.
type describer struct {
	mu      sync.Mutex
	answers []*workflowservice.DescribeWorkflowExecutionResponse
	reads   int
}

func (d *describer) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.answers[min(d.reads, len(d.answers)-1)]
	d.reads++
	return r, nil
}

func pending(t *testing.T, typ string, details any) *workflowservice.DescribeWorkflowExecutionResponse {
	t.Helper()
	pa := &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: typ}}
	if details != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(details)
		if err != nil {
			t.Fatal(err)
		}
		pa.HeartbeatDetails = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{pa}}
}

// The witness of a flip in one round trip dials only once the node's
// pending flip activity heartbeats this flip applied: a plain step, another
// flip's progress, and this flip not yet applied are waited through.
func TestWitnessWaitsUntilApplied(t *testing.T) {
	d := &describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		pending(t, "FlipTrip", nil),
		pending(t, "FlipTrip", "flip: preview"),
		pending(t, "FlipTrip", map[string]any{"id": "n1-0", "applied": true}),
		pending(t, "FlipTrip", map[string]any{"id": "n1-1"}),
		pending(t, "FlipTrip", map[string]any{"id": "n1-1", "applied": true, "step": "flip: applied; the way out"}),
	}}
	var dialledAt int
	w := &Witness{Describe: d, Converter: converter.GetDefaultDataConverter(), Every: time.Millisecond,
		Dialer: func(netip.Addr) *net.Dialer {
			dialledAt = d.reads
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
	d := &describer{answers: []*workflowservice.DescribeWorkflowExecutionResponse{
		pending(t, "FlipTrip", map[string]any{"id": "n1-1"}),
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
