// `adopt-worker orchestrate`: the one process that runs workflow code
// (NodeMigration and Fleet) on task queue `adoption`, as a version of the
// Worker Deployment `adoption`. It runs no node activity: every step that
// touches a node goes to that node's own agent (`adopt-worker run`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"golang.org/x/crypto/ssh"

	"adoption/buildinfo"
	"adoption/config"
	"adoption/connect"
	"adoption/intent"
	"adoption/replaycheck"
	"adoption/witness"
	"adoption/workflows"
	"adoption/workflows/fleet"
	"adoption/workflows/fleet/relay"
)

func orchestrateCommand(ctx context.Context, cfgPath *string, stderr io.Writer) *cobra.Command {
	var id, pollers, witnessKey string
	var makeCurrent bool
	cmd := &cobra.Command{
		Use: "orchestrate",
		Example: `  adopt-worker orchestrate --config /etc/adoption/orchestrator.yaml
  adopt-worker orchestrate --make-current   # an upgrade: this build takes the workflows over`,
		Short: "Run the adoption workflows (task queue adoption) as a version of Worker Deployment adoption",
		Long: `Runs the workflow worker: every node's NodeMigration and every Fleet, for the
whole fleet. It needs only the temporal.* settings (a configuration file, or
ADOPT_TEMPORAL_ADDRESS / ADOPT_TEMPORAL_NAMESPACE / ADOPT_TEMPORAL_TLS_*), over which
Temporal's own TEMPORAL_* environment and profile apply, API keys included.

By default it makes its build the deployment's current version only when the
deployment has none yet (its first orchestrator): a restarted old build must
never take the workflows back from a newer one. An upgrade says so:
--make-current makes this build current, replacing the current one, once the
server has seen it poll, and new workflows and the running ones
(AutoUpgrade) move to it. Before making itself current it replays the
history of every open workflow that would move; if one does not replay, it
exits non-zero, registered but not current (docs/fleet.md). With
--make-current=false it only registers and polls; promote it later with
  temporal worker deployment set-current-version --deployment-name adoption --build-id ID`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The orchestrator is no node: a file, when given, is read only for
			// its temporal.* section.
			cfg, err := loadConfig(*cfgPath, config.OrchestratorDefaults())
			if err != nil {
				return err
			}
			if id == "" {
				if id, err = buildinfo.Read().BuildID(); err != nil {
					return fmt.Errorf("cannot derive the build ID (%v): pass --build-id", err)
				}
			}
			mode := promoteFirst
			if cmd.Flags().Changed("make-current") {
				mode = promoteNever
				if makeCurrent {
					mode = promoteAlways
				}
			}
			pb, err := pollerBehavior(pollers)
			if err != nil {
				return usageError{err}
			}
			var signer ssh.Signer
			if witnessKey != "" {
				if signer, err = intent.SignerFromFile(witnessKey); err != nil {
					return configError{fmt.Errorf("--witness-key (%s): %w", witnessKeyEnv, err)}
				}
			}
			return orchestrate(ctx, cfg, id, mode, pb, signer, stderr)
		},
	}
	cmd.Flags().StringVar(&witnessKey, "witness-key", os.Getenv(witnessKeyEnv), "the witness's private SSH key (ed25519, unencrypted): it signs each flip's verdict, and the nodes list its public half in flip.witness.key (env "+witnessKeyEnv+")")
	cmd.Flags().StringVar(&pollers, "workflow-pollers", "2", "workflow-task long polls kept open: a number, or auto (scaled by the server's feedback, 2 to 16)")
	cmd.Flags().StringVar(&id, "build-id", "", "this build's ID in Worker Deployment adoption (default: the version stamped by make build; a build from a modified tree adds a hash of the executable)")
	cmd.Flags().BoolVar(&makeCurrent, "make-current", false, "make this build the deployment's current version at startup, replacing the current one (an upgrade); unset: only where the deployment has no current version; =false: never")
	return cmd
}

