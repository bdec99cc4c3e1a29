package tests

// The cutover end to end on the reference node: the predecessor
// is a container of the node's own engine, its port published on the node
// and routed by ufw; clients reach it from the peer namespace through
// Docker's DNAT and the node's forward hook; the agent runs on the node and
// holds the module's published ports during the swap.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// refModule is a module taking over container name, published on every
// address of the node as port (container port 8080), its health asked on
// the node's loopback as the agent sees it.
func refModule(name string, port int, cmd string) string {
	return fmt.Sprintf(`  - name: %[1]s
    ports: ["%[2]d/tcp"]
    container:
      name: %[1]s
      image: %[3]s
      cmd: [%[4]s]
      ports: {"%[2]d/tcp": "8080/tcp"}
    files:
      - path: /srv/%[1]s/app.env
        mode: "0600"
        content: "MESH=1\n"
    health:
      http: http://127.0.0.1:%[2]d/health
      timeout: 3s
`, name, port, svcV2, cmd)
}

// refCutoverPlan is the plan of the given modules.
func refCutoverPlan(modules ...string) string {
	return "modules:\n" + strings.Join(modules, "") + "cutover:\n  stop_timeout: 2s\n"
}

// predecessor runs the predecessor's service in the node's engine, as the
// predecessor's operator did: data in a named volume, an anonymous volume and a
// bind mount, container port 8080 published on every address of the node as
// port and routed by ufw; extra are further `docker run` flags.
func (r *refNode) predecessor(t *testing.T, name string, port int, extra ...string) (bind string) {
	t.Helper()
	return r.predecessorCmd(t, name, port, extra)
}

// predecessorCmd is predecessor with cmd as the service's arguments.
func (r *refNode) predecessorCmd(t *testing.T, name string, port int, extra []string, cmd ...string) (bind string) {
	t.Helper()
	bind = t.TempDir()
	args := []string{"run", "-d", "--name", name, "--restart", "unless-stopped",
		"-v", name + "-data:/named", "-v", bind + ":/bind", "-p", fmt.Sprintf("%d:8080", port)}
	r.engine(t, append(append(append(args, extra...), svcV1), cmd...)...)
	if err := r.Route(config.Port{Num: 8080, Proto: "tcp"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := r.client(t, "get", fmt.Sprintf("http://%s:%d/health", r.Addr, port))
		if err == nil {
			return bind
		}
		if time.Now().After(deadline) {
			t.Fatalf("the predecessor %s does not answer clients on %d: %v: %s", name, port, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// names lists the node engine's containers called name or name.*, with
// their state.
func (r *refNode) names(t *testing.T, name string) []string {
	t.Helper()
	var names []string
	for _, l := range strings.Split(r.engine(t, "ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter", "name=^"+name), "\n") {
		if l != "" {
			names = append(names, l)
		}
	}
	return names
}

// ufwRules is the node's firewall apart from Docker's churn (a container
// recreated gets a new address and new DNAT rules): ufw's user chains,
// where marks go, on IPv4 and IPv6, and the tables (a hold left shows).
func (r *refNode) ufwRules(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, chain := range []string{"ip filter ufw-user-input", "ip filter ufw-user-forward", "ip6 filter ufw6-user-input", "ip6 filter ufw6-user-forward"} {
		b.WriteString(r.onNodeOut(t, append([]string{"nft", "list", "chain"}, strings.Fields(chain)...)...))
	}
	b.WriteString(r.onNodeOut(t, "nft", "list", "tables"))
	return stripCounters(b.String())
}

// noHoldWarning fails when the agent ran its cutovers without the port
// hold: on the reference node the engine is in the node's namespace, so
// the hold must be on.
func noHoldWarning(t *testing.T, w *workerProc) {
	t.Helper()
	if strings.Contains(w.log.String(), "no port hold") {
		t.Fatalf("the agent on the reference node runs its cutovers without the port hold:\n%s", w.log)
	}
}

// hammer runs the stand-in's HTTP hammer from the peer namespace on a
// published port for d.
type hammer struct {
	cmd   *exec.Cmd
	out   strings.Builder
	start time.Time
	d     time.Duration
}

func (r *refNode) hammer(t *testing.T, port int, d time.Duration, flags ...string) *hammer {
	t.Helper()
	h := &hammer{d: d, start: time.Now()}
	args := append([]string{"hammer", "--http", fmt.Sprintf("%s:%d", r.Addr, port), "--every", "5ms", "--for", d.String()}, flags...)
	h.cmd = r.InPeer(append([]string{filepath.Join(bin, "adopt-sandbox")}, args...)...)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	})
	answered(t, r.Peer, port, h.cmd.Process.Pid)
	return h
}

// answeredWithin bounds the wait for a load's first answer: the clients
// ask every 5 ms, so this is room for a loaded machine.
const answeredWithin = 30 * time.Second

// answered waits until the load pid in the peer namespace has been
// answered on port: a connection of its own to port shows there past
// SYN-SENT (a hammer holds one open for its whole run). What the test does
// next then falls within the load's run.
func answered(t *testing.T, peer string, port, pid int) {
	t.Helper()
	var out []byte
	var err error
	for deadline := time.Now().Add(answeredWithin); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, err = exec.Command("ip", "netns", "exec", peer, "ss", "-Htanp", "state", "synchronized", "dport", "=", fmt.Sprintf(":%d", port)).CombinedOutput()
		if err == nil && strings.Contains(string(out), fmt.Sprintf("pid=%d,", pid)) {
			return
		}
	}
	t.Fatalf("load %d in %s not answered on port %d within %s: %v %s", pid, peer, port, answeredWithin, err, out)
}

func (h *hammer) wait(t *testing.T) sandbox.HammerResult {
	t.Helper()
	return loadResult[sandbox.HammerResult](t, "hammer", h.cmd, &h.out)
}

// loadResult waits for a load generator to end and reads the JSON result
// it printed.
func loadResult[R any](t *testing.T, what string, cmd *exec.Cmd, out *strings.Builder) R {
	t.Helper()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v %s", what, err, out.String())
	}
	var res R
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		t.Fatalf("%s output %q: %v", what, out.String(), err)
	}
	return res
}

