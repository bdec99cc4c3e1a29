package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.temporal.io/sdk/client"

	"adoption/config"
	"adoption/connect"
)

// The wait between dials doubles from 1 s to 1 min and no further, each
// drawn between half of it and all of it (checked over many draws, which
// also reach near both ends).
func TestDialBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute, time.Minute}
	low, high := make([]time.Duration, len(want)), make([]time.Duration, len(want))
	for range 2000 {
		b := dialBackoff()
		for i, w := range want {
			got := b.NextBackOff()
			if got < w/2 || got > w+time.Nanosecond {
				t.Fatalf("wait %d: %s, want within [%s, %s]", i+1, got, w/2, w)
			}
			if low[i] == 0 || got < low[i] {
				low[i] = got
			}
			high[i] = max(high[i], got)
		}
	}
	for i, w := range want {
		if low[i] > w/2+w/20 || high[i] < w-w/20 {
			t.Errorf("wait %d over 2000 draws spans [%s, %s], want close to [%s, %s]", i+1, low[i], high[i], w/2, w)
		}
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Dialling a closed port is retried, one warning per try naming the
// address and the error, until ctx ends; a setting that cannot be used
// is returned at once, as a configuration error.
func TestDialUntilRetriesOnlyUnreachable(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	addr := closedPort(t)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	dial := func(tc config.Temporal) dialer {
		return func(ctx context.Context) (client.Client, error) { return connect.Dial(ctx, tc, logger) }
	}
	b := &backoff.ExponentialBackOff{InitialInterval: 20 * time.Millisecond, Multiplier: 2, MaxInterval: 80 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	tries := 0
	start := time.Now()
	c, err := dialUntil(ctx, dial(config.Temporal{Address: addr, Namespace: "default"}), b, addr, logger, func(n int, err error, next time.Duration) {
		tries = n
		if !connect.Unreachable(err) || next > b.MaxInterval {
			t.Errorf("try %d: %v, next in %s", n, err, next)
		}
	})
	if c != nil || err != context.DeadlineExceeded {
		t.Fatalf("dialUntil a closed port: %v, %v; want ctx's end", c, err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("returned %s after the start, ctx ended at 1.5s", took)
	}
	lines := strings.Count(log.String(), "Temporal is out of reach")
	if tries < 5 || lines != tries {
		t.Errorf("%d tries, %d warnings; want one warning per try and several tries:\n%s", tries, lines, log.String())
	}
	if !strings.Contains(log.String(), "temporal="+addr) || !strings.Contains(log.String(), "cannot reach Temporal at "+addr) {
		t.Errorf("the warnings do not name the address and the error:\n%s", log.String())
	}

	log.Reset()
	tc := config.Temporal{Address: addr, Namespace: "default", TLS: config.TLS{CA: "/nonexistent/ca.pem"}}
	c, err = dialUntil(context.Background(), dial(tc), b, addr, logger, func(int, error, time.Duration) { t.Error("a bad TLS file was retried") })
	if c != nil || exitStatus(err) != exitConfig || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("a missing CA file: %v (exit %d), want exit %d naming the file", err, exitStatus(err), exitConfig)
	}
}

// agentConfig writes a node file with no Temporal at addr (extra is more
// YAML) and points state and root at a temporary directory.
func agentConfig(t *testing.T, addr, extra string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "n1.yaml")
	yaml := fmt.Sprintf(`temporal: {address: %q%s}
docker: {host: "unix://%s/no-docker.sock"}
node: {name: n1, role: member, root: %s, state_dir: %s}
authority: {unsigned: true}
`, addr, extra, dir, dir, filepath.Join(dir, "state"))
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The agent started with no Temporal keeps running, dialling, and stops
// promptly on its signal; a TLS file it cannot read stops it at once with
// the configuration's exit status, naming the file and where it was set.
func TestAgentWaitsForTemporalAndStopsPromptly(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	addr := closedPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--config", agentConfig(t, addr, "")}, &out, &errb) }()
	select {
	case err := <-done:
		t.Fatalf("the agent exited with Temporal out of reach: %v\n%s", err, errb.String())
	case <-time.After(2500 * time.Millisecond):
	}
	if n := strings.Count(errb.String(), "Temporal is out of reach"); n < 2 || n > 3 {
		t.Errorf("%d warnings in 2.5 s (tries at 0, ~0.5-1 s, ~1.5-3 s): want 2 or 3:\n%s", n, errb.String())
	}
	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped by its signal: %v", err)
		}
		if took := time.Since(stopped); took > time.Second {
			t.Errorf("took %s to stop while dialling", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the agent did not stop within 5 s of its signal while dialling:\n%s", errb.String())
	}

	var errb2 syncBuffer
	start := time.Now()
	err := run(context.Background(), []string{"run", "--config", agentConfig(t, addr, `, tls: {ca: /nonexistent/ca.pem}`)}, &out, &errb2)
	if exitStatus(err) != exitConfig || !strings.Contains(err.Error(), "/nonexistent/ca.pem") || !strings.Contains(err.Error(), "temporal.* of the configuration") {
		t.Fatalf("a missing CA file: %v (exit %d), want exit %d naming the file and the key\n%s", err, exitStatus(err), exitConfig, errb2.String())
	}
	if took := time.Since(start); took > 5*time.Second || strings.Contains(errb2.String(), "out of reach") {
		t.Errorf("a bad TLS file was retried (%s):\n%s", took, errb2.String())
	}
}

// syncBuffer is a bytes.Buffer that the agent's goroutines write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
