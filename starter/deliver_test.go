// A request's failed outcome gets the exit code of what it was: the
// validator's refusal exits 2; a late request the validator turned away,
// and a handler that failed once the workflow had accepted the request
// (a preview whose node did not answer, a rehearsal that timed out), exit
// 1 and say so.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"adoption/workflows"
)

// nodeFake is node n1's running workflow, served by a worker, its agent
// polling; an Update named update answers with failure, accepted or not.
func nodeFake(update string, failure error, accepted bool) *fakeClient {
	f := newFake()
	id := workflows.WorkflowID("n1")
	f.runs[id] = execution(id, "n1", "adopted", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING)
	f.polled[workflows.TaskQueue] = true
	f.polled[workflows.NodeQueue("n1")] = true
	f.outcome[update] = wire(failure)
	f.accepted[update] = accepted
	return f
}

func TestRequestOutcomesExitWithWhatTheyWere(t *testing.T) {
	late := temporal.NewApplicationError("the request reached the workflow at 2026-01-01T00:00:12Z, after its sender stopped waiting (2026-01-01T00:00:08Z): it was reported as not delivered and does not run; send it again", "Late")
	for _, c := range []struct {
		what     string
		args     []string
		update   string
		failure  error
		accepted bool
		code     int
		want     []string
		notWant  string
	}{
		{"a migrate the validator refuses", []string{"migrate", "n1", "app"}, workflows.UpdateMigrate,
			errors.New("module app is already migrated"), false,
			exitRefused, []string{"node n1 refused migrate app: module app is already migrated"}, ""},
		{"a flip refused with reasons", []string{"flip", "n1"}, workflows.UpdateFlip,
			temporal.NewNonRetryableApplicationError("node n1 refuses flip: module app is pending", workflows.Refused, nil, []string{"module app is pending, not migrated: run adopt migrate n1 app first"}), false,
			exitRefused, []string{"node n1 refused flip", "module app is pending, not migrated"}, ""},
		{"a late migrate", []string{"migrate", "n1", "app"}, workflows.UpdateMigrate,
			late, false,
			exitError, []string{"not delivered: migrate app reached node n1's workflow only after this CLI had stopped waiting", "does not run"}, "refused"},
		{"a preview whose node did not answer", []string{"preview", "n1"}, workflows.UpdatePreview,
			errors.New("node n1's agent did not answer within 1m0s (is adopt-worker running on it?)"), true,
			exitError, []string{"preview failed after its workflow accepted it (an error, not a refusal)", "agent did not answer within 1m0s"}, "refused"},
		{"a preview the validator refuses", []string{"preview", "n1"}, workflows.UpdatePreview,
			errors.New("node n1 is flipping (flip n1-3): a preview now is not the flip's"), false,
			exitRefused, []string{"node n1 refused preview: node n1 is flipping"}, ""},
		{"a rehearsal that timed out on the node", []string{"migrate", "n1", "app", "--dry-run"}, workflows.UpdateRehearse,
			errors.New("rehearsal of app on node n1: timed out"), true,
			exitError, []string{"failed after its workflow accepted it", "rehearsal of app on node n1: timed out"}, "refused"},
		{"a late rehearsal", []string{"migrate", "n1", "app", "--dry-run"}, workflows.UpdateRehearse,
			late, false,
			exitError, []string{"not delivered: migrate app --dry-run reached node n1's workflow only after"}, "refused"},
		{"a late resolve (its validator says so in words only)", []string{"resolve", "n1", "/etc/app.env", "LEVEL", "--take", "mesh"}, workflows.UpdateResolve,
			errors.New("the request reached the workflow after its sender stopped waiting: it was reported as not delivered; send it again"), false,
			exitError, []string{"not delivered: resolve /etc/app.env LEVEL reached node n1's workflow only after"}, "refused"},
		{"a resolve the validator refuses", []string{"resolve", "n1", "/etc/app.env", "LEVEL", "--take", "mesh"}, workflows.UpdateResolve,
			errors.New("no module of node n1 declares /etc/app.env; `adopt brief n1` lists the declared files"), false,
			exitRefused, []string{"node n1 refused resolve /etc/app.env LEVEL: no module of node n1 declares /etc/app.env"}, ""},
	} {
		f := nodeFake(c.update, c.failure, c.accepted)
		code, out, errs := runCLI(t, f, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.what, code, c.code, out, errs)
		}
		mustContain(t, c.what, errs, c.want...)
		if c.notWant != "" && strings.Contains(errs, c.notWant) {
			t.Errorf("%s says %q:\n%s", c.what, c.notWant, errs)
		}
		if f.called("UpdateWorkflow") != 1 {
			t.Errorf("%s: %d Update(s) sent, want 1", c.what, f.called("UpdateWorkflow"))
		}
	}
}

// Under --json the kind says which: "refused" for the validator's refusal
// with its reasons, "error" for a handler that failed.
func TestRequestOutcomesAsJSON(t *testing.T) {
	for _, c := range []struct {
		failure  error
		accepted bool
		kind     string
		code     int
	}{
		{temporal.NewNonRetryableApplicationError("node n1 refuses retry", workflows.Refused, nil, []string{"node n1 is adopted and its genesis has not failed: there is nothing to retry"}), false, "refused", exitRefused},
		{fmt.Errorf("node n1's agent did not answer within 1m0s"), true, "error", exitError},
	} {
		f := nodeFake(workflows.UpdateRetry, c.failure, c.accepted)
		code, out, errs := runCLI(t, f, "retry", "n1", "--json")
		var je jsonError
		if code != c.code || out != "" || json.Unmarshal([]byte(errs), &je) != nil || je.Kind != c.kind || je.ExitCode != c.code {
			t.Errorf("retry answered %v (accepted %v): exit %d, stdout %q, stderr %q; want kind %s", c.failure, c.accepted, code, out, errs, c.kind)
		}
		if c.kind == "refused" && (len(je.Reasons) != 1 || !strings.Contains(je.Reasons[0], "nothing to retry")) {
			t.Errorf("refusal reasons: %q", je.Reasons)
		}
	}
}

// A failure the server cannot place (asking again goes unanswered) is
// taken for a refusal, as before the two were told apart, and says so.
func TestRequestOutcomeInDoubtIsARefusal(t *testing.T) {
	f := nodeFake(workflows.UpdateMigrate, errors.New("module app is already migrated"), false)
	f.pollErr = serviceerror.NewUnavailable("history service busy")
	code, out, errs := runCLI(t, f, "migrate", "n1", "app")
	if code != exitRefused {
		t.Errorf("a failure in doubt: exit %d, want 2\n%s%s", code, out, errs)
	}
	mustContain(t, "a failure in doubt", errs, "node n1 refused migrate app: module app is already migrated", "taken as a refusal", "history service busy")
}
