// adopt is the operator's CLI: it starts a node's migration workflow, shows
// status, and sends the requests (migrate, retry, preview, flip, release).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"adoption/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adopt:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	x := &cli{stdout: stdout}
	defer func() {
		if x.c != nil {
			x.c.Close()
		}
	}()
	root := &cobra.Command{
		Use:           "adopt",
		Short:         "Migrate a machine in use onto the mesh, one node and one module at a time",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&x.cfgPath, "config", "", "configuration file (default $ADOPT_CONFIG)")
	root.PersistentFlags().StringVar(&x.uiURL, "ui", envOr("ADOPT_UI", "http://127.0.0.1:8233"), "Temporal Web UI address, for links")

	var asJSON bool
	start := &cobra.Command{
		Use:   "start NODE",
		Short: "Start the node's migration workflow: probe, then adopt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return x.start(ctx, args[0])
		},
	}
	status := &cobra.Command{
		Use:   "status [NODE]",
		Short: "Show a node's state, or every node's phase",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return x.statusAll(ctx, asJSON)
			}
			return x.status(ctx, args[0], asJSON)
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON (stable, for scripts)")
	request := func(use, kind, short string, module bool) *cobra.Command {
		n := cobra.ExactArgs(1)
		if module {
			n = cobra.RangeArgs(1, 2)
		}
		return &cobra.Command{
			Use: use, Short: short, Args: n,
			RunE: func(cmd *cobra.Command, args []string) error {
				mod := ""
				if len(args) == 2 {
					mod = args[1]
				}
				if kind == workflows.UpdateMigrate && mod == "" {
					return fmt.Errorf("migrate needs NODE and MODULE")
				}
				return x.request(ctx, args[0], kind, mod)
			},
		}
	}
	preview := &cobra.Command{
		Use:   "preview NODE",
		Short: "Say which open ports a flip would close, without flipping",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return x.preview(ctx, args[0], asJSON)
		},
	}
	preview.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	driftCmd := &cobra.Command{Use: "drift", Short: "Drift found while adopted: a file or the found firewall changed since adoption"}
	driftCmd.AddCommand(request("accept NODE", workflows.SignalDriftAccept, "Record the node as it is now (custody renewed); the flip is no longer blocked", false))
	root.AddCommand(start, status, preview, x.fleetCommand(ctx), x.waitCommand(ctx),
		request("migrate NODE MODULE", workflows.UpdateMigrate, "Migrate a module: its container takes over the predecessor's", true),
		request("retry NODE [MODULE]", workflows.UpdateRetry, "Retry a failed cutover, or a failed adoption without MODULE", true),
		request("flip NODE", workflows.UpdateFlip, "Flip the node: preview, then replace the found firewall with the mesh's", false),
		request("release NODE", workflows.UpdateRelease, "Remove every marked rule and leave the node as found", false),
		driftCmd,
		request("prune NODE", workflows.UpdatePrune, "Remove the stopped predecessor containers kept for rollback (never their volumes)", false),
	)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
