// Package devserver launches a real Temporal dev server (the Temporal CLI's
// `server start-dev`) on a port chosen beforehand, so a process can be
// pointed at the address first and the server started there later: for
// the tests (here and tests/harness_test.go), the bench and the history
// recorder alike.
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

// Spec is one dev server to launch: its ports, its database file, where
// its log goes, and more start-dev flags.
type Spec struct {
	Bin string
	// Port is the frontend's; HTTPPort and MetricsPort are free ones when
	// 0. UIPort serves the Web UI; 0 runs the server headless.
	Port, HTTPPort, MetricsPort, UIPort int
	DB                                  string // the SQLite file
	Log                                 string // the server's output, appended to
	Extra                               []string
	// DieWithParent kills the server when the launching thread exits.
	DieWithParent bool
}

// Server is a launched dev server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// Launch starts the server spec describes, with the search attributes the
// workflows set, and waits (60 s at most) until it answers for the default
// namespace. A server that exits or never answers is an error carrying its
// log. Launching the same spec again after Stop restarts it on the same
// ports and database.
func Launch(spec Spec) (*Server, error) {
	for _, p := range []*int{&spec.HTTPPort, &spec.MetricsPort} {
		if *p == 0 {
			var err error
			if *p, err = Port(); err != nil {
				return nil, err
			}
		}
	}
	logf, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(spec.Port), "--http-port", strconv.Itoa(spec.HTTPPort), "--metrics-port", strconv.Itoa(spec.MetricsPort),
		"--db-filename", spec.DB, "--log-level", "warn",
		"--search-attribute", "AdoptionNode=Keyword", "--search-attribute", "AdoptionPhase=Keyword",
		"--search-attribute", "AdoptionAttention=Keyword"}
	if spec.UIPort > 0 {
		args = append(args, "--ui-port", strconv.Itoa(spec.UIPort))
	} else {
		args = append(args, "--headless")
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", spec.Port), done: make(chan struct{})}
	s.cmd = exec.Command(spec.Bin, append(args, spec.Extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.DieWithParent {
		s.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start the dev server (%s): %w", spec.Bin, err)
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.done) }() //nolint:errcheck
	quiet := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		c, err := client.Dial(client.Options{HostPort: s.Addr, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			c.Close()
			if err == nil {
				return s, nil
			}
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(spec.Log)
			return nil, fmt.Errorf("the dev server on %s exited:\n%s", s.Addr, b)
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.Stop()
	b, _ := os.ReadFile(spec.Log)
	return nil, fmt.Errorf("the dev server did not answer on %s within 60 s:\n%s", s.Addr, b)
}

// Start launches a dev server for a test on 127.0.0.1:port (its other
// ports free ones) with its own database; it stops when the test ends.
func Start(t testing.TB, port int) *Server {
	t.Helper()
	dir := t.TempDir()
	s, err := Launch(Spec{Bin: Bin(t), Port: port, DB: filepath.Join(dir, "temporal.db"), Log: filepath.Join(dir, "server.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Pid is the server's process ID.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop ends the server (SIGTERM, then SIGKILL after 20 s); the address is
// then unreachable again.
func (s *Server) Stop() {
	if s == nil {
		return
	}
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
