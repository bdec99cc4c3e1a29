// adopt-worker is adoption's Temporal worker, in two roles: `orchestrate`
// runs the workflows (one orchestrator for the whole fleet), `run` runs on
// each node and executes only that node's activities. It can also probe a
// node locally without Temporal, and hosts the flip's watchdog.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adopt-worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfgPath string
	root := &cobra.Command{
		Use:           "adopt-worker",
		Short:         "adoption's Temporal worker: the orchestrator (orchestrate) or a node agent (run)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file (default $ADOPT_CONFIG)")
	root.AddCommand(
		runCommand(ctx, &cfgPath, stderr),
		orchestrateCommand(ctx, &cfgPath, stderr),
		probeCommand(ctx, &cfgPath, stdout, stderr),
		watchdogCommand(ctx, &cfgPath, stderr),
		briefCommand(ctx, &cfgPath, stdout, stderr),
		codecServerCommand(ctx, &cfgPath, stderr),
	)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