// witnessKeyEnv names the witness's key when --witness-key is not given.
const witnessKeyEnv = "ADOPT_WITNESS_KEY"

// promoteMode says when the orchestrator makes its build current.
type promoteMode int

const (
	// promoteFirst: only where the deployment has no current version (a
	// first orchestrator); a restart of an old build during an upgrade
	// leaves the newer current one alone.
	promoteFirst promoteMode = iota
	// promoteAlways: replace the current version (--make-current).
	promoteAlways
	// promoteNever: register and poll only (--make-current=false).
	promoteNever
)

// pollerBehavior reads --workflow-pollers.
func pollerBehavior(v string) (worker.PollerBehavior, error) {
	if v == "auto" {
		return worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: 2, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: 16,
		}), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 64 {
		return nil, fmt.Errorf("--workflow-pollers %q: want a number from 1 to 64, or auto", v)
	}
	return worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: n}), nil
}

func orchestrate(ctx context.Context, cfg *config.Config, id string, mode promoteMode, pollers worker.PollerBehavior, signer ssh.Signer, stderr io.Writer) error {
	tc := cfg.Temporal
	// The one logger and /metrics (metrics.listen) first, then Temporal.
	o, c, err := dialOrchestrator(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer o.stop()
	defer c.Close()
	logger := o.log
	w := worker.New(c, workflows.TaskQueue, worker.Options{
		WorkflowTaskPollerBehavior: pollers,
		DeploymentOptions: worker.DeploymentOptions{
			UseVersioning: true,
			Version:       worker.WorkerDeploymentVersion{DeploymentName: workflows.DeploymentName, BuildID: id},
		},
	})
	fleet.Register(w)
	// The flip's witness dials the nodes' management ports from here,
	// outside every node.
	// It reads the node's pending flip activity through this client.
	wit := witness.New()
	if wit.Converter, err = connect.DataConverter(tc); err != nil {
		return err
	}
	wit.Describe = c
	// It tells a node its verdict by its own heartbeat (witness/verdict.go),
	// signed with its key (witness/signed.go).
	wit.Heartbeat = c
	if wit.Signer = signer; signer == nil {
		logger.Warn("no --witness-key: the witness's verdicts are unsigned, and a node that lists flip.witness.key reverts every witnessed flip; give the key whose public half the nodes list")
	}
	w.RegisterActivity(wit)
	// A fleet migrate or flip reaches each node's workflow through the relay;
	// the fleet's ask rounds list its ended children through it, as a local
	// activity of this worker (relay.Ended).
	w.RegisterActivity(relay.New(c))
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the workflow worker: %w", err)
	}
	defer w.Stop()
	logger.Info("adopt-worker orchestrating", "temporal", tc.Address, "namespace", tc.Namespace,
		"queue", workflows.TaskQueue, "deployment", workflows.DeploymentName, "build_id", id, "version", buildinfo.Read().String())
	ready(logger)
	if o.metrics != nil {
		if n, err := republishPhases(ctx, c, tc.Namespace, o.metrics.SDK()); err != nil {
			logger.Warn("adoption_phase is missing until each node's phase changes", "err", err)
		} else {
			logger.Info("adoption_phase re-emitted from visibility", "nodes", n)
		}
	}
	if mode != promoteNever {
		var conv client.Options // the client's converters, so that encrypted histories decode
		if err := connect.WithCodec(&conv, tc); err != nil {
			return err
		}
		check := replayCheck{
			lister:   replaycheck.Visibility{C: c, Namespace: tc.Namespace},
			replayer: replaycheck.Histories{C: c, Register: fleet.Register, DataConverter: conv.DataConverter, FailureConverter: conv.FailureConverter},
			id:       id, log: logger,
		}
		if err := promote(ctx, c, id, mode, check.run, logger); err != nil {
			return err
		}
	}
	<-ctx.Done()
	stopping(logger)
	logger.Info("adopt-worker orchestrator stopping")
	return nil
}

