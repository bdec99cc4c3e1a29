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
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/buildinfo"
	"adoption/config"
	"adoption/connect"
	"adoption/containers"
	"adoption/containers/cutover"
	"adoption/containers/hold"
	"adoption/containers/steer"
	"adoption/custody"
	"adoption/failpoint"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
	"adoption/firewall/marks"
	"adoption/firewall/nft"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/units"
	"adoption/watchdog"
	"adoption/worker/gctarget"
	"adoption/workflows"
)

func runCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "run",
		Example: "  adopt-worker run --config /etc/adoption/node.yaml",
		Short:   "Run this node's activities (task queue adoption-node-<node>); the workflows run in `adopt-worker orchestrate`",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadNodeConfig(*cfgPath)
			if err != nil {
				return err
			}
			gctarget.TuneGC(os.Getenv)
			// First, before Temporal is dialled (a flip may be what cut
			// the node off from it): a flip awaiting confirmation gets its
			// watchdog back.
			state := nodestate.New(cfg.Node.StateDir)
			wlog, err := watchdogLog(cfg, stderr)
			if err != nil {
				return err
			}
			if err := watchdog.Rearm(state, func() error { return startWatchdog(cfg, *cfgPath) }, wlog); err != nil {
				return err
			}
			// A converged node keeps the mesh's table, Temporal or not.
			go watchdog.Guard(ctx, watchdog.GuardOptions{Records: state, Converged: state.Converged,
				Table: flip.NewFlipper(cfg.Node.Netns), Every: cfg.Firewall.ReconcileInterval, Log: wlog})
			return serve(ctx, cfg, *cfgPath, stderr)
		},
	}
}

// nodeActivities builds the real node parts from the worker's local config.
func nodeActivities(cfg *config.Config, cfgPath string, stderr io.Writer) *activities.Activities {
	// docker.host names the node's engine (its own, on the reference node);
	// empty: DOCKER_HOST, else the local socket.
	engine := cutover.NewAt(cfg.Docker.EngineHost())
	// Hold a module's ports during its swap where the engine publishes
	// them, if that is the node's own namespace (never the host's firewall
	// when a node shares the host's engine).
	if ns, err := containers.EngineNetns(cfg.Docker.EngineHost()); err != nil {
		nodeLog(cfg, stderr).Warn("cutover: no port hold during swaps", "err", err)
	} else if same, err := containers.SameNetns(ns, cfg.Node.Netns); err != nil || !same {
		nodeLog(cfg, stderr).Warn("cutover: no port hold during swaps: the Docker engine does not run in the node's network namespace", "netns", cfg.Node.Netns)
	} else {
		engine.WithHold(hold.NewHold(cfg.Node.Netns, cfg.Node.Name)).WithSteer(steer.New(cfg.Node.Netns, cfg.Node.Name))
	}
	// A predecessor that is a system unit is handed over through systemd
	// on the system bus; a node whose PID 1 is not systemd names the
	// stand-in supervisor's socket instead (package units).
	var unitManager units.Manager = units.NewSystemd()
	if sock := os.Getenv(units.EnvSocket); sock != "" {
		unitManager = units.StandIn{Socket: sock}
	}
	// A predecessor run by no unit (replaces_exe): by its processes.
	unitManager = units.Router{Units: unitManager, Exes: units.Processes{Proc: sockets.Proc{Root: "/proc", Netns: cfg.Node.Netns}, Dir: cfg.Node.StateDir}}
	engine.WithUnits(unitManager)
	state := nodestate.New(cfg.Node.StateDir)
	files := custody.New(cfg.Node.Root, cfg.Node.StateDir)
	// A conflict of a module's value with its predecessor's names both by
	// the node's keyed digest, as custody names a file's content.
	engine.WithDigest(files.Digest)
	// The listing is kept for the next while the kernel holds the same
	// ruleset: the watch's checks and a preview after a probe list it once.
	inspector := eval.Inspector{Netns: cfg.Node.Netns, Engine: engine, Kept: &nft.Kept{}}
	return &activities.Activities{
		Node:     cfg.Node.Name,
		Firewall: inspector,
		Marks:    marks.NewMarker(cfg.Node.Netns),
		Engine:   engine,
		Cutover:  engine,
		Local:    localAuthority(cfgPath),
		Root:     cfg.Node.Root,
		Sockets:  sockets.Proc{Root: "/proc", Netns: cfg.Node.Netns},
		Units:    unitManager,
		Files:    files,
		State:    state,
		Flips:    state,
		// The flip tells Docker's bridge rules by the node the preview
		// judged them on: the engine's bridges, custom-named ones included.
		Flipper: flip.NewFlipper(cfg.Node.Netns).WithNode(inspector.Node),
		StartWatchdog: func() error {
			return startWatchdog(cfg, cfgPath)
		},
		Failpoints: failpoint.FromEnv(os.Getenv(failpoint.EnvVar)),
	}
}

