// Package observe reports what the node's activities did as adoption_*
// series and log lines (node, module, step), from outside them: an activity
// interceptor reads each activity's input and result, so the activities
// themselves stay free of instrumentation and a metric can never change
// their outcome. It is no part of the activities (it imports them, never
// the other way), and it decides nothing: it only records.
package observe

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"adoption/activities"
	"adoption/activities/nodewire"
	"adoption/firewall/flip"
	"adoption/metrics"
	"adoption/nodestate"
)

// cutoverSteps names each cutover activity's step, as the metrics and the
// logs call it.
var cutoverSteps = map[string]string{
	"CutoverPreflight":   "preflight",
	"CutoverCreate":      "create",
	"ConvergeFiles":      "files",
	"CutoverSwap":        "swap",
	"CutoverWaitHealthy": "healthy",
	"CutoverRollback":    "rollback",
	"Prune":              "prune",
}

// FlipReader reads the node's flip record (nodestate.Dir).
type FlipReader interface {
	Flip() (*nodestate.FlipRecord, error)
}

// New returns the interceptor for the node's worker (client.Options
// Interceptors); log should carry the node.
func New(rec metrics.Recorder, flips FlipReader, log *slog.Logger) *Observer {
	return &Observer{rec: rec, flips: flips, log: log}
}

// Observer is the node worker's interceptor.
type Observer struct {
	interceptor.InterceptorBase
	rec   metrics.Recorder
	flips FlipReader
	log   *slog.Logger
}

func (o *Observer) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityObserver{o: o}
	i.Next = next
	return i
}

type activityObserver struct {
	interceptor.ActivityInboundInterceptorBase
	o *Observer
}

func (i *activityObserver) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	name := activity.GetInfo(ctx).ActivityType.Name
	start := time.Now()
	res, err := i.Next.ExecuteActivity(ctx, in)
	i.o.record(name, firstArg(in), res, err, time.Since(start))
	return res, err
}

func firstArg(in *interceptor.ExecuteActivityInput) any {
	if len(in.Args) == 0 {
		return nil
	}
	return in.Args[0]
}

// outcome tells a refusal (bad input, nothing changed, not retried) from a
// fault that retries.
func outcome(err error) string {
	var ae *temporal.ApplicationError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ae) && ae.NonRetryable():
		return "refused"
	default:
		return "error"
	}
}

func (o *Observer) record(name string, arg, res any, err error, d time.Duration) {
	if step, ok := cutoverSteps[name]; ok {
		modules := []string{}
		switch in := arg.(type) {
		case activities.ModuleInput:
			modules = append(modules, in.Module)
		case activities.CutoverInput:
			modules = append(modules, in.Module)
		case activities.PruneInput:
			modules = append(modules, in.Modules...)
		}
		for _, m := range modules {
			o.rec.CutoverStep(m, step, outcome(err), d)
			l := o.log.With("module", m, "step", step, "outcome", outcome(err), "duration", d.Round(time.Millisecond))
			if err != nil {
				l.Warn("cutover step failed", "err", err)
			} else {
				l.Info("cutover step done")
			}
		}
		return
	}
	switch name {
	case "FlipTrip", "RevertFlip", "CommitFlip":
		o.ObserveFlip()
	}
	if err != nil {
		return
	}
	switch r := res.(type) {
	case *activities.RulesResult:
		switch name {
		case "OpenRules":
			if in, ok := arg.(activities.RulesInput); ok {
				o.rec.MarkedRules(in.Owner, len(r.Added)+len(r.Present))
			}
		case "CloseRules":
			if in, ok := arg.(activities.RulesInput); ok {
				o.rec.MarkedRules(in.Owner, 0)
			}
		}
	case *activities.ReleaseResult:
		for _, m := range r.Removed {
			o.rec.MarkedRules(m.Mark.Owner, 0)
		}
	case *nodewire.Result:
		// The watch's: it runs the node's checks in the agent, and each
		// answer carries the marked rules it put back since the last.
		if !r.Checked {
			break
		}
		o.rec.ReconcileRepairs(len(r.Restored))
		if len(r.Restored) > 0 {
			o.log.Warn("reconcile put back missing marked rules", "repaired", len(r.Restored))
		}
		if r.DriftError == "" {
			o.rec.Drift(len(r.Drift))
		}
	case *flip.Preview:
		o.observePreview(r)
	case *activities.FlipResult:
		// A flip that previews on the node answers with its preview.
		if r.Preview != nil {
			o.observePreview(r.Preview)
		}
	}
}

func (o *Observer) observePreview(r *flip.Preview) {
	if !r.Approved {
		o.rec.PreviewRefused()
		o.log.Info("flip preview refused", "reasons", strings.Join(r.Reasons, "; "))
	}
}

// ObserveFlip reports the flip record's state, and counts a flip the
// watchdog reverted (by its reason: watchdog.Run writes "not confirmed by").
// The agent also calls it at start, for a revert that happened while no
// agent ran.
func (o *Observer) ObserveFlip() {
	rec, err := o.flips.Flip()
	if err != nil {
		o.log.Warn("metrics: read the flip record", "err", err)
		return
	}
	if rec == nil {
		o.rec.FlipState("none")
		return
	}
	o.rec.FlipState(rec.State)
	if rec.State == nodestate.FlipReverted && strings.HasPrefix(rec.Reason, "not confirmed by") {
		o.rec.WatchdogRevert(rec.ID)
	}
}
