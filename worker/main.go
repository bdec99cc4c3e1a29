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
	"os/exec"
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
			return watchdog.Run(ctx, watchdog.Options{
				Records: state,
				Revert:  func(rec *nodestate.FlipRecord) error { return activities.RevertRecord(rec, fw, files) },
				Log:     log,
			})
		},
	}
	root.AddCommand(runCmd, probeCmd, watchCmd)
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
	state := nodestate.New(cfg.Node.StateDir)
	return &activities.Activities{
		Node:     cfg.Node.Name,
		Firewall: firewall.Inspector{Netns: cfg.Node.Netns},
		Marks:    firewall.NewMarker(cfg.Node.Netns),
		Engine:   engine,
		Cutover:  engine,
		Local:    localAuthority(cfgPath),
		Sockets:  sockets.Proc{Root: "/proc", Netns: cfg.Node.Netns},
		Files:    custody.New(cfg.Node.Root, cfg.Node.StateDir),
		State:    state,
		Flips:    state,
		Flipper:  firewall.NewFlipper(cfg.Node.Netns),
		StartWatchdog: func() error {
			return startWatchdog(cfgPath, filepath.Join(cfg.Node.StateDir, "watchdog.log"))
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

	// A flip waiting for its confirmation must keep its watchdog even if
	// the one started with it died with a previous worker (a container's
	// processes all end with it): start one again. Two watchdogs are safe:
	// they take the flip lock in turn and the second finds it handled.
	if rec, err := nodestate.New(cfg.Node.StateDir).Flip(); err == nil && rec != nil &&
		(rec.State == nodestate.FlipApplying || rec.State == nodestate.FlipFlipped) {
		if err := startWatchdog(cfgPath, filepath.Join(cfg.Node.StateDir, "watchdog.log")); err != nil {
			return fmt.Errorf("restart the watchdog of pending flip %s: %w", rec.ID, err)
		}
		logger.Warn("restarted the watchdog of a flip awaiting confirmation", "flip", rec.ID, "deadline", rec.Deadline)
	}
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

// startWatchdog starts `adopt-worker watchdog` detached (its own session),
// so that it outlives this worker: a worker killed after the flip must not
// take the way back with it.
func startWatchdog(cfgPath, logPath string) error {
	if unit := os.Getenv(watchdogUnitEnv); unit != "" {
		return startWatchdogUnit(unit)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"watchdog"}
	if cfgPath != "" {
		args = append(args, "--config", cfgPath)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reaped while this worker lives; init adopts it otherwise
	return nil
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
		fmt.Fprintf(w, "  table %s %s: %d chains\n", t.Family, t.Name, len(t.Chains))
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
		if o.Uncertain {
			extra += " (uncertain)"
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
