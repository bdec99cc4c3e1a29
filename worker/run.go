// `adopt-worker run`: the node agent. It polls only its node's own task
// queue (adoption-node-<node>) for activities; it runs no workflow code, so
// a thousand agents are a thousand activity pollers and nothing more, and
// upgrading them never mixes workflow code.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/worker"

	"adoption/activities"
	"adoption/config"
	"adoption/connect"
	"adoption/containers"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/firewall"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/workflows"
)

func runCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run this node's activities (task queue adoption-node-<node>); the workflows run in `adopt-worker orchestrate`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(*cfgPath)
			if err != nil {
				return err
			}
			return serve(ctx, cfg, *cfgPath, stderr)
		},
	}
}

// nodeActivities builds the real node parts from the worker's local config.
func nodeActivities(cfg *config.Config, cfgPath string, stderr io.Writer) *activities.Activities {
	engine := containers.New()
	state := nodestate.New(cfg.Node.StateDir)
	return &activities.Activities{
		Node:     cfg.Node.Name,
		Firewall: firewall.Inspector{Netns: cfg.Node.Netns},
		Marks:    firewall.NewMarker(cfg.Node.Netns),
		Engine:   engine,
		Cutover:  engine,
		Contents: cfg.Contents(),
		Sockets:  sockets.Proc{Root: "/proc", Netns: cfg.Node.Netns},
		Files:    custody.New(cfg.Node.Root, cfg.Node.StateDir),
		State:    state,
		Flips:    state,
		Flipper:  firewall.NewFlipper(cfg.Node.Netns),
		StartWatchdog: func() error {
			return startWatchdog(cfgPath, filepath.Join(cfg.Node.StateDir, "watchdog.log"))
		},
		Failpoints: failpoint.FromEnv(os.Getenv(failpoint.EnvVar)),
		LoadPlan: func() (config.Plan, error) {
			c, err := config.Load(cfgPath)
			if err != nil {
				return config.Plan{}, err
			}
			return c.Plan(), nil
		},
	}
}

// serve runs the node's activity worker until ctx ends.
func serve(ctx context.Context, cfg *config.Config, cfgPath string, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := connect.Dial(cfg.Temporal, logger)
	if err != nil {
		return err
	}
	defer c.Close()

	// Activities only: no workflow poller (and no sticky queue) per node.
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
	if err := node.Start(); err != nil {
		return fmt.Errorf("start node worker: %w", err)
	}
	defer node.Stop()
	logger.Info("adopt-worker running", "node", cfg.Node.Name, "temporal", cfg.Temporal.Address,
		"queue", workflows.NodeQueue(cfg.Node.Name))
	<-ctx.Done()
	logger.Info("adopt-worker stopping")
	return nil
}

// startWatchdog starts `adopt-worker watchdog` detached (its own session),
// so that it outlives this worker: a worker killed after the flip must not
// take the way back with it.
func startWatchdog(cfgPath, logPath string) error {
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