// promote makes build id the deployment's current version. Until then a
// versioned worker receives no task at all: the server dispatches a task
// queue's workflow tasks to its deployment's current version. The server
// only knows a version once it has seen that version poll, so it retries
// until then. With promoteFirst it leaves a current version of another
// build in place, and says so. Before it first sets the version, check
// must pass: the open workflows that would move replay on this build.
func promote(ctx context.Context, c client.Client, id string, mode promoteMode, check func(context.Context) error, logger *slog.Logger) error {
	h := c.WorkerDeploymentClient().GetHandle(workflows.DeploymentName)
	var last error
	checked := false
	for {
		// Describe first: the current version (to log what this replaces)
		// and the conflict token, so that a concurrent change by the
		// operator is not overwritten blindly.
		prev, opts := "unversioned", client.WorkerDeploymentSetCurrentVersionOptions{BuildID: id}
		d, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		switch {
		case err == nil:
			if cur := d.Info.RoutingConfig.CurrentVersion; cur != nil {
				if cur.BuildID == id {
					logger.Info("already the current version", "deployment", workflows.DeploymentName, "build_id", id)
					return nil
				}
				if mode == promoteFirst {
					logger.Warn("not making this build current: the deployment's current version is another build; this one polls and waits (an upgrade: start it with --make-current, or temporal worker deployment set-current-version)",
						"deployment", workflows.DeploymentName, "build_id", id, "current", cur.BuildID)
					return nil
				}
				prev = cur.BuildID
			}
			opts.ConflictToken = d.ConflictToken
			err = nil
		case mode == promoteFirst && !isNotFound(err):
			// Whether another build is current is not known: setting
			// this one without knowing could take the workflows back.
		default:
			err = nil // no deployment yet: this build is its first version
		}
		if err == nil && !checked {
			if err := check(ctx); err != nil {
				return err
			}
			checked = true
		}
		if err == nil {
			if _, err = h.SetCurrentVersion(ctx, opts); err == nil {
				logger.Info("made current", "deployment", workflows.DeploymentName, "build_id", id, "previous", prev)
				return nil
			}
		}
		if last == nil || err.Error() != last.Error() {
			logger.Info("waiting for the server to register this version before making it current", "build_id", id, "reason", err)
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("stopped before build %s became current", id), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// isNotFound reports whether err says the deployment does not exist yet
// (the server has not seen any of its versions poll).
func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// replayLimit is how many histories the check replays at once: replay is
// CPU-bound, and the orchestrator's host also runs its workflows.
const replayLimit = 4

// replayCheck replays, before this build becomes current, the histories of
// the open workflows that would move to it (replaycheck).
type replayCheck struct {
	lister   replaycheck.Lister
	replayer replaycheck.Replayer
	id       string
	log      *slog.Logger
}

func (r replayCheck) run(ctx context.Context) error {
	rep, err := replaycheck.Check(ctx, r.lister, r.replayer, replayLimit)
	if err != nil {
		return fmt.Errorf("build %s not made current: the replay check could not run: %w", r.id, err)
	}
	for _, f := range rep.Failures {
		r.log.Error("replay check: this build cannot replay an open workflow's history", "workflow_id", f.Run.WorkflowID,
			"run_id", f.Run.RunID, "workflow_type", f.Run.Type, "err", f.Err)
	}
	r.log.Info("replay check", "build_id", r.id, "open", rep.Open, "replayed", rep.Replayed,
		"closed_meanwhile", rep.Skipped, "failed", len(rep.Failures), "took", rep.Took.Round(time.Millisecond).String())
	if err := rep.Err(); err != nil {
		return fmt.Errorf("build %s not made current: %w; it stays registered in Worker Deployment %s but not current, and no workflow moved. "+
			"Put the change behind workflow.GetVersion and roll out a new build, or reset or terminate those runs; "+
			"to promote it anyway, accepting that those runs' workflow tasks fail, start it without --make-current and run "+
			"temporal worker deployment set-current-version --deployment-name %s --build-id %s",
			r.id, err, workflows.DeploymentName, workflows.DeploymentName, r.id)
	}
	return nil
}
