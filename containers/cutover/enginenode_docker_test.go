package cutover

// The bed of the tests that measure a cutover as a client outside the node
// sees it (hold_docker_test.go, overlap_docker_test.go): a node with a
// Docker engine of its own (sandbox.EngineNode) holding the test images,
// the predecessor "svc" published on it at svcPort, and clients in a peer
// namespace connecting in a loop.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"adoption/sandbox"
)

// The predecessor every engine node runs, and the host port it publishes.
const svcName, svcPort = "svc", 18080

// engineBed is an engine node with the predecessor running and answering
// v1 from the peer.
type engineBed struct {
	t    *testing.T
	n    *sandbox.EngineNode
	cli  *client.Client // the node's own engine
	addr string         // the published port as the peer dials it
}

// newEngineBed starts engine node name (its addresses from third) with
// the test images loaded, and runs the predecessor on it with runArgs
// added to docker run (before the image). Everything goes at the test's
// end.
func newEngineBed(t *testing.T, name string, third int, runArgs ...string) *engineBed {
	t.Helper()
	dockerClient(t) // builds the images on the host's engine
	for _, tool := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s: %v", tool, err)
		}
	}
	ctx := context.Background()
	n, err := sandbox.StartEngineNode(ctx, name, third, t.TempDir()+"/engine")
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
	t.Cleanup(func() { cli.Close() })
	b := &engineBed{t: t, n: n, cli: cli, addr: fmt.Sprintf("%s:%d", n.Addr, svcPort)}
	run := append([]string{"run", "-d", "--name", svcName, "--restart", "unless-stopped"}, runArgs...)
	b.docker(append(run, "-v", "svcdata:/named", "-v", t.TempDir()+":/bind", "-p", fmt.Sprintf("%d:8080", svcPort), imageV1)...)
	b.waitVersion("v1")
	return b
}

// docker runs the docker CLI against the node's engine.
func (b *engineBed) docker(args ...string) string {
	b.t.Helper()
	out, err := exec.Command("docker", append([]string{"-H", b.n.Host}, args...)...).CombinedOutput()
	if err != nil {
		b.t.Fatalf("docker %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitVersion waits until the peer's GET /version is answered want.
func (b *engineBed) waitVersion(want string) {
	b.t.Helper()
	var got string
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err = b.n.Get(context.Background(), b.addr, "/version"); err == nil && got == want {
			return
		}
	}
	b.t.Fatalf("%s never answered %s from the peer: %q %v", b.addr, want, got, err)
}

// nft lists a table in the node's namespace ("" if there is none).
func (b *engineBed) nft(family, table string) string {
	out, _ := exec.Command("ip", "netns", "exec", b.n.Netns, "nft", "list", "table", family, table).CombinedOutput()
	return string(out)
}

// clientsDuring runs do while clients in the peer connect in a loop, and
// fails the test if do fails, a client connection failed, or the clients
// did not see both versions.
func (b *engineBed) clientsDuring(what string, do func() error) sandbox.ClientStats {
	b.t.Helper()
	stop := make(chan struct{})
	stats := make(chan sandbox.ClientStats, 1)
	go func() { stats <- b.n.Clients(context.Background(), b.addr, "/version", 6, clientPatience, stop) }()
	time.Sleep(sandbox.ClientWarmup + 200*time.Millisecond)
	if err := do(); err != nil {
		close(stop)
		<-stats
		b.t.Fatalf("%s: %v", what, err)
	}
	time.Sleep(time.Second)
	close(stop)
	s := <-stats
	b.t.Logf("%s: %d attempts, %d ok, %d failed, longest successful connect %s, p99 %s, gap %s, versions %v",
		what, s.Attempts, s.OK, s.Failed, s.LongestWait.Round(time.Millisecond), s.P99Wait.Round(time.Millisecond), s.Gap.Round(time.Millisecond), s.Versions)
	if s.Failed != 0 {
		b.t.Fatalf("%s: %d of %d client connections failed (first: %s)", what, s.Failed, s.Attempts, s.FirstFail)
	}
	if s.Versions["v1"] == 0 || s.Versions["v2"] == 0 {
		b.t.Fatalf("%s: the clients did not see the change: %v", what, s.Versions)
	}
	return s
}
