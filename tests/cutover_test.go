package tests

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
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
	return fmt.Sprintf(`modules:
  - name: %[1]s
    ports: ["%[2]d/tcp"]
    container:
      name: %[1]s
      image: %[3]s
      cmd: [%[4]s]
      ports: {"127.0.0.1:%[2]d/tcp": "8080/tcp"}
    files:
      - path: /srv/%[1]s/app.env
        mode: "0600"
        content: "MESH=1\n"
    health:
      http: http://127.0.0.1:%[2]d/health
      timeout: 3s
cutover:
  stop_timeout: 2s
`, name, port, svcV2, cmd)
}

var cutoverFiles = func(name string) map[string]string {
	return map[string]string{"/srv/" + name + "/app.env": "PREDECESSOR_SECRET=" + secretCanary + "\n"}
}

// TestCutoverRollbackRetry: assigning a module migrates it. Its first
// container never becomes healthy: the cutover rolls back by itself (the
// predecessor serves its data again, the files are as found, the module's
// marked rules are gone) and status names the step. Fixed in the
// configuration, `adopt retry` carries the new plan and the cutover keeps the
// data (checksums equal), leaves one container with the name and the
// predecessor stopped as <name>.predecessor.
func TestCutoverRollbackRetry(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2ecut", 18481
	bind := predecessor(t, name, port)
	sums := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port))
	if sums == "" || !strings.Contains(sums, "/bind") {
		t.Fatalf("predecessor's checksums: %q", sums)
	}
	n := upNodeWith(t, sandbox.Spec{Name: "e2ecut", Index: 107, Files: cutoverFiles(name),
		Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), cutoverPlan(name, port, `"-fail", "nolisten"`))
	found := ruleset(t, n)
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	st := waitFor(t, n, "the cutover to fail", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleFailed })
	if m := st.Modules[0]; !strings.Contains(m.LastError, `step "wait healthy" failed`) || !strings.Contains(m.LastError, "rolled back") {
		t.Fatalf("status does not say which step failed and that it rolled back: %q", m.LastError)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port)); got != sums {
		t.Fatalf("after rollback the predecessor serves other data:\n%s\nwant\n%s", got, sums)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/version", port)); !strings.Contains(got, "v1") {
		t.Fatalf("after rollback the service is %q, want the predecessor v1", got)
	}
	if names := containerNames(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("containers after rollback: %v", names)
	}
	b, err := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if err != nil || string(b) != cutoverFiles(name)["/srv/"+name+"/app.env"] {
		t.Fatalf("the module's file is not as found after rollback: %q %v", b, err)
	}
	if got := ruleset(t, n); got != found {
		t.Fatalf("the module's marked rules survived the rollback:\n%s", got)
	}

	// The operator fixes the module (no failing flag) and retries.
	cfg, _ := os.ReadFile(n.cfg)
	if err := os.WriteFile(n.cfg, []byte(strings.Replace(string(cfg), `cmd: ["-fail", "nolisten"]`, `cmd: []`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := adopt(t, "retry", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "the retried cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("retry failed: %q", st.Modules[0].LastError)
	}
	assertMigrated(t, n, name, port, sums, bind)
	if _, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code == 0 || !strings.Contains(errs, "already migrated") {
		t.Fatalf("a second migrate of a migrated module: exit %d %s", code, errs)
	}

	// Prune: the kept predecessor goes, its volumes and the data stay.
	if out, errs, code := adopt(t, "prune", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("prune: %s%s", out, errs)
	}
	waitFor(t, n, "the prune", func(st workflows.State) bool {
		return len(st.Events) > 0 && strings.HasPrefix(st.Events[len(st.Events)-1].Text, "pruned 1 predecessor")
	})
	if names := containerNames(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("containers after prune: %v", names)
	}
	docker(t, "volume", "inspect", name+"-data")
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port)); got != sums {
		t.Fatal("data changed by the prune")
	}
}

// TestCutoverRefusesPortHeldByAnother: a module whose port is held by
// something other than its predecessor is refused before anything changes,
// naming the holder.
func TestCutoverRefusesPortHeldByAnother(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2eheld", 18487
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 108, Files: cutoverFiles(name),
		Allowed: config.MustPorts([]string{"22/tcp"}),
		Closed:  config.MustPorts([]string{fmt.Sprintf("%d/tcp", port)}), // a predecessor process, not a container
	}, srv.Addr(), cutoverPlan(name, port, ""))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name, name+".next").Run() })
	found := ruleset(t, n)
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if _, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	st := waitFor(t, n, "the refusal", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleFailed })
	if e := st.Modules[0].LastError; !strings.Contains(e, `step "preflight" failed`) ||
		!strings.Contains(e, fmt.Sprintf("port %d/tcp is held by pid", port)) || !strings.Contains(e, "(adopt-sandbox)") {
		t.Fatalf("refusal does not name the holder: %q", e)
	}
	if names := containerNames(t, name); len(names) != 0 {
		t.Fatalf("a refused cutover created containers: %v", names)
	}
	if got := ruleset(t, n); got != found {
		t.Fatal("a refused cutover changed the ruleset")
	}
	b, _ := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if string(b) != cutoverFiles(name)["/srv/"+name+"/app.env"] {
		t.Fatalf("a refused cutover changed the module's file: %q", b)
	}
}

