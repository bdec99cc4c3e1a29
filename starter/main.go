// adopt is the operator's CLI: it starts a node's migration workflow, shows
// status, and sends the requests (migrate, retry, preview, flip, release).
// main is wiring: each command lives in its own file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"adoption/buildinfo"
	"adoption/config"
	"adoption/manpage"
	"adoption/output"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit code; errors are
// printed here, on stderr, as text or, with --json, as a JSON object (so
// stdout holds a result document or nothing).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return (&cli{stdout: stdout, stderr: stderr}).execute(ctx, args)
}

// execute is run on a given cli: a test hands it one whose client is
// already set (a fake), and nothing is dialled.
func (x *cli) execute(ctx context.Context, args []string) int {
	defer func() {
		if x.c != nil {
			x.c.Close()
		}
	}()
	root := &cobra.Command{
		Use:   "adopt",
		Short: "Migrate a machine in use onto the mesh, one node and one module at a time",
		Long: `adopt drives each node's migration workflow on Temporal: start, status,
the requests (migrate, retry, flip, release, prune, drift accept), preview and wait.

A request is delivered or the CLI says so within seconds: it is sent only
when a worker serves the node's workflow, and it counts only once the
workflow has accepted it. A request reported as not delivered never runs
later. A request the workflow refuses exits 2 with the reasons.

Temporal client settings, highest precedence first: --address/--namespace,
TEMPORAL_ADDRESS/TEMPORAL_NAMESPACE/TEMPORAL_TLS_*, the Temporal profile
(--profile or TEMPORAL_PROFILE, in TEMPORAL_CONFIG_FILE), the node
configuration's temporal.*, then 127.0.0.1:7233 and namespace default.

` + exitCodesHelp,
		Example: `  adopt start n1 --config n1.yaml
  adopt status --phase adopted
  adopt migrate n1 mail --config n1.yaml -o json`,
		// Runnable, so that rootArgs decides an unknown command; alone, it
		// prints the help, as cobra does for a command that does not run.
		Args:          rootArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		Version:       buildinfo.Read().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("adopt {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&x.cfgPath, "config", "", "the node's configuration file (default $ADOPT_CONFIG)")
	pf.StringVar(&x.uiURL, "ui", "", "Temporal Web UI address, for links (default $ADOPT_UI, else "+defaultUI+")")
	x.out.Register(pf)
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(output.Formats, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if x.sign.ttl != 0 {
			// The flag stands in for operator.intent_ttl: the same bounds.
			if err := config.CheckDuration("operator.intent_ttl", x.sign.ttl); err != nil {
				return usagef("--intent-ttl %s: %v", x.sign.ttl, err)
			}
		}
		return x.setOutput()
	}
	pf.StringVar(&x.flags.Address, "address", "", "Temporal frontend HOST:PORT (overrides TEMPORAL_ADDRESS and temporal.address)")
	pf.StringVar(&x.flags.Namespace, "namespace", "", "Temporal namespace (overrides TEMPORAL_NAMESPACE and temporal.namespace)")
	pf.StringVar(&x.flags.Profile, "profile", "", "profile of the Temporal config file (default $TEMPORAL_PROFILE, then \"default\")")
	pf.DurationVar(&x.accept, "accept-timeout", 10*time.Second, "how long a request may take to be accepted by the node's workflow before it is reported as not delivered")
	pf.StringVar(&x.sign.key, "sign-key", "", "the operator's private key file to sign requests with, or a .pub naming the ssh-agent key (default operator.sign_key, then ssh-agent)")
	pf.DurationVar(&x.sign.ttl, "intent-ttl", 0, "how long a signed request is valid (default operator.intent_ttl, 30m; a fleet's operator.fleet_intent_ttl, 12h; at most 24h)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })

	root.AddCommand(
		x.startCommand(ctx),
		x.statusCommand(ctx),
		x.previewCommand(ctx),
		x.migrateCommand(ctx),
		x.retryCommand(ctx),
		x.flipCommand(ctx),
		x.releaseCommand(ctx),
		x.pruneCommand(ctx),
		x.driftCommand(ctx),
		x.waitCommand(ctx),
		x.fleetCommand(ctx),
		x.briefCommand(ctx),
		x.resolveCommand(ctx),
		x.signCommand(ctx),
		manpage.Command(),
	)
	x.withCompletions(ctx, root)
	root.SetArgs(args)
	root.SetOut(x.stdout)
	root.SetErr(x.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	if alreadyShown(err) {
		return code
	}
	if !x.asJSON && code == exitUsage {
		// The flags may not have parsed: --json still asks for JSON.
		x.asJSON = output.AsksJSON(args)
	}
	if x.asJSON {
		_ = x.writeJSON(x.stderr, jsonError{Error: err.Error(), Kind: exitKind(code), ExitCode: code, Reasons: reasonsOf(err)})
	} else {
		fmt.Fprintln(x.stderr, "adopt:", err)
		for _, r := range reasonsOf(err) {
			fmt.Fprintln(x.stderr, wrapLine("  - ", r, termWidth()))
		}
		if code == exitUsage {
			fmt.Fprintln(x.stderr, "(see `adopt --help` or `adopt COMMAND --help`)")
		}
	}
	return code
}

// jsonError is what every command prints under --json when it fails.
type jsonError struct {
	Error    string   `json:"error"`
	Kind     string   `json:"kind"` // the code's kind in exitCodes
	ExitCode int      `json:"exit_code"`
	Reasons  []string `json:"reasons,omitempty"`
}

// defaultUI is the Web UI's address when neither --ui nor $ADOPT_UI says:
// the dev server's.
const defaultUI = "http://127.0.0.1:8233"

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
