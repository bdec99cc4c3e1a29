// `adopt-worker check`: everything about a configuration that can be
// checked without acting (as `sshd -t` and `promtool check config` do):
// the file itself, the Temporal client settings it dials with (TLS files,
// the codec key, plain text refused) and, for a node, the paths it names.
// Every problem at once; exit 0 or 78. The units run it as ExecStartPre=.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"adoption/config"
	"adoption/connect"
	"adoption/nodestate"
	"adoption/timefmt"
)

func checkCommand(_ context.Context, cfgPath *string, stdout, stderr io.Writer) *cobra.Command {
	var orchestrator bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check a configuration without acting: the file, its Temporal settings, the node's paths",
		Long: `Checks everything about a configuration that can be checked without acting:
every key and value (as the agent loads them), the Temporal client settings it
would dial with (TLS files read and parsed, the codec key, plain text to a
non-loopback address refused; Temporal itself is not dialled), and for a node
that node.root is a directory, node.netns exists and node.state_dir is (or can
be) a directory. Every problem is listed at once. Nothing is changed.

A node whose flip awaits confirmation exits 0 on a problem that is not in the
file itself, saying so: the agent must start to re-arm the flip's watchdog.`,
		Example: `  adopt-worker check --config /etc/adoption/node.yaml
  adopt-worker check --orchestrator --config /etc/adoption/orchestrator.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return check(*cfgPath, orchestrator, stdout, stderr)
		},
	}
	cmd.Flags().BoolVar(&orchestrator, "orchestrator", false, "check the orchestrator's file (temporal.*, metrics.*, log.*) rather than a node's")
	return cmd
}

func check(path string, orchestrator bool, stdout, stderr io.Writer) error {
	var cfg *config.Config
	var err error
	if orchestrator {
		cfg, err = loadConfig(path, config.OrchestratorDefaults())
	} else {
		cfg, err = loadNodeConfig(path)
	}
	if err != nil {
		return err
	}
	source := configSource(path)
	var problems []string
	t, err := connect.Resolve(connect.Flags{}, &cfg.Temporal, "temporal.* of "+source)
	if err == nil {
		err = t.Check()
	}
	if err != nil {
		problems = append(problems, err.Error())
	}
	if !orchestrator {
		problems = append(problems, nodePaths(cfg.Node)...)
	}
	if len(problems) > 0 {
		ve := &config.ValidationError{Source: source, Problems: problems}
		if rec, rerr := nodestate.New(cfg.Node.StateDir).Flip(); !orchestrator && rerr == nil && rec.Pending() {
			fmt.Fprintf(stderr, "adopt-worker: %v\nadopt-worker: flip %s awaits confirmation (deadline %s): exiting 0 so that the agent starts and re-arms its watchdog; fix the above\n",
				ve, rec.ID, timefmt.Format(rec.Deadline, false))
			return nil
		}
		return configError{ve}
	}
	if orchestrator {
		fmt.Fprintf(stdout, "%s: ok: the orchestrator's configuration; Temporal at %s (from %s), namespace %s\n", source, t.Address, t.AddrFrom, t.Namespace)
		return nil
	}
	fmt.Fprintf(stdout, "%s: ok: node %s (%s), %d module(s); Temporal at %s (from %s), namespace %s\n",
		source, cfg.Node.Name, cfg.Node.Role, len(cfg.Modules), t.Address, t.AddrFrom, t.Namespace)
	return nil
}

// nodePaths are the problems of the paths a node's file names, as they
// are on this host now: what the agent would fail on at its first step.
func nodePaths(n config.Node) []string {
	var out []string
	if fi, err := os.Stat(n.Root); err != nil || !fi.IsDir() {
		out = append(out, fmt.Sprintf("node.root: %q is not a directory on this host (%s); every declared path lives under it", n.Root, statWhy(err)))
	}
	if n.Netns != "" {
		if _, err := os.Stat(n.Netns); err != nil {
			out = append(out, fmt.Sprintf("node.netns: %q does not exist on this host (%v); create the namespace (ip netns add) or leave node.netns empty for the agent's own", n.Netns, err))
		}
	}
	if fi, err := os.Stat(n.StateDir); err == nil && !fi.IsDir() {
		out = append(out, fmt.Sprintf("node.state_dir: %q is not a directory", n.StateDir))
	} else if errors.Is(err, os.ErrNotExist) {
		if fi, perr := os.Stat(parentDir(n.StateDir)); perr != nil || !fi.IsDir() {
			out = append(out, fmt.Sprintf("node.state_dir: %q does not exist and its parent is not a directory, so the agent cannot create it", n.StateDir))
		}
	}
	return out
}

func statWhy(err error) string {
	if err == nil {
		return "it is a file"
	}
	return err.Error()
}

func parentDir(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
