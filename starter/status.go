// `adopt status NODE`: one node's whole state, from its workflow.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"adoption/workflows"

	"go.temporal.io/api/serviceerror"
)

// state asks the node's workflow for its state: a query while it runs, its
// result once it has completed.
func (x *cli) state(ctx context.Context, node string) (*workflows.State, error) {
	if err := x.dial(); err != nil {
		return nil, err
	}
	id := workflows.WorkflowID(node)
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := x.c.QueryWorkflow(qctx, id, "", workflows.QueryStatus)
	var st workflows.State
	if err == nil {
		if err := v.Get(&st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("node %s has no migration workflow; start it with `adopt start %s`", node, node)
	}
	// A completed workflow answers with its result.
	if gerr := x.c.GetWorkflow(ctx, id, "").Get(qctx, &st); gerr == nil {
		return &st, nil
	}
	return nil, fmt.Errorf("status of %s: %w (is adopt-worker running? queries are answered by a worker)", id, err)
}

func (x *cli) status(ctx context.Context, node string, asJSON bool) error {
	st, err := x.state(ctx, node)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(x.stdout, st)
	}
	printState(x.stdout, st)
	fmt.Fprintf(x.stdout, "\nWeb UI: %s\n", x.link(node))
	return nil
}
