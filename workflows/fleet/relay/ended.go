// How the fleet learns, in one visibility query a round, which of its
// nodes' workflows ended since its last round: the closed runs whose parent
// is the fleet (continued-as-new runs left out: a chain keeps its parent
// across continue-as-new, so only its last run closes otherwise), each
// confirmed by one describe of the latest run under the node's ID before it
// is reported. Run by the fleet as a local activity (fleet_ask.go).
package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"adoption/workflows"
)

// Lister is what Ended needs of a Temporal client.
type Lister interface {
	Describer
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// EndedInput names the fleet, the nodes whose end it has not seen, and
// since when a close is news (zero: any close).
type EndedInput struct {
	Fleet string    `json:"fleet"` // the fleet's workflow ID
	Nodes []Child   `json:"nodes"`
	Since time.Time `json:"since,omitzero"`
}

// EndedOutput is what a round found: the nodes whose chain ended, each
// confirmed by a describe; Listed is how many closed runs the query
// returned, Described how many describes confirmed them.
type EndedOutput struct {
	Ended     []ChildStanding `json:"ended,omitempty"`
	Listed    int             `json:"listed"`
	Described int             `json:"described"`
}

// endedPage is the page size of the round's query.
const endedPage = 500

// EndedQuery is the visibility query of a round: the fleet's children's
// runs that closed otherwise than by continue-as-new, since since.
func EndedQuery(fleetID string, since time.Time) (string, error) {
	if fleetID == "" || strings.ContainsAny(fleetID, "'\"\\\n") {
		return "", fmt.Errorf("fleet workflow ID %q cannot be quoted in a visibility query", fleetID)
	}
	q := "ParentWorkflowId = '" + fleetID + "' AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew'"
	if !since.IsZero() {
		q += " AND CloseTime >= '" + since.UTC().Format(time.RFC3339Nano) + "'"
	}
	return q, nil
}

// Ended lists the fleet's children closed since in.Since (every page), and
// describes each of in.Nodes among them: visibility is eventually
// consistent and a listed close may be an older chain's (a node retried),
// so only the latest run under the node's ID, described, says how the
// chain the fleet started stands (standing). A close not yet visible is
// found by a later round: the fleet's Since leaves a margin.
func (r *Relay) Ended(ctx context.Context, in EndedInput) (EndedOutput, error) {
	l, ok := r.C.(Lister)
	if !ok {
		return EndedOutput{}, errors.New("the relay's client cannot list workflows")
	}
	q, err := EndedQuery(in.Fleet, in.Since)
	if err != nil {
		return EndedOutput{}, err
	}
	want := make(map[string]Child, len(in.Nodes))
	for _, c := range in.Nodes {
		want[workflows.WorkflowID(c.Node)] = c
	}
	var out EndedOutput
	var seen []Child
	var token []byte
	for {
		resp, err := l.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: endedPage, NextPageToken: token})
		if err != nil {
			return EndedOutput{}, fmt.Errorf("listing fleet %s's ended children: %w", in.Fleet, err)
		}
		for _, e := range resp.GetExecutions() {
			out.Listed++
			if c, ok := want[e.GetExecution().GetWorkflowId()]; ok {
				delete(want, e.GetExecution().GetWorkflowId()) // one describe a node
				seen = append(seen, c)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	for _, c := range seen {
		out.Described++
		st, err := describeStanding(ctx, l, in.Fleet, c)
		if err != nil {
			return EndedOutput{}, err
		}
		if st.Ended != "" {
			out.Ended = append(out.Ended, st)
		}
	}
	return out, nil
}
