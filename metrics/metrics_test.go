package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"adoption/buildinfo"
	"adoption/codec"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Both kinds of series come out of one endpoint: the SDK's, through its
// handler, named temporal_*, and adoption's own, labelled with the node.
func TestServesSDKAndAdoptionSeries(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := New("n1", log)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	stop, err := m.Listen(context.Background(), addr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m.SDK().WithTags(map[string]string{"task_queue": "q"}).Counter("temporal_request").Inc(2)
	m.SDK().Timer("temporal_activity_execution_latency").Record(30 * time.Millisecond)
	r := m.Recorder()
	r.MarkedRules("genesis", 5)
	r.ReconcileRepairs(2)
	r.Drift(1)
	r.CutoverStep("mail", "swap", "ok", 1500*time.Millisecond)
	r.CutoverStep("web", "swap", "ok", 500*time.Millisecond)
	r.PreviewRefused()
	r.FlipState("flipped")
	r.WatchdogRevert("n1-1")
	r.WatchdogRevert("n1-1") // counted once per flip
	m.Dialled(true)
	scraped := 0
	m.OnScrape(func() { scraped++ })
	body := scrape(t, addr)
	for _, want := range []string{
		`temporal_request_total{task_queue="q"} 2`,
		`temporal_activity_execution_latency`,
		`adoption_marked_rules{node="n1",owner="genesis"} 5`,
		`adoption_reconcile_repairs_total{node="n1"} 2`,
		`adoption_drift_items{node="n1"} 1`,
		`adoption_cutover_steps_total{node="n1",outcome="ok",step="swap"} 2`,
		`adoption_cutover_step_seconds_total{node="n1",step="swap"} 2`,
		fmt.Sprintf(`adoption_build_info{commit=%q,version=%q} 1`, buildinfo.Read().Commit, buildinfo.Read().Version),
		`adoption_preview_refusals_total{node="n1"} 1`,
		`adoption_flip_state{node="n1",state="flipped"} 1`,
		`adoption_flip_state{node="n1",state="none"} 0`,
		`adoption_watchdog_reverts_total{node="n1"} 1`,
		`adoption_temporal_dialled{node="n1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Bounded cardinality: no series is per module.
	if strings.Contains(body, `module="`) {
		t.Errorf("a series carries a module label")
	}
	if scraped != 1 {
		t.Errorf("scrape hooks ran %d times, want 1", scraped)
	}
	if t.Failed() {
		t.Log(body)
	}
}

// An address that cannot be bound fails the start, naming the key.
func TestListenTakenAddressNamesTheKey(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := New("n1", log)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Listen(context.Background(), l.Addr().String(), log)
	if err == nil || !strings.Contains(err.Error(), "metrics.listen \""+l.Addr().String()+"\" cannot be bound") {
		t.Fatalf("got %v", err)
	}
}

// A payload in clear that a codec refuses shows on every process's
// /metrics (the orchestrator's too: no node label).
func TestPlaintextRefusedIsCounted(t *testing.T) {
	m, err := New("", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := converter.GetDefaultDataConverter().ToPayloads(map[string]string{"id": "n1-1", "state": "answered"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decode(forged.Payloads); err == nil {
		t.Fatal("a payload in clear decoded")
	}
	n := codec.PlaintextRefused()
	if n == 0 {
		t.Fatal("the refusal was not counted")
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := fmt.Sprintf("%s %d\n", PlaintextRefusedMetric, n); !strings.Contains(w.Body.String(), want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, w.Body)
	}
}
