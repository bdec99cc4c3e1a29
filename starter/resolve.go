// `adopt resolve NODE PATH KEY --take node|mesh`: the operator's decision on
// a key that a cutover refused on (the node changed it since custody and the
// mesh sets it otherwise); `adopt resolve NODE MODULE env:NAME|label:NAME`
// the same for a variable or label of the module's container that its
// predecessor's sets otherwise. The workflow records the decision, never the
// value; the next `adopt retry NODE MODULE` applies it on the node.
package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/containers/cutoverwire"
	"adoption/workflows"
)

// takeSides are --take's values: keep the node's value or take the mesh's.
var takeSides = []string{"node", "mesh"}

func (x *cli) resolveCommand(ctx context.Context) *cobra.Command {
	var take string
	cmd := &cobra.Command{
		Use:   "resolve NODE PATH|MODULE KEY --take node|mesh",
		Short: "Decide a conflicting key of a module's file, a node file, or a module container's env:NAME or label:NAME: keep the node's value or take the mesh's",
		Example: "  adopt resolve n1 /srv/app/app.env LEVEL --take mesh\n" +
			"  adopt resolve n1 app env:MODE --take node\n" +
			"  adopt retry n1 app",
		Args: args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(takeSides, take) {
				return usagef("--take %q: say node (keep the node's value) or mesh (take the module's)", take)
			}
			if !strings.HasPrefix(args[1], "/") {
				if _, _, ok := cutoverwire.SplitKey(args[2]); !ok {
					return usagef("key %q of module %s: say env:NAME for an environment variable or label:NAME for a label of its container (a file's key goes with its absolute PATH)", args[2], args[1])
				}
			}
			return x.resolve(ctx, args[0], workflows.ResolveInput{Path: args[1], Key: args[2], Take: take})
		},
	}
	cmd.Flags().StringVar(&take, "take", "", "node or mesh (required)")
	return cmd
}

func (x *cli) resolve(ctx context.Context, node string, in workflows.ResolveInput) error {
	var err error
	if in.Intent, err = x.nodeIntent(ctx, node, authority.ActResolve, func(config.Plan) map[string]string { return authority.DecisionArgs(in.Path, in.Key, in.Take) }); err != nil {
		return err
	}
	if err := x.dial(); err != nil {
		return err
	}
	what := fmt.Sprintf("resolve %s %s", in.Path, in.Key)
	giveUp := time.Now().Add(x.accept)
	// A decision that reaches the workflow after the CLI gave up is refused
	// there, so "not delivered" stays true.
	in.NotAfter = giveUp.Add(-skew).UTC()
	wctx, cancel := context.WithDeadline(ctx, giveUp)
	defer cancel()
	h, err := x.c.UpdateWorkflow(wctx, client.UpdateWorkflowOptions{
		WorkflowID:   workflows.WorkflowID(node),
		UpdateName:   workflows.UpdateResolve,
		Args:         []any{in},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		if timedOut(err) {
			return fmt.Errorf("not delivered: %s on %s: the node's workflow did not answer within %s; it will not be recorded later. See `adopt status %s`", what, node, x.accept, node)
		}
		return x.requestError(ctx, node, what, nil, err)
	}
	var res workflows.ResolveResult
	if err := h.Get(wctx, &res); err != nil {
		return x.requestError(ctx, node, what, h, err)
	}
	if x.asJSON {
		return x.writeJSON(x.stdout, res)
	}
	owner := "module " + res.Module
	if res.Module == "" {
		owner = "the node files"
	}
	fmt.Fprintf(x.stdout, "recorded for %s: %s\nNEXT: %s\n\nWeb UI: %s\n", owner, res.Recorded, res.Next, x.link(node))
	return nil
}
