package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"adoption/config"
	"adoption/internal/testenv"
)

// A metrics.listen that cannot be bound stops `run` before it dials
// Temporal (nothing listens at temporal.address here: reaching that step
// would fail differently), naming the key and the value.
func TestRunStopsOnUnbindableMetricsListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("ADOPT_METRICS_LISTEN", l.Addr().String())
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:1")
	var out, errb bytes.Buffer
	err = run(context.Background(), []string{"run", "--config", testenv.NodeExample(t, config.OperatorPlaceholder)}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `metrics.listen "`+l.Addr().String()+`" cannot be bound`) {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(errb.String(), "adopt-worker running") {
		t.Fatalf("the worker started anyway:\n%s", errb.String())
	}
}

// An unknown log format is a configuration error naming the key.
func TestRunStopsOnUnknownLogFormat(t *testing.T) {
	t.Setenv("ADOPT_LOG_FORMAT", "xml")
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:1")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"run", "--config", testenv.NodeExample(t, config.OperatorPlaceholder)}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `log.format: "xml" is invalid`) {
		t.Fatalf("got %v", err)
	}
}

// The orchestrator's set-up binds metrics.listen before dialling too.
func TestOrchestratorStopsOnUnbindableMetricsListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("ADOPT_METRICS_LISTEN", l.Addr().String())
	t.Setenv("ADOPT_TEMPORAL_ADDRESS", "127.0.0.1:1")
	cfg, err := config.LoadWith("", map[string]string{"node.name": "orchestrator", "authority.unsigned": "true"})
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	if _, _, err := dialOrchestrator(context.Background(), cfg, &errb); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Fatalf("got %v", err)
	}
}
