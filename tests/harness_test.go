// Package tests holds the end-to-end tests: a real Temporal dev server, the
// real worker and CLI binaries, sandbox nodes in real network namespaces
// with a real iptables-nft firewall, and real packets from a peer namespace.
package tests

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/config"
	"adoption/failpoint"
	"adoption/internal/devserver"
	"adoption/internal/opkey"
	"adoption/internal/testenv"
	"adoption/sandbox"
	"adoption/workflows"
)

// bin is where TestMain built the binaries.
var bin string

// failpointWorker is adopt-worker built with the failpoints tag.
const failpointWorker = "adopt-worker-failpoints"

func TestMain(m *testing.M) {
	if testenv.UnitOnly() || os.Geteuid() != 0 {
		os.Exit(m.Run()) // every test here skips (unit only) or fails (not root) by itself
	}
	dir, err := os.MkdirTemp("", "adoption-bin-")
	if err != nil {
		panic(err)
	}
	// adopt-worker is the production build; adopt-worker-failpoints is the
	// one built with the failpoints tag, which startWorker runs whenever a
	// test arms ADOPT_FAILPOINTS.
	for out, pkg := range map[string]string{"adopt": "./starter", "adopt-worker": "./worker", "adopt-sandbox": "./sandbox/cmd/adopt-sandbox",
		failpointWorker: "./worker"} {
		args := []string{"build", "-o", filepath.Join(dir, out)}
		if out == failpointWorker {
			args = append(args, "-tags", failpoint.Tag)
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, b)
			os.Exit(2)
		}
	}
	bin = dir
	// One operator key for the run: every sandbox node trusts it and the
	// CLI signs with it (sandbox.OperatorKey).
	k, err := opkey.Generate(dir, "operator", "e2e-operator")
	if err != nil {
		panic(err)
	}
	os.Setenv(sandbox.OperatorKeyEnv, k.Path)
	// One witness key: every sandbox node lists it (flip.witness.key) and
	// the orchestrator signs its verdicts with it.
	wk, err := opkey.Generate(dir, "witness", "e2e-witness")
	if err != nil {
		panic(err)
	}
	os.Setenv(sandbox.WitnessKeyEnv, wk.Path)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needE2E skips a test that needs root, namespaces and the Temporal CLI
// only when run as a unit-only pass (ADOPT_UNIT_ONLY); otherwise, not root
// or a missing tool fails it by name.
func needE2E(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "end-to-end: network namespaces, nftables, a dev server")
	testenv.NeedTools(t, "ip", "nft", "iptables")
}

func temporalBin(t *testing.T) string {
	t.Helper()
	return devserver.Bin(t)
}

func freePort(t *testing.T) int {
	t.Helper()
	return devserver.FreePort(t)
}

// devServer is a real Temporal dev server on its own ports and database,
// which a test may stop and start again.
type devServer struct {
	t    *testing.T
	spec devserver.Spec
	proc *devserver.Server
	orch *workerProc // the one orchestrator (adopt-worker orchestrate)
	// cluster, when set, is the external Temporal the test runs against
	// instead (cluster_harness_test.go).
	cluster *cluster
}

func (s *devServer) Addr() string {
	if s.cluster != nil {
		return s.cluster.addr
	}
	return fmt.Sprintf("127.0.0.1:%d", s.spec.Port)
}

// startDevServer starts a dev server and the one orchestrator that runs
// the workflows on it; node agents are started per node (startWorker).
func startDevServer(t *testing.T) *devServer {
	t.Helper()
	s := startDevServerOnly(t)
	s.orch = startOrchestrator(t, s.Addr())
	return s
}

// startDevServerOnly starts a dev server with no orchestrator.
func startDevServerOnly(t *testing.T) *devServer {
	t.Helper()
	return startDevServerArgs(t)
}

// startDevServerArgs starts a dev server with no orchestrator and more
// start-dev flags (e.g. --ui-codec-endpoint).
func startDevServerArgs(t *testing.T, extra ...string) *devServer {
	t.Helper()
	return launchDevServer(t, 0, extra...)
}

