// `adopt-worker brief`: the node's briefing before `adopt start`, from a
// local probe and the node's own configuration, with no Temporal. Once the
// node has a workflow, `adopt brief NODE` gives the same briefing with what
// the workflow recorded (custody, modules, the last preview, drift).
package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"adoption/activities"
	"adoption/briefing"
	"adoption/output"
)

func briefCommand(ctx context.Context, cfgPath *string, stdout, stderr io.Writer) *cobra.Command {
	var asHTML bool
	var file string
	var out output.Flags
	cmd := &cobra.Command{
		Use:   "brief",
		Short: "Write the node's briefing from a local probe (read-only, no Temporal): what to read before adopt start",
		Example: `  adopt-worker brief --config /etc/adoption/node.yaml                       # Markdown on stdout
  adopt-worker brief --config /etc/adoption/node.yaml --html --out n1.html  # a standalone page
  adopt-worker brief --config /etc/adoption/node.yaml -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Resolve("write to a file with --out"); err != nil {
				return usageError{err}
			}
			cfg, err := loadNodeConfig(*cfgPath)
			if err != nil {
				return err
			}
			r, err := nodeActivities(cfg, *cfgPath, stderr).Probe(ctx, activities.ProbeInput{Plan: cfg.Plan().Ref()})
			if err != nil {
				return err
			}
			b := briefing.Build(cfg.Plan(), r, nil, time.Now())
			b.Local = out.Local
			if out.IsJSON() && file == "" {
				return out.Write(stdout, b)
			}
			return briefing.Write(stdout, file, asHTML, b)
		},
	}
	out.Register(cmd.Flags())
	cmd.Flags().BoolVar(&asHTML, "html", false, "write a standalone HTML page instead of Markdown")
	cmd.Flags().StringVar(&file, "out", "", "write to FILE (0600) instead of stdout (-o is the output format, as on every command)")
	return cmd
}
