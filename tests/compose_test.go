package tests

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"debug/elf"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"adoption/codec"
	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// TestCompose runs docker-compose.yml as an operator would on a machine with
// no image registry: both images built locally (the pinned Temporal CLI's dev
// server and adopt-worker, static binaries in FROM scratch images), the stack
// up under its own project name on free ports, a sandbox node adopted by the
// containerised worker (host network, setns into the node's namespace, the
// node root and state directory mounted), the dev server's container
// recreated on the same volume without losing the workflow, and everything
// taken down again: containers, network, volume and the images it built.
func TestCompose(t *testing.T) {
	needE2E(t)
	compose := composeCommand(t)
	temporal := staticTemporalBin(t)

	// A copy of the compose file and the build contexts, so that the
	// binaries the images are built from never land in the work tree.
	dir := t.TempDir()
	composeFile := filepath.Join(dir, "docker-compose.yml")
	copyFile(t, filepath.Join("..", "docker-compose.yml"), composeFile, 0o644)
	clusterFile := filepath.Join(dir, "docker-compose.cluster.yml")
	copyFile(t, filepath.Join("..", "docker-compose.cluster.yml"), clusterFile, 0o644)
	for _, f := range []string{"temporal/Dockerfile", "temporal/.dockerignore", "worker/Dockerfile", "worker/.dockerignore"} {
		copyFile(t, filepath.Join("..", "docker", f), filepath.Join(dir, "docker", f), 0o644)
	}
	linkOrCopy(t, temporal, filepath.Join(dir, "docker", "temporal", "temporal"))
	copyFile(t, "/etc/ssl/certs/ca-certificates.crt", filepath.Join(dir, "docker", "worker", "ca-certificates.crt"), 0o644)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "docker", "worker", "adopt-worker"), "./worker")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build of ./worker: %v\n%s", err, out)
	}

	project := fmt.Sprintf("adoptcompose%06d", rand.IntN(1000000))
	port, uiPort, codecPort := freePort(t), freePort(t), freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// The stack's codec key, as `make compose-images` generates it: the
	// node's file names it for the operator's CLI, the services mount it.
	keyPath := filepath.Join(t.TempDir(), "codec.key")
	secret := make([]byte, 32)
	crand.Read(secret) //nolint:errcheck // never fails (crypto/rand)
	if err := os.WriteFile(keyPath, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	n := upNodeWith(t, sandbox.Spec{
		Name: "e2ecompose", Index: 130, CodecKeyFile: keyPath,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "53/udp"}),
		Closed:  config.MustPorts([]string{"8081/tcp"}),
	}, addr, e2eModules)

	env := append(os.Environ(),
		"ADOPTION_NODE_CONFIG="+n.cfg,
		"ADOPTION_NODE_ROOT="+n.Root,
		"ADOPTION_NODE_STATE_DIR="+n.StateDir,
		fmt.Sprintf("ADOPTION_TEMPORAL_PORT=%d", port),
		fmt.Sprintf("ADOPTION_UI_PORT=%d", uiPort),
		fmt.Sprintf("ADOPTION_CODEC_PORT=%d", codecPort),
		"ADOPTION_CODEC_KEY="+keyPath,
		"ADOPTION_IMAGE_TAG="+project,
		"ADOPTION_TLS_DIR="+t.TempDir(),
	)
	files := []string{"-f", composeFile}
	run := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		full := append(append(append(append([]string{}, compose[1:]...), "-p", project), files...), args...)
		cmd := exec.CommandContext(ctx, compose[0], full...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			err = fmt.Errorf("%s timed out after %s", strings.Join(args, " "), timeout)
		}
		return out.String(), err
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run(30*time.Second, "logs", "--no-color", "--tail", "40")
			t.Logf("compose logs:\n%s", out)
		}
		start := time.Now()
		if out, err := run(90*time.Second, "down", "-v", "--rmi", "all", "--remove-orphans", "-t", "10"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		} else {
			t.Logf("compose down -v --rmi all: %s", time.Since(start).Round(100*time.Millisecond))
		}
	})

	start := time.Now()
	if out, err := run(3*time.Minute, "build"); err != nil {
		t.Fatalf("compose build: %v\n%s", err, out)
	}
	t.Logf("compose build: %s", time.Since(start).Round(100*time.Millisecond))
	start = time.Now()
	// up waits for the dev server's health check before it starts the worker.
	if out, err := run(2*time.Minute, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	t.Logf("compose up -d (dev server healthy, worker started): %s", time.Since(start).Round(100*time.Millisecond))

	// No worker runs outside the stack: the node is adopted by the container.
	start = time.Now()
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: exit %d: %s%s", code, out, errs)
	}
	st := waitPhase(t, n, workflows.PhaseAdopted, 60*time.Second)
	t.Logf("adopt start to adopted: %s", time.Since(start).Round(100*time.Millisecond))
	if len(st.Custody) == 0 {
		t.Errorf("adopted without files in custody")
	}
	if _, err := os.Stat(filepath.Join(n.StateDir, "adopted.json")); err != nil {
		t.Errorf("the containerised worker did not write the node's marker through the state_dir mount: %v", err)
	}
	if logs, _ := run(30*time.Second, "logs", "--no-color", "orchestrator"); !strings.Contains(logs, "adopt-worker orchestrating") {
		t.Errorf("the orchestrator service does not run the workflows:\n%s", logs)
	}
	logs, _ := run(30*time.Second, "logs", "--no-color", "worker")
	if want := fmt.Sprintf("node=%s temporal=%s", n.Name, addr); !strings.Contains(logs, want) {
		t.Errorf("worker log does not say %q:\n%s", want, logs)
	}

	// The Web UI is published where the compose file says.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", uiPort))
	if err != nil {
		t.Errorf("Web UI on 127.0.0.1:%d: %v", uiPort, err)
	} else {
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Web UI on 127.0.0.1:%d: %s", uiPort, resp.Status)
		}
	}

	// The payloads are encrypted with the stack's key, the UI names the
	// codec service as its codec endpoint, and the codec service decodes a
	// history's payloads for the UI's origin.
	composeCodec(t, addr, n.Name, uiPort, codecPort)

	// The database is on the named volume: a new dev server container
	// still has the node's workflow.
	start = time.Now()
	if out, err := run(2*time.Minute, "up", "-d", "--no-deps", "--force-recreate", "temporal"); err != nil {
		t.Fatalf("compose up --force-recreate temporal: %v\n%s", err, out)
	}
	st = waitPhase(t, n, workflows.PhaseAdopted, 60*time.Second)
	t.Logf("dev server container recreated, workflow still %s: %s", st.Phase, time.Since(start).Round(100*time.Millisecond))

	// The cluster override: the worker alone, reaching Temporal through
	// temporal.address of the node's file (here the same dev server, as an
	// existing cluster would be), the TLS directory mounted. The status query
	// is answered by the recreated worker.
	files = []string{"-f", composeFile, "-f", clusterFile}
	start = time.Now()
	if out, err := run(time.Minute, "up", "-d", "--no-deps", "--force-recreate", "worker"); err != nil {
		t.Fatalf("compose up with docker-compose.cluster.yml: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", project+"_worker_1").CombinedOutput()
	if err != nil {
		// Compose v2 names containers project-worker-1.
		out, err = exec.Command("docker", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", project+"-worker-1").CombinedOutput()
	}
	if err != nil || !strings.Contains(string(out), "ADOPT_TEMPORAL_ADDRESS=\n") {
		t.Errorf("with the cluster override the worker's ADOPT_TEMPORAL_ADDRESS should be empty (the file's address holds): %v\n%s", err, out)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 60*time.Second)
	logs, _ = run(30*time.Second, "logs", "--no-color", "worker")
	if want := fmt.Sprintf("node=%s temporal=%s", n.Name, addr); !strings.Contains(logs, want) {
		t.Errorf("worker log (cluster override) does not say %q:\n%s", want, logs)
	}
	t.Logf("worker recreated with docker-compose.cluster.yml, status answered: %s", time.Since(start).Round(100*time.Millisecond))
}

// composeCommand finds Docker Compose: the v2 plugin (`docker compose`) or
// the v1 program (`docker-compose`). The test fails, not skips, without it.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("Docker engine not reachable (`docker info`): %v: %s", err, out)
	}
	if err := exec.Command("docker", "compose", "version").Run(); err == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		out, err := exec.Command(p, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("docker-compose does not run: %v: %s", err, out)
		}
		return []string{p}
	}
	t.Fatal("Docker Compose not found: neither `docker compose` (v2 plugin) nor `docker-compose` (v1; Debian: apt-get install docker-compose)")
	return nil
}