// launchDevServer starts a dev server with no orchestrator, its Web UI on
// uiPort (0: headless), and more start-dev flags.
func launchDevServer(t *testing.T, uiPort int, extra ...string) *devServer {
	t.Helper()
	// Whatever the test checks first, a dev server makes it end-to-end:
	// skipped in a unit-only pass (TestMain built no binaries then).
	needE2E(t)
	if c := clusterTarget(t); c != nil {
		return joinCluster(t, c, uiPort, extra)
	}
	dir := t.TempDir()
	s := &devServer{t: t, spec: devserver.Spec{Bin: temporalBin(t), DB: filepath.Join(dir, "temporal.db"), Log: filepath.Join(dir, "server.log"),
		Port: freePort(t), HTTPPort: freePort(t), MetricsPort: freePort(t), UIPort: uiPort, Extra: extra}}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start starts the server (again, after stop: the same ports and
// database).
func (s *devServer) start() {
	s.t.Helper()
	s.onOwnServer("start")
	var err error
	if s.proc, err = devserver.Launch(s.spec); err != nil {
		s.t.Fatal(err)
	}
}

func (s *devServer) stop() {
	s.onOwnServer("stop")
	s.proc.Stop()
}

// onOwnServer fails a test that would start or stop a server it shares.
func (s *devServer) onOwnServer(what string) {
	s.t.Helper()
	if s.cluster != nil {
		s.t.Fatalf("the test would %s its Temporal server, which it shares on the cluster (%s): run it on its own dev server (unset %s)", what, s.cluster.addr, clusterEnv)
	}
}

func (s *devServer) client(t *testing.T) client.Client {
	t.Helper()
	dial := func() (client.Client, error) { return client.Dial(client.Options{HostPort: s.Addr()}) }
	if s.cluster != nil {
		dial = s.cluster.dial
	}
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// node is a sandbox node with its configuration.
type node struct {
	*sandbox.Node
	cfg string
}

var e2eFiles = map[string]string{
	"/etc/hosts": "127.0.0.1 localhost\n",
	"/etc/ssh/sshd_config.d/predecessor.conf": "PasswordAuthentication no\n",
	"/srv/app/app.env":                        "APP_DB_PASSWORD=" + secretCanary + "\n",
}

// secretCanary is planted in a declared file: it must never reach Temporal.
const secretCanary = "canary-s3cr3t-7f3a9c1e"

const e2eModules = `modules:
  - name: app
    ports: ["8080/tcp"]
    files:
      - path: /srv/app/app.env
        content: "APP_DB_PASSWORD=mesh\n"
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost\n"
  - path: /etc/ssh/sshd_config.d/predecessor.conf
    content: "PasswordAuthentication no\n"
flip:
  confirm_timeout: 1m
`

func upNode(t *testing.T, name string, index int, temporalAddr string) *node {
	t.Helper()
	return upNodeWith(t, sandbox.Spec{
		Name: name, Index: index,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "53/udp"}),
		Closed:  config.MustPorts([]string{"8081/tcp"}),
	}, temporalAddr, e2eModules)
}

// upNodeWith raises a sandbox from spec (Dir, Binary and Files filled in)
// and writes its configuration with the given plan part.
func upNodeWith(t *testing.T, spec sandbox.Spec, temporalAddr, plan string) *node {
	t.Helper()
	spec.Dir, spec.Binary = t.TempDir(), filepath.Join(bin, "adopt-sandbox")
	onCluster(t, &spec)
	if spec.Files == nil {
		spec.Files = e2eFiles
	}
	n := sandbox.New(spec)
	if err := n.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Down() })
	cfg, err := n.WriteConfig(temporalAddr, plan)
	if err != nil {
		t.Fatal(err)
	}
	return &node{Node: n, cfg: cfg}
}

// worker is a running adopt-worker process.
type workerProc struct {
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error
}

func startWorker(t *testing.T, n *node, env ...string) *workerProc {
	t.Helper()
	exe := "adopt-worker"
	for _, e := range env {
		if strings.HasPrefix(e, failpoint.EnvVar+"=") {
			exe = failpointWorker // only a test build has failpoints
		}
	}
	return startWorkerBinary(t, n, exe, env...)
}

// startWorkerBinary runs the named build of the worker (adopt-worker, the
// production one, or failpointWorker).
func startWorkerBinary(t *testing.T, n *node, exe string, env ...string) *workerProc {
	t.Helper()
	w := &workerProc{log: &bytes.Buffer{}, done: make(chan error, 1)}
	w.cmd = exec.Command(filepath.Join(bin, exe), "run", "--config", n.cfg)
	w.cmd.Env = append(os.Environ(), env...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() { w.kill() })
	return w
}

