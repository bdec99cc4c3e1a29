// `adopt brief NODE`: the node's briefing, in Markdown or as a standalone
// HTML page, from its workflow's state, with the preview, drift and key
// conflicts asked of the node now (read-only). Before `adopt start` there
// is no workflow: the node's own `adopt-worker brief --config FILE` writes
// the same briefing from a local probe.
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"adoption/activities/nodewire"
	"adoption/briefing"
	"adoption/workflows"
)

func (x *cli) briefCommand(ctx context.Context) *cobra.Command {
	var asHTML bool
	var out string
	cmd := &cobra.Command{
		Use:   "brief NODE",
		Short: "Write the node's briefing: its firewall, containers, files, modules, conflicts, a flip's fates and the risks",
		Example: "  adopt brief n1                     # Markdown on stdout\n" +
			"  adopt brief n1 --html --out n1.html   # a standalone page",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := x.nodeStatus(ctx, args[0])
			if err != nil {
				return fmt.Errorf("%w\n(before adopt start, run `adopt-worker brief --config FILE` on the node: it briefs from a local probe)", err)
			}
			if ns.StateFrom == "visibility" {
				return fmt.Errorf("node %s's workflow did not answer (%s): a briefing needs its recorded state; see `adopt status %s`", args[0], ns.Stuck, args[0])
			}
			nb, why := x.askBrief(ctx, args[0])
			b := briefing.BuildAsked(ns.State, nb, why, time.Now())
			b.Local = x.out.Local
			if x.asJSON && out == "" {
				return x.writeJSON(x.stdout, b)
			}
			return writeBrief(x.stdout, out, asHTML, b)
		},
	}
	cmd.Flags().BoolVar(&asHTML, "html", false, "write a standalone HTML page instead of Markdown")
	cmd.Flags().StringVar(&out, "out", "", "write to FILE instead of stdout (-o is the output format, as on every command)")
	return cmd
}

// writeBrief writes the briefing and, for a file, says where it went.
func writeBrief(stdout io.Writer, out string, asHTML bool, b briefing.Brief) error {
	if err := briefing.Write(stdout, out, asHTML, b); err != nil {
		return err
	}
	if out != "" {
		fmt.Fprintf(stdout, "briefing for %s written to %s\n", b.Node, out)
	}
	return nil
}

// askBrief asks the node, through its workflow, for the briefing's live
// parts; without an answer it says why, and the recorded state stands.
func (x *cli) askBrief(ctx context.Context, node string) (*nodewire.NodeBriefing, string) {
	wctx, cancel := context.WithTimeout(ctx, x.accept+time.Minute)
	defer cancel()
	in := workflows.RequestInput{NotAfter: time.Now().Add(x.accept).Add(-skew).UTC()}
	h, err := x.c.UpdateWorkflow(wctx, client.UpdateWorkflowOptions{
		WorkflowID: workflows.WorkflowID(node), UpdateName: workflows.UpdateBrief,
		Args: []any{in}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return nil, err.Error()
	}
	var nb nodewire.NodeBriefing
	if err := h.Get(wctx, &nb); err != nil {
		return nil, err.Error()
	}
	return &nb, ""
}
