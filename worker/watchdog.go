// `adopt-worker watchdog`: started detached by a flip, it reverts the flip
// unless the workflow confirms it by its deadline.
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"adoption/activities"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/firewall/flip"
	"adoption/nodestate"
	"adoption/watchdog"
)

func watchdogCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "watchdog",
		Example: "  adopt-worker watchdog --config /etc/adoption/node.yaml   # started by the flip itself; by hand only to test",
		Short:   "Revert the current flip unless it is confirmed by its deadline (started by the flip itself)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadNodeConfig(*cfgPath)
			if err != nil {
				return err
			}
			log, err := watchdogLog(cfg, stderr)
			if err != nil {
				return err
			}
			state := nodestate.New(cfg.Node.StateDir)
			fw := flip.NewFlipper(cfg.Node.Netns)
			files := custody.New(cfg.Node.Root, cfg.Node.StateDir)
			fp := failpoint.FromEnv(os.Getenv(failpoint.EnvVar))
			return watchdog.Run(ctx, watchdog.Options{
				Records:   state,
				Exclusive: watchdog.Exclusive(state),
				Revert: func(rec *nodestate.FlipRecord) error {
					if err := fp.Fail("watchdog-revert"); err != nil {
						return err
					}
					return activities.RevertRecord(rec, fw, files)
				},
				Log: log,
			})
		},
	}
}
