// `adopt-worker watchdog`: started detached by a flip, it reverts the flip
// unless the workflow confirms it by its deadline.
package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"adoption/activities"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
	"adoption/nodestate"
	"adoption/watchdog"
)

func watchdogCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "watchdog",
		Short: "Revert the current flip unless it is confirmed by its deadline (started by the flip itself)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(*cfgPath)
			if err != nil {
				return err
			}
			state := nodestate.New(cfg.Node.StateDir)
			fw := firewall.NewFlipper(cfg.Node.Netns)
			files := custody.New(cfg.Node.Root, cfg.Node.StateDir)
			return watchdog.Run(ctx, watchdog.Options{
				Records: state,
				Revert:  func(rec *nodestate.FlipRecord) error { return activities.RevertRecord(rec, fw, files) },
				Log:     stderr,
			})
		},
	}
}
