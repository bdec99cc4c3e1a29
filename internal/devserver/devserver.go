// Package devserver starts a real Temporal dev server (the Temporal CLI's
// `server start-dev`) for tests outside tests/, on a port the test chose
// beforehand: a test can point a process at the address first and start
// the server there later. tests/harness_test.go finds the CLI here too.
package devserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// Bin is the Temporal CLI: $ADOPT_TEMPORAL_BIN, else where `make
// temporal-cli` puts it. A missing CLI fails the test, naming both.
func Bin(t testing.TB) string {
	t.Helper()
	p := os.Getenv("ADOPT_TEMPORAL_BIN")
	if p == "" {
		p = filepath.Join(os.Getenv("HOME"), ".cache", "adoption", "bin", "temporal")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Temporal CLI not found at %s: run `make temporal-cli` (or set ADOPT_TEMPORAL_BIN)", p)
	}
	return p
}

// Server is a dev server on its own database file.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a dev server on 127.0.0.1:port (its HTTP and metrics ports
// free ones), with the search attributes the workflows set, and waits until
// it answers for the default namespace. It stops when the test ends.
func Start(t testing.TB, port int) *Server {
	t.Helper()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	s.cmd = exec.Command(Bin(t), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", fmt.Sprint(port), "--http-port", fmt.Sprint(FreePort(t)), "--metrics-port", fmt.Sprint(FreePort(t)),
		"--db-filename", filepath.Join(dir, "temporal.db"), "--log-level", "warn",
		"--search-attribute", "AdoptionNode=Keyword", "--search-attribute", "AdoptionPhase=Keyword")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.done) }() //nolint:errcheck
	t.Cleanup(s.Stop)
	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		c, err := client.Dial(client.Options{HostPort: s.Addr, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			c.Close()
			if err == nil {
				return s
			}
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("the dev server on %s exited:\n%s", s.Addr, b)
		case <-time.After(200 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(logf.Name())
	t.Fatalf("the dev server did not answer on %s within 60 s:\n%s", s.Addr, b)
	return nil
}

// Stop ends the server (SIGTERM, then SIGKILL after 20 s); the address is
// then unreachable again.
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// FreePort is Port for a test: no port fails it.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Port is a loopback TCP port nothing listens on now, below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): a server that is
// stopped and started again on it cannot find it taken meanwhile as the
// source port of some process's outgoing connection. Ports handed out are
// not handed out again in this process.
func Port() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	low := ephemeralLow()
	for range 1000 {
		p := portsFrom + rand.IntN(low-portsFrom)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port from %d to %d after 1000 tries", portsFrom, low-1)
}

// portsFrom is the lowest port FreePort hands out.
const portsFrom = 15000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= portsFrom+1000 {
		return 32768
	}
	return n
}
