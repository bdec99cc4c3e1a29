// This file sets up what every long-running adopt-worker command shares for
// being operated: the one slog logger (log.format) and, when metrics.listen
// is set, the /metrics endpoint, bound before Temporal is dialled so that a
// bad address stops the start with nothing else running, and which says
// while the agent waits for Temporal (adoption_temporal_dialled).
package main

import (
	"context"
	"io"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"adoption/activities/observe"
	"adoption/config"
	"adoption/connect"
	"adoption/logging"
	"adoption/metrics"
	"adoption/nodestate"
	"adoption/workflows"
)

type ops struct {
	log     *slog.Logger     // carries node=<name> when the process works for a node
	metrics *metrics.Metrics // nil when metrics.listen is empty
	stop    func()
}

// setupOps builds the logger and the metrics endpoint for node ("" for a
// process that is no node's, the orchestrator).
func setupOps(ctx context.Context, cfg *config.Config, node string, stderr io.Writer) (*ops, error) {
	log, err := logging.New(stderr, logOptions(cfg))
	if err != nil {
		return nil, err
	}
	if node != "" {
		log = log.With("node", node)
	}
	o := &ops{log: log, stop: func() {}}
	if len(cfg.Temporal.Key) == 0 { // once, however often the process dials
		o.log.Warn(connect.NoCodecWarning)
	}
	if cfg.Metrics.Listen == "" {
		return o, nil
	}
	if o.metrics, err = metrics.New(node, log, metrics.WithHelp(workflows.PhaseMetric, phaseHelp)); err != nil {
		return nil, err
	}
	if o.stop, err = o.metrics.Listen(ctx, cfg.Metrics.Listen, log); err != nil {
		return nil, err
	}
	return o, nil
}

// phaseHelp is adoption_phase's HELP: the workflows set it, the
// orchestrator re-emits it at start (phases.go).
const phaseHelp = "1 for each node's current phase (labels node, phase), 0 for a phase it left; re-emitted from visibility when the orchestrator starts."

// recorder is where activities report adoption_* series.
func (o *ops) recorder() metrics.Recorder {
	if o.metrics == nil {
		return metrics.Nop{}
	}
	return o.metrics.Recorder()
}

// onScrape refreshes series that another process changes (the flip record,
// which the watchdog writes) each time /metrics is read.
func (o *ops) onScrape(f func()) {
	if o.metrics != nil {
		o.metrics.OnScrape(f)
	}
}

// dial connects to Temporal with the SDK logging through the same logger,
// its metrics into the same registry, and the given interceptors.
func (o *ops) dial(ctx context.Context, tc config.Temporal, is ...interceptor.ClientInterceptor) (client.Client, error) {
	opts := []connect.Option{connect.WithInterceptors(is...)}
	if o.metrics != nil {
		opts = append(opts, connect.WithMetrics(o.metrics.SDK()))
	}
	return connect.Dial(ctx, tc, o.log, opts...)
}

// dialled says on /metrics whether the agent has reached Temporal.
func (o *ops) dialled(ok bool) {
	if o.metrics != nil {
		o.metrics.Dialled(ok)
	}
}

// agentOps is the node agent's set-up: its logger and metrics, then the
// agent's own start checks (with that logger), then how it dials a client
// whose workers report activities (adoption_*, node/module/step log lines)
// and workflows (adoption_phase). On error nothing keeps running.
func agentOps(ctx context.Context, cfg *config.Config, stderr io.Writer, checks func(*slog.Logger) error) (*ops, dialer, error) {
	o, err := setupOps(ctx, cfg, cfg.Node.Name, stderr)
	if err != nil {
		return nil, nil, err
	}
	if err := checks(o.log); err != nil {
		o.stop()
		return nil, nil, err
	}
	obs := observe.New(o.recorder(), nodestate.New(cfg.Node.StateDir), o.log)
	obs.ObserveFlip()
	o.onScrape(obs.ObserveFlip)
	o.dialled(false)
	return o, func(ctx context.Context) (client.Client, error) {
		return o.dial(ctx, cfg.Temporal, obs, workflows.Observe())
	}, nil
}

// dialOrchestrator is the same for the workflow worker, which is no node's:
// its lines carry no node of their own (the workflows' do), its metrics
// are the SDK's and adoption_phase.
func dialOrchestrator(ctx context.Context, cfg *config.Config, stderr io.Writer) (*ops, client.Client, error) {
	o, err := setupOps(ctx, cfg, "", stderr)
	if err != nil {
		return nil, nil, err
	}
	c, err := o.dial(ctx, cfg.Temporal, workflows.Observe())
	if err != nil {
		o.stop()
		return nil, nil, err
	}
	return o, c, nil
}

// watchdogLog is where the watchdog writes its lines: the same logger, with
// the node, one record per line.
func watchdogLog(cfg *config.Config, stderr io.Writer) (io.Writer, error) {
	log, err := logging.New(stderr, logOptions(cfg))
	if err != nil {
		return nil, err
	}
	return logging.Lines(log.With("node", cfg.Node.Name), slog.LevelInfo, "watchdog: "), nil
}

// nodeLog is the node's logger for code that runs before the agent's set-up
// (the node's parts being built); the format was validated with the
// configuration, so text is only a fallback.
func nodeLog(cfg *config.Config, stderr io.Writer) *slog.Logger {
	log, err := logging.New(stderr, logOptions(cfg))
	if err != nil {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	return log.With("node", cfg.Node.Name)
}