func assertMigrated(t *testing.T, n *node, name string, port int, sums, bind string) {
	t.Helper()
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port)); got != sums {
		t.Fatalf("the new container serves other data:\n%s\nwant\n%s", got, sums)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/version", port)); !strings.Contains(got, "v2") {
		t.Fatalf("the service is %q, want the module's v2", got)
	}
	names := containerNames(t, name)
	live, kept := 0, 0
	for _, c := range names {
		switch c {
		case name + " running":
			live++
		case name + ".predecessor exited":
			kept++
		default:
			t.Errorf("unexpected container %q", c)
		}
	}
	if live != 1 || kept != 1 {
		t.Fatalf("want exactly one %s running and its predecessor kept stopped: %v", name, names)
	}
	b, err := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if err != nil || string(b) != "MESH=1\n" {
		t.Fatalf("the module's file was not converged: %q %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(n.Root, "srv", name, "app.env")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("converged file mode %v, want 0600", fi.Mode())
	}
	// Once on the input path, and (the container publishes it) at most once
	// on the forward path: never twice in one chain.
	mark := fmt.Sprintf("adoption:%s:%s:%d/tcp", n.Name, name, port)
	perChain := map[string]int{}
	for _, l := range strings.Split(iptablesSave(t, n, "iptables-save"), "\n") {
		if strings.Contains(l, mark) {
			chain, _, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
			perChain[chain]++
		}
	}
	if perChain["ufw-user-input"] != 1 || perChain["ufw-user-forward"] > 1 || len(perChain) > 2 {
		t.Fatalf("the module's port is marked %v (per chain), want once in ufw-user-input and at most once in ufw-user-forward", perChain)
	}
	if entries, _ := os.ReadDir(bind); len(entries) == 0 {
		t.Fatal("the bind mount lost its data")
	}
}

// TestCutoverSurvivesWorkerKill kills the worker at cutover steps (two drawn
// at random in `make test`, every one with ADOPT_CHAOS=full) and starts it
// again: the cutover completes with the data, never two containers with
// the name, never a marked rule twice.
func TestCutoverSurvivesWorkerKill(t *testing.T) {
	needDocker(t)
	steps := []string{"cutover:create", "cutover:converge-file", "cutover:swap/stop-predecessor",
		"cutover:swap/rename-predecessor", "cutover:swap/rename-next", "cutover:swap/start", "cutover:wait-healthy", "open-rules"}
	if os.Getenv("ADOPT_CHAOS") != "full" {
		seed := time.Now().UnixNano()
		t.Logf("failpoint seed %d (ADOPT_CHAOS=full runs every step)", seed)
		r := rand.New(rand.NewSource(seed))
		r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		steps = steps[:2]
	}
	srv := startDevServer(t)
	for i, fp := range steps {
		t.Run(strings.ReplaceAll(fp, "/", "-"), func(t *testing.T) {
			name := fmt.Sprintf("e2ekill%d", i)
			port := 18490 + i
			bind := predecessor(t, name, port)
			sums := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port))
			n := upNodeWith(t, sandbox.Spec{Name: name, Index: 110 + i, Files: cutoverFiles(name),
				Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), cutoverPlan(name, port, ""))
			w1 := startWorker(t, n, "ADOPT_FAILPOINTS="+fp)
			if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
				t.Fatal(errs)
			}
			waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
			if _, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
				t.Fatal(errs)
			}
			select {
			case <-w1.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the worker never reached failpoint %s:\n%s", fp, w1.log)
			}
			if names := containerNames(t, name); len(names) > 2 {
				t.Fatalf("after the kill: %v", names)
			}
			startWorker(t, n)
			st := waitFor(t, n, "the cutover to finish after the restart", func(st workflows.State) bool {
				// While the worker restarts, status may answer without the
				// workflow's details (no modules yet).
				return len(st.Modules) > 0 && (st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed)
			})
			if st.Modules[0].State != workflows.ModuleMigrated {
				t.Fatalf("cutover failed after the restart: %s", st.Modules[0].LastError)
			}
			assertMigrated(t, n, name, port, sums, bind)
		})
	}
}
