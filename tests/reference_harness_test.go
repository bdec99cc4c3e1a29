package tests

// This file holds the reference node's harness: a sandbox node with its own
// Docker engine in its namespace, the real ufw with the ufw-docker
// arrangement, services as containers with published ports, clients in a
// peer namespace with public addresses, and the agent run on the node,
// reaching the test's dev server over the management link.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/activities"
	"adoption/config"
	"adoption/failpoint"
	"adoption/internal/fwtest"
	"adoption/sandbox"
)

// refNode is a reference node with its configuration; node is the same
// node for the harness's status/wait helpers, which speak through the CLI.
type refNode struct {
	*sandbox.RefNode
	cfg  string
	node *node
}

// refService is the stand-in service as a container of the node's engine:
// listening on its container port, data in NAME-data and an anonymous
// volume.
func refService(name string, host, ctr int, routed bool) sandbox.Service {
	return sandbox.Service{
		Name: name, Image: svcV1, Routed: routed,
		Host:      config.Port{Num: uint16(host), Proto: "tcp"},
		Container: config.Port{Num: uint16(ctr), Proto: "tcp"},
		Cmd:       []string{"-listen", fmt.Sprintf(":%d", ctr), "-data", "/named,/anon"},
		Volumes:   []string{name + "-data:/named"},
	}
}

// refServiceFrom is refService routed by ufw from src only.
func refServiceFrom(name string, host, ctr int, src string) sandbox.Service {
	s := refService(name, host, ctr, false)
	s.RoutedFrom = src
	return s
}

// upRefNode raises a reference node: host services 22/tcp (allowed) and
// 8081/tcp (not allowed), the given services, svcV1 loaded for
// predecessors a test runs itself and svcV2 for modules to migrate to, and
// the agent's configuration with plan.
func upRefNode(t *testing.T, name string, index int, srv *devServer, services []sandbox.Service, plan string) *refNode {
	t.Helper()
	return upRefNodeWith(t, name, index, srv, services, e2eFiles, plan)
}

// upRefNodeWith is upRefNode with the predecessor's files on the node.
func upRefNodeWith(t *testing.T, name string, index int, srv *devServer, services []sandbox.Service, files map[string]string, plan string) *refNode {
	t.Helper()
	needDocker(t)
	if _, err := exec.LookPath("ufw"); err != nil {
		t.Fatal("the reference node's firewall is ufw's: ufw is not installed (apt-get install ufw)")
	}
	spec := sandbox.RefSpec{
		Spec: sandbox.Spec{
			Name: name, Index: index, Dir: t.TempDir(), Binary: filepath.Join(bin, "adopt-sandbox"),
			Allowed: config.MustPorts([]string{"22/tcp"}),
			Closed:  config.MustPorts([]string{"8081/tcp"}),
			Files:   files,
		},
		Services: services,
		Images:   []string{svcV1, svcV2},
	}
	if srv != nil {
		spec.Temporal = srv.Addr()
	}
	return upRefNodeSpec(t, spec, plan)
}

// upRefNodeSpec raises the reference node spec describes, down at the
// test's end, with the agent's configuration holding plan.
func upRefNodeSpec(t *testing.T, spec sandbox.RefSpec, plan string) *refNode {
	t.Helper()
	return upRefNodes(t, []sandbox.RefSpec{spec}, plan)[0]
}

