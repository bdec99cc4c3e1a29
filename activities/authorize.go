package activities

// This file holds authorize, the first step of every activity: it reads
// the node's own configuration now, and refuses a request whose plan is not
// the one that file derives. The checks of a request's other fields, and
// the Authority itself, are in activities/authority.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"adoption/activities/authority"
	"adoption/config"
	"adoption/containers/cutover"
)

// configuration, read now (so an operator's edit of the file applies at
// the next retry), must derive exactly the plan the request carries.
func (a *Activities) authorize(ctx context.Context, req config.PlanRef) (*authority.Authority, error) {
	if err := a.checkNode(req.Node); err != nil {
		return nil, err
	}
	if err := a.checkCaller(ctx); err != nil {
		return nil, err
	}
	if a.Local == nil {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s's agent has no local configuration to check requests against; start adopt-worker with --config", a.Node), authority.ErrLocalConfig, nil)
	}
	auth, err := a.Local()
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"node %s's own configuration cannot be read, so no request is served: %v; fix the file on the node, then: adopt retry %s", a.Node, err, a.Node),
			authority.ErrLocalConfig, nil)
	}
	if auth.Plan.Node != a.Node {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"node.name in %s is now %q, but this agent serves node %q; restart adopt-worker after renaming a node", auth.Source, auth.Plan.Node, a.Node),
			authority.ErrLocalConfig, nil)
	}
	if err := authority.CheckDigestKind(auth, req); err != nil {
		heartbeat(ctx, "refused: digest kinds differ")
		return nil, err
	}
	if err := authority.CheckPlan(auth, req); err != nil {
		heartbeat(ctx, "refused: plan mismatch")
		return nil, err
	}
	return auth, nil
}

// withheld turns an error that may carry a container's own output (its
// logs, its healthcheck's output: possibly secrets) into a short reason for
// the workflow history, and writes the whole of it to the agent's log.
func (a *Activities) withheld(ctx context.Context, what string, err error) string {
	var oe *cutover.OutputError
	if !errors.As(err, &oe) {
		return fmt.Sprintf("%s: %v", what, err)
	}
	logger(ctx).Error(what, "error", err.Error())
	return fmt.Sprintf("%s: %s; %s is withheld from the workflow history: it is in the agent's log on node %s (adopt-worker's output, e.g. journalctl -u adopt-worker), logged as %q",
		what, oe.Reason, oe.What, a.Node, what)
}

// logger is the activity's logger (the worker's log), or stderr outside one.
func logger(ctx context.Context) interface {
	Error(msg string, keyvals ...any)
	Info(msg string, keyvals ...any)
} {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
