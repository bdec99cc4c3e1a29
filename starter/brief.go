// `adopt brief NODE`: the node's briefing, in Markdown or as a standalone
// HTML page, from its workflow's state. Before `adopt start` there is no
// workflow: the node's own `adopt-worker brief --config FILE` writes the
// same briefing from a local probe.
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"adoption/briefing"
)

func (x *cli) briefCommand(ctx context.Context) *cobra.Command {
	var asHTML bool
	var out string
	cmd := &cobra.Command{
		Use:   "brief NODE",
		Short: "Write the node's briefing: its firewall, containers, files, modules, conflicts, a flip's fates and the risks",
		Example: "  adopt brief n1                     # Markdown on stdout\n" +
			"  adopt brief n1 --html -o n1.html   # a standalone page",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := x.nodeStatus(ctx, args[0])
			if err != nil {
				return fmt.Errorf("%w\n(before adopt start, run `adopt-worker brief --config FILE` on the node: it briefs from a local probe)", err)
			}
			if ns.StateFrom == "visibility" {
				return fmt.Errorf("node %s's workflow did not answer (%s): a briefing needs its recorded state; see `adopt status %s`", args[0], ns.Stuck, args[0])
			}
			st := ns.State
			b := briefing.Build(st.Plan, nil, &st, time.Now())
			if x.asJSON && out == "" {
				return writeJSON(x.stdout, b)
			}
			return writeBrief(x.stdout, out, asHTML, b)
		},
	}
	cmd.Flags().BoolVar(&asHTML, "html", false, "write a standalone HTML page instead of Markdown")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to FILE instead of stdout")
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