// upRefNodes raises the reference nodes specs describe all at once (each
// its own engine, ufw and links: nothing of one waits on another), down at
// the test's end, each with the agent's configuration holding plan.
func upRefNodes(t *testing.T, specs []sandbox.RefSpec, plan string) []*refNode {
	t.Helper()
	needDocker(t)
	if _, err := exec.LookPath("ufw"); err != nil {
		t.Fatal("the reference node's firewall is ufw's: ufw is not installed (apt-get install ufw)")
	}
	rs := make([]*sandbox.RefNode, len(specs))
	errs := make([]error, len(specs))
	var names []string
	var wg sync.WaitGroup
	start := time.Now()
	for i, spec := range specs {
		onCluster(t, &spec.Spec)
		rs[i] = sandbox.NewRef(spec)
		names = append(names, spec.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rs[i].Up() // a failed Up removes what it raised
		}()
	}
	wg.Wait()
	for i, r := range rs {
		if errs[i] != nil {
			continue
		}
		t.Cleanup(func() {
			if err := r.Down(); err != nil {
				t.Errorf("reference node down: %v", err)
			}
		})
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reference node %s: %v", specs[i].Name, err)
		}
	}
	t.Logf("reference node(s) %s up in %s", strings.Join(names, ", "), time.Since(start).Round(10*time.Millisecond))
	out := make([]*refNode, len(rs))
	for i, r := range rs {
		cfg, err := r.WriteConfig(plan)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &refNode{RefNode: r, cfg: cfg, node: &node{Node: r.Node, cfg: cfg}}
	}
	return out
}

// startAgent runs adopt-worker on the node: in its namespace (nsenter
// --net), as a node's own agent runs; the failpoints build when env arms
// ADOPT_FAILPOINTS.
func startAgent(t *testing.T, r *refNode, env ...string) *workerProc {
	t.Helper()
	exe := "adopt-worker"
	for _, e := range env {
		if strings.HasPrefix(e, failpoint.EnvVar+"=") {
			exe = failpointWorker
		}
	}
	w := &workerProc{log: &bytes.Buffer{}, done: make(chan error, 1)}
	w.cmd = r.OnNode(filepath.Join(bin, exe), "run", "--config", r.cfg)
	w.cmd.Env = append(w.cmd.Env, env...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("agent on %s:\n%s", r.Name, w.log)
		}
	})
	return w
}

// probeOnNode runs `adopt-worker probe --json` on the node.
func probeOnNode(t *testing.T, r *refNode, env ...string) (*activities.ProbeReport, string) {
	t.Helper()
	cmd := r.OnNode(filepath.Join(bin, "adopt-worker"), "probe", "--config", r.cfg, "--json")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe on %s: %v: %s", r.Name, err, out)
	}
	var rep activities.ProbeReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("probe JSON: %v: %s", err, out)
	}
	return &rep, string(out)
}

// client runs the sandbox binary as a client in the peer namespace.
func (r *refNode) client(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := r.InPeer(append([]string{filepath.Join(bin, "adopt-sandbox")}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// dial says what a client's TCP connection to addr:port met: open,
// refused or filtered.
func (r *refNode) dial(t *testing.T, addr string, port int) string {
	t.Helper()
	host := addr
	if strings.Contains(addr, ":") {
		host = "[" + addr + "]"
	}
	out, err := r.client(t, "connect", fmt.Sprintf("%s:%d", host, port))
	if err != nil {
		t.Fatalf("connect from the peer: %v: %s", err, out)
	}
	return out
}

// get is a client's HTTP GET of a published port's path.
func (r *refNode) get(t *testing.T, port int, path string) string {
	t.Helper()
	out, err := r.client(t, "get", fmt.Sprintf("http://%s:%d%s", r.Addr, port, path))
	if err != nil {
		t.Fatalf("a client's GET %s:%d%s: %v: %s", r.Addr, port, path, err, out)
	}
	return out
}

// ufw runs ufw on the node, as the predecessor's operator does: it reads
// the node's own /etc/ufw, bind-mounted by ip netns exec.
func (r *refNode) ufw(t *testing.T, args ...string) {
	t.Helper()
	fwtest.Run(t, "", "ip", append([]string{"netns", "exec", r.Netns, "ufw"}, args...)...)
}

// engine runs docker against the node's own engine.
func (r *refNode) engine(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"-H", r.DockerHost()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker -H %s %s: %v: %s", r.DockerHost(), strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// setFlipDrop replaces the plan's flip.drop list.
func setFlipDrop(t *testing.T, cfg, drop string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.Index(s, "  drop: ["); i >= 0 {
		j := strings.Index(s[i:], "]\n")
		s = s[:i] + "  drop: [" + drop + "]\n" + s[i+j+2:]
	} else {
		s = strings.Replace(s, "flip:\n", "flip:\n  drop: ["+drop+"]\n", 1)
	}
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