// startOrchestrator runs `adopt-worker orchestrate` against addr: the
// workflow worker, which makes its build the deployment's current version.
func startOrchestrator(t *testing.T, addr string, args ...string) *workerProc {
	t.Helper()
	w := &workerProc{log: &bytes.Buffer{}, done: make(chan error, 1)}
	w.cmd = exec.Command(filepath.Join(bin, "adopt-worker"), append([]string{"orchestrate"}, args...)...)
	w.cmd.Env = append(os.Environ(), "ADOPT_CONFIG=", "ADOPT_TEMPORAL_ADDRESS="+addr, "ADOPT_WITNESS_KEY="+os.Getenv(sandbox.WitnessKeyEnv))
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("orchestrator log:\n%s", w.log.String())
		}
	})
	return w
}

// waitRunning waits until the worker says it serves its queue: its start
// checks (the custody key among them) are done by then.
func (w *workerProc) waitRunning(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(w.log.String(), "adopt-worker running") {
		select {
		case err := <-w.done:
			t.Fatalf("the worker exited before serving (%v):\n%s", err, w.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start serving within 60 s:\n%s", w.log)
		}
	}
}

func (w *workerProc) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// adopt runs the CLI and returns stdout, stderr and the exit code.
func adopt(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runBin(t, "adopt", args...)
}

func runBin(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	return runCmd(t, filepath.Join(bin, name), args...)
}

// runCmd runs a program to its end: stdout, stderr and the exit code.
func runCmd(t *testing.T, name string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func status(t *testing.T, n *node) (workflows.State, error) {
	t.Helper()
	out, errs, code := adopt(t, "status", n.Name, "--config", n.cfg, "--json")
	var st workflows.State
	if code != 0 {
		return st, fmt.Errorf("adopt status exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, err
	}
	// A status from visibility alone (no worker answered the query yet, as
	// right after a dev server restart) carries the phase and nothing else:
	// the tests want the recorded state.
	var from struct {
		StateFrom string `json:"state_from"`
	}
	if err := json.Unmarshal([]byte(out), &from); err == nil && from.StateFrom == "visibility" {
		return st, fmt.Errorf("node %s: only its phase is known yet (no worker answered)", n.Name)
	}
	return st, nil
}

func waitPhase(t *testing.T, n *node, want workflows.Phase, timeout time.Duration) workflows.State {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var st workflows.State
	var err error
	for time.Now().Before(deadline) {
		st, err = status(t, n)
		if err == nil && st.Phase == want {
			return st
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("node %s did not reach phase %s within %s: last phase %q, error %v, last_error %q", n.Name, want, timeout, st.Phase, err, st.LastError)
	return st
}

// ruleset lists the node's whole ruleset as nft prints it, counters zeroed.
func ruleset(t *testing.T, n *node) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	return stripCounters(string(out))
}

func stripCounters(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if i := strings.Index(line, "counter packets "); i >= 0 {
			rest := line[i+len("counter packets "):]
			// counter packets N bytes M
			f := strings.Fields(rest)
			if len(f) >= 3 {
				line = line[:i] + "counter" + strings.TrimPrefix(rest, f[0]+" bytes "+f[2])
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// reachable connects from the peer namespace to the node's port: a real
// packet through the node's real firewall, answered by a listener.
func reachable(t *testing.T, n *node, port int) bool { return connect(t, n, port) == "open" }

// passes says whether the firewall lets a new connection to port through,
// whether or not something listens there (an RST proves it passed).
func passes(t *testing.T, n *node, port int) bool { return connect(t, n, port) != "filtered" }

func connect(t *testing.T, n *node, port int) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.Peer, filepath.Join(bin, "adopt-sandbox"), "connect",
		fmt.Sprintf("%s:%d", n.Addr, port)).CombinedOutput()
	if err != nil {
		t.Fatalf("probe connect: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// keyedDigest is the node's keyed digest of content, as its custody
// records carry it (HMAC-SHA256 with state_dir/custody.key).
func keyedDigest(t *testing.T, n *node, content string) string {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(n.StateDir, "custody.key"))
	if err != nil {
		t.Fatalf("the node's custody key: %v", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(content))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}
