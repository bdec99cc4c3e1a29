package workflows

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/metrics"
)

// phaseUpserts upserts the node's search attributes through three phaseUpserts, as the
// node's workflow does.
func phaseUpserts(ctx workflow.Context) error {
	for _, p := range []Phase{PhaseProbing, PhaseAdopted, PhaseMigrating, PhaseAdopted} {
		if err := workflow.UpsertTypedSearchAttributes(ctx, AttrNode.ValueSet("n1"), AttrPhase.ValueSet(string(p))); err != nil {
			return err
		}
	}
	workflow.GetLogger(ctx).Info("phases done")
	return nil
}

// The interceptor turns the phase upserts into adoption_phase: 1 for the
// phase the node is in, 0 for those it left.
func TestObservePhaseAndLogs(t *testing.T) {
	m, err := metrics.New("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(m.SDK())
	var logs bytes.Buffer
	s.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: WorkflowID("n1")})
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{Observe()}})
	env.RegisterWorkflow(phaseUpserts)
	env.ExecuteWorkflow(phaseUpserts)
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]string{}
	for _, line := range strings.Split(rr.Body.String(), "\n") {
		if !strings.HasPrefix(line, "adoption_phase{") || !strings.Contains(line, `node="n1"`) {
			continue
		}
		for _, p := range []Phase{PhaseProbing, PhaseAdopted, PhaseMigrating} {
			if strings.Contains(line, `phase="`+string(p)+`"`) {
				got[string(p)] = line[strings.LastIndex(line, " ")+1:]
			}
		}
	}
	if !strings.Contains(logs.String(), `msg="phases done"`) || !regexp.MustCompile(`msg="phases done".* node=n1`).MatchString(logs.String()) {
		t.Errorf("the workflow's log line lacks node=n1:\n%s", logs.String())
	}
	want := map[string]string{"probing": "0", "adopted": "1", "migrating": "0"}
	for p, v := range want {
		if got[p] != v {
			t.Errorf("adoption_phase{phase=%q} = %q, want %s\n%s", p, got[p], v, rr.Body.String())
		}
	}
}