// serve runs the node's activity worker until ctx ends. The node's own
// watch runs from before the first dial: while Temporal is out of reach the
// agent keeps it running and dials again (dialUntil), and once connected
// the SDK's worker retries lost polls by itself. Only a worker the SDK
// gives up on (OnFatalError: the namespace gone, the server refusing the
// client) ends it, for the unit to restart it.
func serve(ctx context.Context, cfg *config.Config, cfgPath string, stderr io.Writer) error {
	// The logger and /metrics first (a bad metrics.listen stops the start
	// with nothing running), then the start checks and the watch, then
	// Temporal.
	var acts *activities.Activities
	var loop *watch.Loop
	o, dial, err := agentOps(ctx, cfg, stderr, func(l *slog.Logger) error {
		if err := startChecks(cfg, cfgPath, l); err != nil {
			return err
		}
		acts = nodeActivities(cfg, cfgPath, stderr)
		loop = startLoop(ctx, cfg, acts, stderr)
		return nil
	})
	if err != nil {
		return err
	}
	defer o.stop()
	logger := o.log
	queue := workflows.NodeQueue(cfg.Node.Name)
	// Ready once the node is watched: a unit that waited for Temporal
	// would time out and restart the agent, its watch with it.
	ready(logger)
	notifyStatus(logger, "watching the node; dialling Temporal at "+cfg.Temporal.Address)
	c, err := dialUntil(ctx, dial, dialBackoff(), cfg.Temporal.Address, logger, func(n int, err error, next time.Duration) {
		notifyStatus(logger, fmt.Sprintf("watching the node; Temporal at %s out of reach (try %d: %v), next try in %s",
			cfg.Temporal.Address, n, err, next.Round(time.Second)))
	})
	if ctx.Err() != nil {
		stopping(logger)
		logger.Info("adopt-worker stopping", "temporal", "never reached")
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	// The flip in one round trip heartbeats through the agent's own client.
	acts.Temporal = c
	// It reads the witness's verdict from the workflow with the same
	// data converter (codec) as the client.
	if acts.Converter, err = connect.DataConverter(cfg.Temporal); err != nil {
		return err
	}
	// Activities only: no workflow poller (and no sticky queue) per node;
	// the workflows run in `adopt-worker orchestrate`.
	fatal := make(chan error, 1)
	node := worker.New(c, queue, worker.Options{DisableWorkflowWorker: true,
		Interceptors: []interceptor.WorkerInterceptor{loop.Interceptor()},
		OnFatalError: func(err error) { fatal <- err }})
	node.RegisterActivity(acts)
	node.RegisterActivity(&watch.Watcher{Loop: loop})
	if e, ok := acts.Cutover.(*cutover.Engine); ok {
		go followSteering(ctx, e, logger)
	}

	if err := node.Start(); err != nil {
		return fmt.Errorf("start node worker: %w", err)
	}
	defer node.Stop()
	o.dialled(true)
	logger.Info("adopt-worker running", "node", cfg.Node.Name, "temporal", cfg.Temporal.Address,
		"queue", queue, "version", buildinfo.Read().String())
	notifyStatus(logger, "watching the node; serving "+queue+" on Temporal at "+cfg.Temporal.Address)
	select {
	case <-ctx.Done():
	case err := <-fatal:
		o.dialled(false)
		return fmt.Errorf("the node's worker on Temporal at %s stopped: %w", cfg.Temporal.Address, err)
	}
	stopping(logger)
	logger.Info("adopt-worker stopping")
	return nil
}

// startLoop starts the node's own loop: reconcile and drift run in it,
// never while another activity runs, and the workflow's Watch hears only
// changes. It starts before Temporal is dialled, from the watch kept under
// state_dir, whose checks run at once and then on the watch's intervals,
// for as long as the agent runs: while Temporal is out of reach too.
func startLoop(ctx context.Context, cfg *config.Config, acts *activities.Activities, stderr io.Writer) *watch.Loop {
	state := nodestate.New(cfg.Node.StateDir)
	loop := &watch.Loop{Checks: activities.Checks{Activities: acts}, Records: state, Local: acts.Local, Store: state, Log: stderr}
	if loop.Resume(time.Now()) {
		loop.Cycle(ctx, time.Now())
	}
	go loop.Run(ctx)
	return loop
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

// followSteering keeps the ports that overlap cutovers steer pointed at
// their containers: at the start (the steering does not outlive a reboot)
// and every few seconds after (a restarted container may have another
// address). Only a change is written.
func followSteering(ctx context.Context, e *cutover.Engine, log *slog.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		moved, err := e.Resteer(ctx)
		if err != nil {
			log.Error("cutover: re-point the ports of overlapped modules", "err", err)
		}
		if len(moved) > 0 {
			log.Info("cutover: ports of overlapped modules pointed at their containers", "modules", moved)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
