// A stand-in for Describer, kept beside it for tests (as tailscale keeps
// util/linuxfw/fake.go beside its interface): a client whose workflow has
// the pending activities a test gives it, and Pending, the description of
// a workflow with one activity pending and its last heartbeat. The
// witness's tests and the node's (activities/trip, which builds its fake
// client on this one) use them. No I/O; production code never calls it.
package witness

import (
	"context"
	"errors"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
)

// FakeDescriber answers each describe with the next of Answers (the last
// one repeats; none: an error), counting the describes.
type FakeDescriber struct {
	Answers []*workflowservice.DescribeWorkflowExecutionResponse

	mu    sync.Mutex
	reads int
}

func (d *FakeDescriber) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.Answers) == 0 {
		return nil, errors.New("no workflow to describe")
	}
	r := d.Answers[min(d.reads, len(d.Answers)-1)]
	d.reads++
	return r, nil
}

// Reads is how many describes were answered.
func (d *FakeDescriber) Reads() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

// Pending is a description of a workflow with one pending activity of
// type activity, its last heartbeat details (none if nil) encoded by the
// default converter. Details it cannot encode are the test's mistake: it
// panics.
func Pending(activity string, details any) *workflowservice.DescribeWorkflowExecutionResponse {
	pa := &workflowpb.PendingActivityInfo{ActivityType: &commonpb.ActivityType{Name: activity}}
	if details != nil {
		p, err := converter.GetDefaultDataConverter().ToPayloads(details)
		if err != nil {
			panic("witness.Pending: " + err.Error())
		}
		pa.HeartbeatDetails = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: []*workflowpb.PendingActivityInfo{pa}}
}