// TestCutoverRollbackRetry: assigning a module migrates it. Its first
// container never becomes healthy: the cutover rolls back by itself (the
// predecessor serves its data to clients again, the files are as found, the
// module's marked rules and the hold are gone) and status names the step.
// Fixed in the configuration, `adopt retry` carries the new plan and the
// cutover keeps the data (checksums equal), leaves one container with the
// name and the predecessor stopped as <name>.predecessor; clients
// hammering the published port from outside across that cutover see no
// failed connection: the hold keeps their SYNs through the swap.
func TestCutoverRollbackRetry(t *testing.T) {
	srv := startDevServer(t)
	const name, port = "e2ecut", 18481
	r := upRefNodeWith(t, name, 107, srv, nil, cutoverFiles(name), refCutoverPlan(refModule(name, port, `"-fail", "nolisten"`)))
	n := r.node
	bind := r.predecessor(t, name, port)
	sums := r.get(t, port, "/sums")
	if sums == "" || !strings.Contains(sums, "/bind") {
		t.Fatalf("predecessor's checksums: %q", sums)
	}
	found := r.ufwRules(t)
	w := startAgent(t, r)
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
	if got := r.get(t, port, "/sums"); got != sums {
		t.Fatalf("after rollback the predecessor serves clients other data:\n%s\nwant\n%s", got, sums)
	}
	if got := r.get(t, port, "/version"); got != "v1" {
		t.Fatalf("after rollback clients get %q, want the predecessor v1", got)
	}
	if names := r.names(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("containers after rollback: %v", names)
	}
	b, err := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if err != nil || string(b) != cutoverFiles(name)["/srv/"+name+"/app.env"] {
		t.Fatalf("the module's file is not as found after rollback: %q %v", b, err)
	}
	if got := r.ufwRules(t); got != found {
		t.Fatalf("the module's marked rules or its hold survived the rollback:\n%s\nwant\n%s", got, found)
	}

	// The operator fixes the module (no failing flag) and retries, while
	// clients outside keep connecting to its published port.
	cfg, _ := os.ReadFile(n.cfg)
	if err := os.WriteFile(n.cfg, []byte(strings.Replace(string(cfg), `cmd: ["-fail", "nolisten"]`, `cmd: []`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	h := r.hammer(t, port, 10*time.Second)
	if out, errs, code := adopt(t, "retry", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: %s%s", out, errs)
	}
	st = waitFor(t, n, "the retried cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	done := time.Since(h.start)
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("retry failed: %q", st.Modules[0].LastError)
	}
	res := h.wait(t)
	t.Logf("cutover under load, published port %d from the peer: %d connections ok, %d refused, %d timed out; slowest answer %s, longest gap between answers %s; cutover done %s into the %s run",
		port, res.OK, res.Refused, res.TimedOut, res.Slowest.Round(time.Millisecond), res.Gap.Round(time.Millisecond), done.Round(time.Millisecond), h.d)
	if done > h.d {
		t.Fatalf("the cutover ended %s after the hammer started, past its %s: the figures do not cover the swap", done.Round(time.Millisecond), h.d)
	}
	if res.OK == 0 || res.Refused != 0 || res.TimedOut != 0 {
		t.Errorf("the cutover failed clients of published port %d: %+v", port, res)
	}
	noHoldWarning(t, w)
	r.assertMigrated(t, name, port, sums, bind)
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
	if names := r.names(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("containers after prune: %v", names)
	}
	r.engine(t, "volume", "inspect", name+"-data")
	if got := r.get(t, port, "/sums"); got != sums {
		t.Fatal("data changed by the prune")
	}
}

// TestCutoverRefusesPortHeldByAnother: a module whose port is held by
// something other than its predecessor (the node's own process listening
// on 8081) is refused before anything changes, naming the holder.
func TestCutoverRefusesPortHeldByAnother(t *testing.T) {
	srv := startDevServer(t)
	const name, port = "e2eheld", 8081 // the reference node's host service, not a container
	r := upRefNodeWith(t, name, 108, srv, nil, cutoverFiles(name), refCutoverPlan(refModule(name, port, "")))
	n := r.node
	found := ruleset(t, n)
	startAgent(t, r)
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
	if names := r.names(t, name); len(names) != 0 {
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

// assertMigrated: clients get the module's v2 with the predecessor's data
// through the published port, the node's engine runs one container with
// the name and keeps the predecessor stopped, the file is converged, and
// the module's port is marked once on the input path and once on the
// forward path (the container publishes it), never twice in one chain.
func (r *refNode) assertMigrated(t *testing.T, name string, port int, sums, bind string) {
	t.Helper()
	if got := r.get(t, port, "/sums"); got != sums {
		t.Fatalf("the new container serves clients other data:\n%s\nwant\n%s", got, sums)
	}
	if got := r.get(t, port, "/version"); got != "v2" {
		t.Fatalf("clients get %q, want the module's v2", got)
	}
	names := r.names(t, name)
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
	path := filepath.Join(r.Root, "srv", name, "app.env")
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "MESH=1\n" {
		t.Fatalf("the module's file was not converged: %q %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("converged file mode %v, want 0600", fi.Mode())
	}
	mark := fmt.Sprintf("adoption:%s:%s:%d/tcp", r.Name, name, port)
	perChain := map[string]int{}
	for _, l := range strings.Split(r.onNodeOut(t, "iptables-save"), "\n") {
		if strings.Contains(l, mark) {
			chain, _, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " ")
			perChain[chain]++
		}
	}
	if perChain["ufw-user-input"] != 1 || perChain["ufw-user-forward"] != 1 || len(perChain) != 2 {
		t.Fatalf("the module's port is marked %v (per chain), want once in ufw-user-input and once in ufw-user-forward", perChain)
	}
	if entries, _ := os.ReadDir(bind); len(entries) == 0 {
		t.Fatal("the bind mount lost its data")
	}
}

// TestCutoverSurvivesWorkerKill kills the agent at cutover steps (two drawn
// at random in `make test`, every one with ADOPT_CHAOS=full), one module
// each on one reference node, and starts it again: the cutover completes
// with the data, never two containers with the name, never a marked rule
// twice.
func TestCutoverSurvivesWorkerKill(t *testing.T) {
	steps := []string{"cutover:create", "cutover:converge-file", "cutover:swap/stop-predecessor", "cutover:swap/window",
		"cutover:swap/rename-predecessor", "cutover:swap/rename-next", "cutover:swap/start", "cutover:wait-healthy", "open-rules"}
	if os.Getenv("ADOPT_CHAOS") != "full" {
		seed := time.Now().UnixNano()
		t.Logf("failpoint seed %d (ADOPT_CHAOS=full runs every step)", seed)
		rn := rand.New(rand.NewSource(seed))
		rn.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		steps = steps[:2]
	}
	srv := startDevServer(t)
	name := func(i int) string { return fmt.Sprintf("e2ekill%d", i) }
	port := func(i int) int { return 18490 + i }
	var modules []string
	files := map[string]string{}
	for i := range steps {
		modules = append(modules, refModule(name(i), port(i), ""))
		for k, v := range cutoverFiles(name(i)) {
			files[k] = v
		}
	}
	r := upRefNodeWith(t, "e2ekill", 110, srv, nil, files, refCutoverPlan(modules...))
	n := r.node
	binds, sums := map[int]string{}, map[int]string{}
	for i := range steps {
		binds[i] = r.predecessor(t, name(i), port(i))
		sums[i] = r.get(t, port(i), "/sums")
	}
	w := startAgent(t, r)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	w.kill()
	for i, fp := range steps {
		t.Run(strings.ReplaceAll(fp, "/", "-"), func(t *testing.T) {
			w1 := startAgent(t, r, "ADOPT_FAILPOINTS="+fp)
			if _, errs, code := adopt(t, "migrate", n.Name, name(i), "--config", n.cfg); code != 0 {
				t.Fatal(errs)
			}
			select {
			case <-w1.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the agent never reached failpoint %s:\n%s", fp, w1.log)
			}
			if names := r.names(t, name(i)); len(names) > 2 {
				t.Fatalf("after the kill: %v", names)
			}
			w2 := startAgent(t, r)
			defer w2.kill()
			st := waitFor(t, n, "the cutover to finish after the restart", func(st workflows.State) bool {
				// While the agent restarts, status may answer without the
				// workflow's details (no modules yet).
				s := moduleState(st, name(i))
				return s == workflows.ModuleMigrated || s == workflows.ModuleFailed
			})
			if s := moduleState(st, name(i)); s != workflows.ModuleMigrated {
				for _, m := range st.Modules {
					if m.Name == name(i) {
						t.Fatalf("cutover failed after the restart: %s", m.LastError)
					}
				}
			}
			noHoldWarning(t, w2)
			r.assertMigrated(t, name(i), port(i), sums[i], binds[i])
		})
	}
}