// staticTemporalBin finds a statically linked Temporal CLI for the FROM
// scratch image: $ADOPT_TEMPORAL_STATIC_BIN, the cache `make
// temporal-cli-static` builds, or the usual CLI if it happens to be static.
func staticTemporalBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ADOPT_TEMPORAL_STATIC_BIN"); p != "" {
		if err := checkStatic(p); err != nil {
			t.Fatalf("ADOPT_TEMPORAL_STATIC_BIN: %v", err)
		}
		return p
	}
	def := filepath.Join(os.Getenv("HOME"), ".cache", "adoption", "static", "bin", "temporal")
	if checkStatic(def) == nil {
		return def
	}
	if p := os.Getenv("ADOPT_TEMPORAL_BIN"); p != "" && checkStatic(p) == nil {
		return p
	}
	t.Fatalf("no statically linked Temporal CLI for the compose image at %s: run `make temporal-cli-static` "+
		"(CGO_ENABLED=0 GOBIN=%s go install github.com/temporalio/cli/cmd/temporal@v1.5.1) or set ADOPT_TEMPORAL_STATIC_BIN",
		def, filepath.Dir(def))
	return ""
}

// checkStatic says why path is not a statically linked executable: one with
// an ELF interpreter needs a libc that a FROM scratch image does not have.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (built with cgo)", path)
		}
	}
	return nil
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// linkOrCopy hard-links the 250 MB CLI into the build context when it can.
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Link(src, dst); err == nil {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// composeCodec checks the stack's encryption: the node workflow's input is
// encrypted in the history, the Web UI's settings name the codec service as
// its codec endpoint, and the codec service decodes the input for the UI's
// origin (the node's name in clear).
func composeCodec(t *testing.T, addr, node string, uiPort, codecPort int) {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := historyOf(t, c, workflows.WorkflowID(node))
	in := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput()
	if len(in.GetPayloads()) == 0 || string(in.Payloads[0].Metadata["encoding"]) != codec.Encoding {
		t.Fatalf("the node workflow's input is not encrypted: %v", in)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", codecPort)
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/settings", uiPort)); err != nil {
		t.Errorf("the Web UI's settings: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), endpoint) {
			t.Errorf("the Web UI's settings do not name the codec endpoint %s:\n%s", endpoint, b)
		}
	}
	body, err := protojson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	origin := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	req, err := http.NewRequest(http.MethodPost, endpoint+"/decode", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the codec service: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out commonpb.Payloads
	if resp.StatusCode != http.StatusOK || protojson.Unmarshal(b, &out) != nil || len(out.Payloads) == 0 {
		t.Fatalf("the codec service's /decode: %s\n%s", resp.Status, b)
	}
	if !strings.Contains(string(out.Payloads[0].Data), `"node":"`+node+`"`) {
		t.Errorf("the decoded input does not name node %s: %s", node, out.Payloads[0].Data)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != origin {
		t.Errorf("the codec service answers origin %s with %q", origin, got)
	}
}
