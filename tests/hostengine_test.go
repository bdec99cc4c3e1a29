package tests

// This file holds the stand-in service's images and the helpers of the
// tests whose containers run on the host's Docker engine next to a plain
// sandbox node (those that need nothing of the reference node): the
// predecessor's container published on the host's loopback, HTTP to it,
// and the container names the host engine shows.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/sandbox"
)

// The e2e service image: containers/testdata/svc, built static and imported
// into the local engine (no registry here). v1 plays the predecessor, v2 the
// mesh's module.
const (
	svcV1 = "adoption-e2e-svc:v1"
	svcV2 = "adoption-e2e-svc:v2"
)

var svcOnce sync.Once
var svcErr error

func needDocker(t *testing.T) {
	t.Helper()
	needE2E(t)
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("the Docker engine is needed for the cutover tests: %v: %s", err, out)
	}
	svcOnce.Do(func() { svcErr = buildSvcImages() })
	if svcErr != nil {
		t.Fatal(svcErr)
	}
}

func buildSvcImages() error {
	return sandbox.ServiceImages(context.Background(), "..", map[string]string{"v1": svcV1, "v2": svcV2})
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// predecessor runs the predecessor's service: data in a named volume, an
// anonymous volume and a bind mount, published on 127.0.0.1:port.
func predecessor(t *testing.T, name string, port int) (bind string) {
	t.Helper()
	bind = t.TempDir()
	vol := name + "-data"
	t.Cleanup(func() {
		for _, c := range []string{name, name + ".next", name + ".predecessor"} {
			_ = exec.Command("docker", "rm", "-f", "-v", c).Run()
		}
		_ = exec.Command("docker", "volume", "rm", "-f", vol).Run()
	})
	docker(t, "run", "-d", "--name", name, "--restart", "unless-stopped",
		"-v", vol+":/named", "-v", bind+":/bind", "-p", fmt.Sprintf("127.0.0.1:%d:8080", port), svcV1)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/health", port))
	return bind
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer", url)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func containerNames(t *testing.T, name string) []string {
	t.Helper()
	out := docker(t, "ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter", "name=^"+name)
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" {
			names = append(names, l)
		}
	}
	return names
}

func cutoverPlan(name string, port int, cmd string) string {
	// The host's engine publishes on the loopback only: the plain node's
	// clients are on the host.
	return refCutoverPlan(strings.Replace(refModule(name, port, cmd),
		fmt.Sprintf(`ports: {"%d/tcp"`, port), fmt.Sprintf(`ports: {"127.0.0.1:%d/tcp"`, port), 1))
}

var cutoverFiles = func(name string) map[string]string {
	return map[string]string{"/srv/" + name + "/app.env": "PREDECESSOR_SECRET=" + secretCanary + "\n"}
}
