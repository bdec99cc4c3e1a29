// adopt-worker is adoption's Temporal worker, in two roles: `orchestrate`
// runs the workflows (one orchestrator for the whole fleet), `run` runs on
// each node and executes only that node's activities. It can also probe a
// node locally without Temporal, and hosts the flip's watchdog.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"adoption/buildinfo"
	"adoption/config"
	"adoption/logging"
	"adoption/manpage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	// Under journald every line of the error is one entry at priority err.
	prefix := ""
	if os.Getenv(journalStreamEnv) != "" {
		prefix = fmt.Sprintf("<%d>", logging.Priority(slog.LevelError))
	}
	for i, line := range strings.Split("adopt-worker: "+err.Error(), "\n") {
		if i == 0 && exitStatus(err) == exitUsage {
			line += " (see adopt-worker --help)"
		}
		fmt.Fprintln(os.Stderr, prefix+line)
	}
	os.Exit(exitStatus(err))
}

// journalStreamEnv is set by systemd when stderr goes to the journal.
const journalStreamEnv = "JOURNAL_STREAM"

// logOptions are the logger's settings from cfg, with journald's
// priorities when stderr goes to the journal.
func logOptions(cfg *config.Config) logging.Options {
	return logging.Options{Format: cfg.Log.Format, Level: cfg.Log.Level, Journal: os.Getenv(journalStreamEnv) != ""}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfgPath string
	root := &cobra.Command{
		Use: "adopt-worker",
		Example: `  adopt-worker check --config /etc/adoption/node.yaml
  adopt-worker run --config /etc/adoption/node.yaml
  adopt-worker orchestrate --config /etc/adoption/orchestrator.yaml`,
		Short:         "adoption's Temporal worker: the orchestrator (orchestrate) or a node agent (run)",
		Version:       buildinfo.Read().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("adopt-worker {{.Version}}\n")
	root.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file (default $ADOPT_CONFIG)")
	root.AddCommand(
		runCommand(ctx, &cfgPath, stderr),
		orchestrateCommand(ctx, &cfgPath, stderr),
		probeCommand(ctx, &cfgPath, stdout, stderr),
		watchdogCommand(ctx, &cfgPath, stderr),
		briefCommand(ctx, &cfgPath, stdout, stderr),
		codecServerCommand(ctx, &cfgPath, stderr),
		checkCommand(ctx, &cfgPath, stdout, stderr),
		ownCommand(ctx, &cfgPath, stdout),
		manpage.Command(),
	)
	markUsage(root)
	withExitCodes(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
