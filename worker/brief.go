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
)

func briefCommand(ctx context.Context, cfgPath *string, stdout, stderr io.Writer) *cobra.Command {
	var asHTML bool
	var out string
	cmd := &cobra.Command{
		Use:     "brief",
		Short:   "Write the node's briefing from a local probe (read-only, no Temporal): what to read before adopt start",
		Example: "  adopt-worker brief --config /etc/adoption/n1.yaml --html --out n1.html",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadNodeConfig(*cfgPath)
			if err != nil {
				return err
			}
			r, err := nodeActivities(cfg, *cfgPath, stderr).Probe(ctx, activities.ProbeInput{Plan: cfg.Plan().Ref()})
			if err != nil {
				return err
			}
			return briefing.Write(stdout, out, asHTML, briefing.Build(cfg.Plan(), r, nil, time.Now()))
		},
	}
	cmd.Flags().BoolVar(&asHTML, "html", false, "write a standalone HTML page instead of Markdown")
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to FILE (0600) instead of stdout")
	return cmd
}
