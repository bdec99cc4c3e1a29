// A fleet's requests as the CLI sends them: signed for the fleet's nodes,
// bounded in size, sent as an Update to the running fleet, and what the
// fleet answers printed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/config"
	"adoption/intent"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// fleetIntent is one intent for the fleet's nodes cfgs (a retry's: one
// node): each with the hash of the plan its configuration derives (the
// one its agent reads), valid for operator.fleet_intent_ttl of the first
// node's file.
func (x *cli) fleetIntent(action string, cfgs []*config.Config) (*intent.Signed, error) {
	ttl := cfgs[0].Operator.FleetIntentTTL
	return x.signIntent(action, cfgs, nil, ttl)
}

// fleetIntents is one intent for each of the fleet's nodes cfgs (signEach),
// as fleetIntent's: what a request the fleet sends on to many nodes
// carries, so that each node is sent its own and nothing more.
func (x *cli) fleetIntents(action string, cfgs []*config.Config) (map[string]*intent.Signed, error) {
	return x.signEach(action, cfgs, nil, cfgs[0].Operator.FleetIntentTTL)
}

// maxRequestBytes bounds a fleet request as the CLI sends it: Temporal
// refuses a payload over 2 MB, and the fleet carries the intents it has
// yet to send across continue-as-new. A request signed for each node
// takes about 0.8 KB a node with an ed25519 key, 2 KB with RSA-3072,
// 2.5 KB with RSA-4096 (docs/access.md).
const maxRequestBytes = 1536 << 10

// requestFits refuses (usage) a fleet request past maxRequestBytes, with
// signed intents for that many nodes, before anything is sent.
func requestFits(what string, signed int, in any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if len(b) <= maxRequestBytes {
		return nil
	}
	return usagef("%s: the request is %d KiB, more than the %d KiB a fleet request may take (Temporal refuses a payload over 2 MB), with an intent signed for each of %d node(s); nothing was sent. An ed25519 key signs in about 0.8 KiB a node (ssh-keygen -t ed25519), RSA in 2 to 2.5 KiB",
		what, len(b)>>10, maxRequestBytes>>10, signed)
}

// askFleet sends one of the operator's requests to the running fleet as
// an Update and waits, bounded by timeout, for its answer. A fleet that has
// finished refuses (exit 2, as a converged node does); one that is not
// running is an error. The fleet's validator refuses what it would turn
// away (exit 2); its handler never fails once it has taken the request. A
// request not answered in time is refused if it reaches the fleet later
// (NotAfter), so it never runs.
func (x *cli) askFleet(ctx context.Context, name, path string, timeout time.Duration, update string, in fleet.FleetRequest, what string) (*fleet.FleetAnswer, error) {
	r, err := x.fleetRun(ctx, name, path)
	if err != nil {
		return nil, err
	}
	switch {
	case r.status == "completed":
		return nil, refused(fmt.Errorf("fleet %s has finished (%s): every node has ended and it takes no more requests; `adopt fleet status --fleet %s` shows how each ended, `adopt status NODE` one node", name, x.zone().stamp(r.closed), path), nil)
	case !r.running:
		return nil, fmt.Errorf("fleet %s is not running (%s at %s); `adopt fleet start --fleet %s` starts it again", name, r.status, x.zone().stamp(r.closed), path)
	}
	if err := requestFits(what, len(in.Intents), in); err != nil {
		return nil, err
	}
	start := time.Now()
	in.NotAfter = start.Add(timeout - skew).UTC()
	uctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h, err := x.c.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
		UpdateID:     fmt.Sprintf("%s-%s", update, start.UTC().Format("20060102T150405.000000000")),
		WorkflowID:   fleet.FleetID(name),
		UpdateName:   update,
		Args:         []any{in},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var ans fleet.FleetAnswer
	if err == nil {
		err = h.Get(uctx, &ans)
	}
	var se serviceerror.ServiceError
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		return &ans, nil
	case isLate(err) || timedOut(err):
		wq := x.queueHealth(context.WithoutCancel(ctx), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		return nil, fmt.Errorf("fleet %s did not answer %s within %s (%s); it does not run: if it reaches the fleet later it is refused. Ask again once `adopt fleet status --fleet %s` answers", name, what, timeout, wq.describe("worker", x.zone()), path)
	case errors.As(err, &nf):
		return nil, fmt.Errorf("fleet %s is not running (not started, or finished): `adopt fleet start --fleet %s` starts it", name, path)
	case errors.As(err, &se):
		return nil, fmt.Errorf("fleet %s: %s: %w", name, what, err)
	}
	msg := err.Error()
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		msg = ae.Message()
	}
	return nil, refused(fmt.Errorf("fleet %s: %s refused by the fleet, nothing was sent to a node: %s", name, what, msg), []string{msg})
}

// fleetRun is the fleet's latest run as the server describes it.
func (x *cli) fleetRun(ctx context.Context, name, path string) (*runInfo, error) {
	d, err := x.c.DescribeWorkflow(ctx, fleet.FleetID(name), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("fleet %s not started: `adopt fleet start --fleet %s` starts it", name, path)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet %s: %w", name, err)
	}
	return runFrom(d.RawResponse.GetWorkflowExecutionInfo()), nil
}

// opAnswer prints what the fleet took of a migrate or flip.
func (x *cli) opAnswer(name, what string, ans *fleet.FleetAnswer) error {
	if x.asJSON {
		return x.writeJSON(x.stdout, map[string]any{"fleet": name, "request": what, "targets": ans.Targets, "skipped": ans.Skipped})
	}
	fmt.Fprintf(x.stdout, "fleet %s: %s on %s, wave by wave; follow it with `adopt fleet status`\n", name, what, strings.Join(ans.Targets, ", "))
	if len(ans.Skipped) > 0 {
		fmt.Fprintf(x.stdout, "not on: %s\n", strings.Join(ans.Skipped, "; "))
	}
	return nil
}
