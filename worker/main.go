// adopt-worker runs on each node: it polls the workflow queue and its own
// node's queue, and it can probe the node locally without Temporal.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/activities"
	"adoption/config"
	"adoption/containers"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/firewall"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/watchdog"
	"adoption/workflows"
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
		Short:         "The node agent of adoption: runs the node's activities",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&cfgPath, "config", "", "configuration file (default $ADOPT_CONFIG)")

	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Poll Temporal for this node's workflows and activities",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			// First, before Temporal is dialled (a flip may be what cut
			// the node off from it): a flip awaiting confirmation gets its
			// watchdog back.
			state := nodestate.New(cfg.Node.StateDir)
			wlog, err := watchdogLog(cfg, stderr)
			if err != nil {
				return err
			}
			if err := watchdog.Rearm(state, func() error { return startWatchdog(cfg, cfgPath) }, wlog); err != nil {
				return err
			}
			// A converged node keeps the mesh's table, Temporal or not.
			go watchdog.Guard(ctx, watchdog.GuardOptions{Records: state, Converged: state.Converged,
				Table: firewall.NewFlipper(cfg.Node.Netns), Every: cfg.Firewall.ReconcileInterval, Log: wlog})
			return serve(ctx, cfg, cfgPath, stderr)
		},
	}

	var asJSON bool
	probeCmd := &cobra.Command{
		Use:   "probe",
		Short: "Probe the node read-only, without Temporal, and print what was found",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			r, err := nodeActivities(cfg, cfgPath, stderr).Probe(ctx, activities.ProbeInput{Plan: cfg.Plan()})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			printProbe(stdout, r)
			return nil
		},
	}
	probeCmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (stable, for scripts)")

	watchCmd := &cobra.Command{
		Use:   "watchdog",
		Short: "Revert the current flip unless it is confirmed by its deadline (started by the flip itself)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			log, err := watchdogLog(cfg, stderr)
			if err != nil {
				return err
			}
			state := nodestate.New(cfg.Node.StateDir)
			fw := firewall.NewFlipper(cfg.Node.Netns)
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
	root.AddCommand(runCmd, probeCmd, watchCmd, briefCommand(ctx, &cfgPath, stdout, stderr))
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

// nodeActivities builds the real node parts from the worker's local config.
func nodeActivities(cfg *config.Config, cfgPath string, stderr io.Writer) *activities.Activities {
	// docker.host names the node's engine (its own, on the reference node);
	// empty: DOCKER_HOST, else the local socket.
	engine := containers.NewAt(cfg.Docker.EngineHost())
	// Hold a module's ports during its swap where the engine publishes
	// them, if that is the node's own namespace (never the host's firewall
	// when a node shares the host's engine).
	if ns, err := containers.EngineNetns(cfg.Docker.EngineHost()); err != nil {
		nodeLog(cfg, stderr).Warn("cutover: no port hold during swaps", "err", err)
	} else if same, err := containers.SameNetns(ns, cfg.Node.Netns); err != nil || !same {
		nodeLog(cfg, stderr).Warn("cutover: no port hold during swaps: the Docker engine does not run in the node's network namespace", "netns", cfg.Node.Netns)
	} else {
		engine.WithHold(firewall.NewHold(cfg.Node.Netns, cfg.Node.Name))
	}
	state := nodestate.New(cfg.Node.StateDir)
	return &activities.Activities{
		Node:     cfg.Node.Name,
		Firewall: firewall.Inspector{Netns: cfg.Node.Netns},
		Marks:    firewall.NewMarker(cfg.Node.Netns),
		Engine:   engine,
		Cutover:  engine,
		Local:    localAuthority(cfgPath),
		Root:     cfg.Node.Root,
		Sockets:  sockets.Proc{Root: "/proc", Netns: cfg.Node.Netns},
		Files:    custody.New(cfg.Node.Root, cfg.Node.StateDir),
		State:    state,
		Flips:    state,
		Flipper:  firewall.NewFlipper(cfg.Node.Netns),
		StartWatchdog: func() error {
			return startWatchdog(cfg, cfgPath)
		},
		Failpoints: failpoint.FromEnv(os.Getenv(failpoint.EnvVar)),
	}
}

// serve runs two workers on one client: the shared workflow queue, and the
// node's own queue for activities that touch this node.
func serve(ctx context.Context, cfg *config.Config, cfgPath string, stderr io.Writer) error {
	o, c, err := dialAgent(ctx, cfg, stderr, func(l *slog.Logger) error { return startChecks(cfg, cfgPath, l) })
	if err != nil {
		return err
	}
	defer o.stop()
	logger := o.log
	if err != nil {
		return err
	}
	defer c.Close()

	wf := worker.New(c, workflows.TaskQueue, worker.Options{})
	wf.RegisterWorkflowWithOptions(workflows.NodeMigration, workflow.RegisterOptions{Name: workflows.NodeWorkflow})
	wf.RegisterWorkflowWithOptions(workflows.Fleet, workflow.RegisterOptions{Name: workflows.FleetWorkflow})
	// The node's queue carries activities only: no workflow poller (and no
	// sticky queue) per node, which at a thousand nodes matters.
	node := worker.New(c, workflows.NodeQueue(cfg.Node.Name), worker.Options{DisableWorkflowWorker: true})
	node.RegisterActivity(nodeActivities(cfg, cfgPath, stderr))

	if err := wf.Start(); err != nil {
		return fmt.Errorf("start workflow worker: %w", err)
	}
	defer wf.Stop()
	if err := node.Start(); err != nil {
		return fmt.Errorf("start node worker: %w", err)
	}
	defer node.Stop()
	logger.Info("adopt-worker running", "node", cfg.Node.Name, "temporal", cfg.Temporal.Address,
		"queues", []string{workflows.TaskQueue, workflows.NodeQueue(cfg.Node.Name)})
	<-ctx.Done()
	logger.Info("adopt-worker stopping")
	return nil
}

// startWatchdog starts `adopt-worker watchdog` as a process of its own
// (watchdog.StartDetached), so that it outlives this worker; under the
// systemd units (ADOPT_WATCHDOG_UNIT), as the watchdog's own unit.
func startWatchdog(cfg *config.Config, cfgPath string) error {
	if unit := os.Getenv(watchdogUnitEnv); unit != "" {
		return startWatchdogUnit(unit)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"watchdog"}
	if cfgPath != "" {
		args = append(args, "--config", cfgPath)
	}
	if err := nodestate.New(cfg.Node.StateDir).Ensure(); err != nil {
		return err
	}
	return watchdog.StartDetached(watchdog.Command{Path: self, Args: args, Log: filepath.Join(cfg.Node.StateDir, "watchdog.log")})
}

// ownerText says who owns a table or chain: "predecessor", "foreign
// (docker)", "mesh", "shared".
func ownerText(o firewall.Ownership) string {
	if o.Tool != "" {
		return string(o.Owner) + " (" + o.Tool + ")"
	}
	return string(o.Owner)
}

func printProbe(w io.Writer, r *activities.ProbeReport) {
	fmt.Fprintf(w, "node %s, probed %s\n", r.Node, r.At.Format("2006-01-02 15:04:05Z"))
	fmt.Fprintf(w, "firewall: %s", r.Firewall.Kind)
	if r.Firewall.Unsupported != "" {
		fmt.Fprintf(w, " (UNSUPPORTED: %s)", r.Firewall.Unsupported)
	}
	if r.Firewall.Error != "" {
		fmt.Fprintf(w, " (error: %s)", r.Firewall.Error)
	}
	fmt.Fprintln(w)
	for _, t := range r.Firewall.Tables {
		fmt.Fprintf(w, "  table %s %s: %d chains, %s\n", t.Family, t.Name, len(t.Chains), ownerText(t.Ownership))
		for _, c := range t.Chains {
			if c.Ownership != t.Ownership {
				fmt.Fprintf(w, "    chain %s: %s\n", c.Name, ownerText(c.Ownership))
			}
		}
	}
	if r.Firewall.NodeError != "" {
		fmt.Fprintf(w, "  (%s)\n", r.Firewall.NodeError)
	}
	fmt.Fprintf(w, "open ports: %d\n", len(r.Firewall.Open))
	for _, o := range r.Firewall.Open {
		port := fmt.Sprint(o.Port)
		if o.PortEnd != 0 {
			port = fmt.Sprintf("%d-%d", o.Port, o.PortEnd)
		}
		extra := ""
		if o.From != "" {
			extra += " from " + o.From
		}
		if o.Via != "" {
			extra += " -> " + o.Via
		}
		if o.Uncertain {
			extra += " (uncertain)"
		}
		if o.Reason != "" {
			extra += ": " + o.Reason
		}
		fmt.Fprintf(w, "  %-6s %s/%s %s%s\n", o.Family, port, o.Proto, o.Direction, extra)
	}
	fmt.Fprintf(w, "listeners: %d\n", len(r.Sockets))
	for _, l := range r.Sockets {
		fmt.Fprintf(w, "  %s %s:%d  %s\n", l.Proto, l.Addr, l.Port, l.Holder())
	}
	if r.Containers.Available {
		fmt.Fprintf(w, "containers: %d\n", len(r.Containers.Containers))
	} else {
		fmt.Fprintf(w, "containers: UNKNOWN (%s)\n", r.Containers.Error)
	}
	fmt.Fprintf(w, "declared files: %d\n", len(r.Files))
	for _, f := range r.Files {
		state := "absent"
		if f.Exists {
			state = fmt.Sprintf("%d bytes, mode %s, uid %d, digest %.12s", f.Size, f.Mode, f.UID, strings.TrimPrefix(f.Digest, "hmac-sha256:"))
			if f.Link != "" {
				state = fmt.Sprintf("symlink -> %s, uid %d", f.Link, f.UID)
			}
		}
		if f.Error != "" {
			state = "error: " + f.Error
		}
		fmt.Fprintf(w, "  %s: %s\n", f.Path, state)
	}
	fmt.Fprintf(w, "predecessor control daemons running: %d\n", len(r.Control))
	for _, p := range r.Control {
		fmt.Fprintf(w, "  pid %d %s\n", p.PID, p.Exe)
	}
	fmt.Fprintf(w, "adopted marker: %v\n", r.Adopted)
}
