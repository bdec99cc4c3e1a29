package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// chaosFailpoints is every named step a full node migration (adopt,
// genesis, three modules, flip) passes through, in the order it passes
// them. `release-removed` is not on the path of a migration that ends in a
// flip (TestGenesisMarksReconcileRelease covers release), and the prune
// inside the flip's commit runs without the cutover's progress hook, so
// "cutover:prune/remove-predecessor" never fires there.
var chaosFailpoints = []string{
	"probe",
	"adopt-custody",
	"adopt-marked",
	"open-rules",
	"cutover:converge-file",
	"cutover:preflight",
	"cutover:create",
	"cutover:swap/arm-restart",
	"cutover:swap/disarm-predecessor-restart",
	"cutover:swap/stop-predecessor",
	"cutover:swap/window",
	"cutover:swap/rename-predecessor",
	"cutover:swap/rename-next",
	"cutover:swap/start",
	"cutover:wait-healthy",
	"flip-before-apply",
	"flip-after-batch",
	"flip-applied",
	"commit-persisted",
}

// chaosServerRestart names the run that restarts the dev server instead of
// killing the worker.
const chaosServerRestart = "server-restart"

// chaosParallel bounds how many migrations run at once in the full form.
const chaosParallel = 6

// TestChaos runs a whole node migration (adopt, genesis on a control node,
// three modules: one a container cutover carrying the predecessor's data,
// two ports and files only; then the flip with the drop it needs) once per
// named failpoint, the worker killed there and a fresh one started, and
// once restarting the Temporal dev server in the middle of a cutover. Each
// run must end converged with: one container of the module's name, the
// data's checksums as the predecessor served them, no marked rule left
// (the ufw chains are gone), the custody store intact, the mesh's derived
// firewall in force. At the moment of each kill the firewall must be the
// found one (every mark at most once), or the flip's transient form, or the
// mesh's: never anything in between.
//
// `make test` runs two failpoints drawn at random (the random seed is logged;
// ADOPT_CHAOS_SEED replays it); ADOPT_CHAOS=full runs every failpoint and
// the server restart.
func TestChaos(t *testing.T) {
	needDocker(t)
	runs := append([]string(nil), chaosFailpoints...)
	full := os.Getenv("ADOPT_CHAOS") == "full"
	if full {
		runs = append(runs, chaosServerRestart)
	} else {
		seed := time.Now().UnixNano()
		if s := os.Getenv("ADOPT_CHAOS_SEED"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("ADOPT_CHAOS_SEED=%q: %v", s, err)
			}
			seed = v
		}
		t.Logf("chaos seed %d: replay with ADOPT_CHAOS_SEED=%d; ADOPT_CHAOS=full runs every failpoint and the server restart", seed, seed)
		r := rand.New(rand.NewSource(seed))
		r.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		runs = runs[:2]
	}
	shared := startDevServer(t)
	sem := make(chan struct{}, chaosParallel)
	for _, fp := range runs {
		i := chaosIndex(fp)
		t.Run(strings.NewReplacer("/", "-", ":", "-").Replace(fp), func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			srv := shared
			if fp == chaosServerRestart {
				srv = startDevServer(t) // restarted: it must be this run's alone
			}
			start := time.Now()
			chaosMigration(t, srv, i, fp)
			t.Logf("%s: converged in %s", fp, time.Since(start).Round(time.Second))
		})
	}
}

// chaosIndex gives every run its own sandbox index (140+), node name and
// port (18600+), whichever runs are drawn.
func chaosIndex(fp string) int {
	for i, f := range chaosFailpoints {
		if f == fp {
			return i
		}
	}
	return len(chaosFailpoints)
}

const (
	chaosRegistry = 18680
	chaosStore    = 18681
)

func chaosPlan(ctr string, port int) string {
	return fmt.Sprintf(`foundation:
  ports:
    registry: %[3]d/tcp
    store: %[4]d/tcp
firewall:
  reconcile_interval: 2s
# Drift is off here: TestInterferenceMigratedFileIsNotDrift covers it (a
# migrated module's converged file must not count as drift).
drift:
  interval: 0s
modules:
  - name: web
    ports: ["80/tcp"]
    holders: ["adopt-sandbox"]
    files:
      - path: /srv/web/web.conf
        content: "mesh web\n"
  - name: svc
    ports: ["%[2]d/tcp"]
    container:
      name: %[1]s
      image: %[5]s
      ports: {"127.0.0.1:%[2]d/tcp": "8080/tcp"}
    files:
      - path: /srv/svc/app.env
        mode: "0600"
        content: "MESH=1\n"
    health:
      http: http://127.0.0.1:%[2]d/health
      timeout: 5s
  - name: app
    ports: ["9090/tcp"]
    files:
      - path: /srv/app/app.env
        content: "APP=mesh\n"
node_files:
  - path: /etc/hosts
    content: "127.0.0.1 localhost mesh\n"
flip:
  drop: ["8080/tcp"]
  confirm_timeout: 30s
cutover:
  stop_timeout: 2s
`, ctr, port, chaosRegistry, chaosStore, svcV2)
}

var chaosFound = map[string]string{
	"/srv/web/web.conf": "predecessor web\n",
	"/srv/svc/app.env":  "PREDECESSOR_SECRET=" + secretCanary + "\n",
	"/srv/app/app.env":  "APP=predecessor\n",
	"/etc/hosts":        "127.0.0.1 localhost predecessor\n",
}

var chaosMesh = map[string]string{
	"/srv/web/web.conf": "mesh web\n",
	"/srv/svc/app.env":  "MESH=1\n",
	"/srv/app/app.env":  "APP=mesh\n",
	"/etc/hosts":        "127.0.0.1 localhost mesh\n",
}

// killReport is what the supervisor saw when the worker died.
type killReport struct {
	code  int
	log   string
	shape string
	notes []string
}

func chaosMigration(t *testing.T, srv *devServer, i int, fp string) {
	name := fmt.Sprintf("e2ech%d", i)
	ctr := name + "svc"
	port := 18600 + i
	bind := predecessor(t, ctr, port)
	sums := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port))
	if !strings.Contains(sums, "/bind") {
		t.Fatalf("predecessor's checksums: %q", sums)
	}
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 140 + i, Role: "control", Files: chaosFound,
		Allowed: config.MustPorts([]string{"22/tcp", "80/tcp", "8080/tcp"})}, srv.Addr(), chaosPlan(ctr, port))
	expect := chaosExpectedMarks(name, port)

	env := []string{}
	switch {
	case fp == chaosServerRestart:
		// A pause inside the cutover, so the restart lands mid-migration.
		env = append(env, "ADOPT_FAILPOINTS=cutover:create=sleep:6s")
	case fp != "":
		env = append(env, "ADOPT_FAILPOINTS="+fp)
	}
	w1 := startWorker(t, n, env...)

	// The supervisor starts a fresh worker as soon as the first one dies,
	// after looking at the node as the kill left it.
	kills := make(chan killReport, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-w1.done:
		case <-stop:
			return
		}
		k := killReport{code: w1.cmd.ProcessState.ExitCode(), log: w1.log.String()}
		k.shape, k.notes = chaosInspect(n, ctr, expect)
		if w, err := spawnWorker(t, n); err != nil {
			t.Errorf("start the replacement worker: %v", err)
		} else {
			t.Cleanup(w.kill)
		}
		kills <- k
	}()
	defer func() { close(stop); wg.Wait() }()

	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("start: %s%s", out, errs)
	}
	// Every migration at once: they wait for adoption and are served in
	// order. The flip is refused at once while the node is still probing
	// (a flip needs an adopted node), so it is sent once adoption is done;
	// it then waits behind the migrations.
	for _, m := range []string{"web", "svc", "app"} {
		if out, errs, code := adopt(t, "migrate", n.Name, m, "--config", n.cfg); code != 0 {
			t.Fatalf("migrate %s: %s%s", m, out, errs)
		}
	}
	waitFor(t, n, "adoption", func(st workflows.State) bool {
		return st.Phase != workflows.PhaseProbing && st.Phase != workflows.PhaseFailed && st.Phase != ""
	})
	if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("flip: %s%s", out, errs)
	}

	restarted := false
	var kill *killReport
	flips := 1
	deadline := time.Now().Add(4 * time.Minute)
	var st workflows.State
	for {
		select {
		case k := <-kills:
			kill = &k
		default:
		}
		var err error
		st, err = status(t, n)
		if err == nil {
			if st.Phase == workflows.PhaseConverged {
				break
			}
			for _, m := range st.Modules {
				if m.State == workflows.ModuleFailed {
					t.Fatalf("module %s failed after the %s interruption: %s", m.Name, fp, m.LastError)
				}
			}
			if strings.HasPrefix(st.LastError, "flip refused by the preview") {
				t.Fatalf("the flip was refused: %s", st.LastError)
			}
			// An interrupted flip is reverted (by the worker or the
			// watchdog); the operator flips again.
			if st.Phase == workflows.PhaseAdopted && st.Flip != nil && st.Flip.State == "reverted" && !flipQueued(st) {
				if flips >= 3 {
					t.Fatalf("the flip was reverted %d times: %s", flips, st.LastError)
				}
				t.Logf("flip %s reverted (%s); flipping again", st.Flip.ID, st.Flip.Error)
				if out, errs, code := adopt(t, "flip", n.Name, "--config", n.cfg); code != 0 {
					t.Fatalf("flip again: %s%s", out, errs)
				}
				flips++
			}
			if fp == chaosServerRestart && !restarted && svcStep(st) == "create container" {
				srv.stop()
				t.Logf("dev server stopped in the middle of %s's cutover", ctr)
				time.Sleep(2 * time.Second)
				srv.start()
				restarted = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after %s: phase %q, modules %+v, flip %+v, last error %q, err %v\nworker log:\n%s",
				fp, st.Phase, st.Modules, st.Flip, st.LastError, err, w1.log)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if kill == nil {
		select {
		case k := <-kills:
			kill = &k
		default:
		}
	}

	switch fp {
	case chaosServerRestart:
		if !restarted {
			t.Fatal("the dev server was never restarted: the run proves nothing")
		}
		if kill != nil {
			t.Fatalf("the worker died (exit %d) although only the server was restarted:\n%s", kill.code, kill.log)
		}
	default:
		if kill == nil {
			t.Fatalf("the worker never reached failpoint %s: the run proves nothing", fp)
		}
		if kill.code != 42 || !strings.Contains(kill.log, "failpoint "+fp+": exiting") {
			t.Fatalf("the worker died with exit %d, not at failpoint %s:\n%s", kill.code, fp, kill.log)
		}
		t.Logf("killed at %s: the firewall was %s", fp, kill.shape)
		for _, note := range kill.notes {
			t.Errorf("at the kill (%s): %s", fp, note)
		}
	}
	chaosEndState(t, n, st, ctr, port, sums, bind)
}

func flipQueued(st workflows.State) bool {
	for _, r := range st.Queue {
		if r.Kind == workflows.SignalFlip {
			return true
		}
	}
	return false
}

func svcStep(st workflows.State) string {
	for _, m := range st.Modules {
		if m.Name == "svc" && m.State == workflows.ModuleMigrating {
			return m.Step
		}
	}
	return ""
}

// chaosExpectedMarks is every mark the migration opens, by comment.
func chaosExpectedMarks(node string, port int) []string {
	var out []string
	for _, m := range []string{
		fmt.Sprintf("foundation:%d/tcp", chaosRegistry), fmt.Sprintf("foundation:%d/tcp", chaosStore),
		"web:80/tcp", fmt.Sprintf("svc:%d/tcp", port), "app:9090/tcp",
	} {
		out = append(out, "adoption:"+node+":"+m)
	}
	return out
}

// spawnWorker is startWorker for the supervisor's goroutine: it returns its
// error instead of failing the test from outside the test's goroutine.
func spawnWorker(t *testing.T, n *node) (*workerProc, error) {
	w := &workerProc{log: &bytes.Buffer{}, done: make(chan error, 1)}
	w.cmd = exec.Command(filepath.Join(bin, "adopt-worker"), "run", "--config", n.cfg)
	w.cmd.Env = os.Environ()
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { w.done <- w.cmd.Wait() }()
	return w, nil
}

// nftListing lists the node's ruleset without failing the test (usable off
// the test's goroutine).
func nftListing(n *node) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", n.Netns, "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft list ruleset: %v: %s", err, out)
	}
	return stripCounters(string(out)), nil
}

// nftTables splits an nft listing into its tables, by "family name".
func nftTables(listing string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, line := range strings.SplitAfter(listing, "\n") {
		if strings.HasPrefix(line, "table ") {
			cur = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(line, "table ")), " {")
		}
		if cur != "" {
			out[cur] += line
		}
	}
	return out
}

var markComment = regexp.MustCompile(`comment "(adoption:[^"]*)"`)

// firewallShape names what the node's firewall is: "found" (the
// predecessor's, in force), "flipped" (the mesh's table in force, the
// predecessor's dormant behind the flip's neutralising accepts: the state a
// confirmation or the watchdog ends), "derived" (the mesh's alone), or
// "in between" with why. It also counts the marks outside the mesh's table,
// per table and chain.
func firewallShape(listing, node string) (shape string, marks map[string]map[string]int) {
	tables := nftTables(listing)
	marks = map[string]map[string]int{}
	neutral := false
	for tbl, body := range tables {
		if tbl == "inet adoption" {
			continue
		}
		// Per chain: a module's port is marked once on the input path and,
		// when a container publishes it, once on the forward path.
		chain := ""
		for _, line := range strings.Split(body, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "chain" && f[2] == "{" {
				chain = f[1]
			}
			for _, m := range markComment.FindAllStringSubmatch(line, -1) {
				if m[1] == "adoption:"+node+":flip:neutralise" {
					neutral = true
					continue
				}
				where := tbl + " " + chain
				if marks[where] == nil {
					marks[where] = map[string]int{}
				}
				marks[where][m[1]]++
			}
		}
	}
	_, mesh := tables["inet adoption"]
	// The sandbox's ufw layout: ufw-user-input in ip filter and in ip6 filter.
	ufw := strings.Count(listing, "chain ufw-user-input {") == 2
	anyUfw := strings.Contains(listing, "chain ufw")
	switch {
	case !mesh && ufw && !neutral:
		return "found", marks
	case mesh && anyUfw && neutral:
		return "flipped", marks
	case mesh && !anyUfw && !neutral:
		return "derived", marks
	}
	return fmt.Sprintf("in between (mesh table %v, ufw chains %v, neutralising accepts %v)", mesh, anyUfw, neutral), marks
}

// chaosInspect looks at the node as a kill left it: the firewall's shape,
// every mark at most once per chain, at most one container of the name
// running and no more than the name and one of its cutover companions.
func chaosInspect(n *node, ctr string, expect []string) (string, []string) {
	var notes []string
	listing, err := nftListing(n)
	if err != nil {
		return "unreadable", []string{err.Error()}
	}
	shape, marks := firewallShape(listing, n.Name)
	if strings.HasPrefix(shape, "in between") {
		notes = append(notes, "the firewall is "+shape+":\n"+listing)
	}
	known := map[string]bool{}
	for _, e := range expect {
		known[e] = true
	}
	for tbl, ms := range marks {
		for c, k := range ms {
			if k != 1 {
				notes = append(notes, fmt.Sprintf("mark %s is present %d times in %s", c, k, tbl))
			}
			if !known[c] {
				notes = append(notes, fmt.Sprintf("unexpected mark %s in %s", c, tbl))
			}
		}
	}
	out, err := exec.Command("docker", "ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter", "name=^"+ctr).CombinedOutput()
	if err != nil {
		return shape, append(notes, fmt.Sprintf("docker ps: %v %s", err, out))
	}
	all := strings.Fields(strings.TrimSpace(string(out)))
	running, total := 0, len(all)/2
	for i := 1; i < len(all); i += 2 {
		if all[i] == "running" {
			running++
		}
	}
	if running > 1 || total > 2 {
		notes = append(notes, fmt.Sprintf("containers of %s: %s", ctr, out))
	}
	return shape, notes
}

// chaosEndState checks a converged node: the data served as the
// predecessor served it by the module's image, one container of the name,
// no mark left, the mesh's derived firewall in force and passing exactly
// what it should, the files converged, the custody store intact.
func chaosEndState(t *testing.T, n *node, st workflows.State, ctr string, port int, sums, bind string) {
	t.Helper()
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port)); got != sums {
		t.Errorf("the data's checksums changed:\n%s\nwant\n%s", got, sums)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/version", port)); !strings.Contains(got, "v2") {
		t.Errorf("the service is %q, want the module's v2", got)
	}
	if names := containerNames(t, ctr); len(names) != 1 || names[0] != ctr+" running" {
		t.Errorf("want exactly one container %s, running (the flip prunes the predecessor): %v", ctr, names)
	}
	if entries, _ := os.ReadDir(bind); len(entries) == 0 {
		t.Error("the bind mount lost its data")
	}
	docker(t, "volume", "inspect", ctr+"-data")

	listing := ruleset(t, n)
	shape, marks := firewallShape(listing, n.Name)
	if shape != "derived" {
		t.Errorf("after the flip the firewall is %s, want the mesh's derived one alone:\n%s", shape, listing)
	}
	if len(marks) != 0 {
		t.Errorf("marks left outside the mesh's table after the flip: %v", marks)
	}
	if st.Flip == nil || st.Flip.State != "committed" || len(st.Marks) != 0 {
		t.Errorf("flip %+v, marks %v: want committed and none", st.Flip, st.Marks)
	}
	if !reachable(t, n, 22) || !reachable(t, n, 80) {
		t.Error("the management port or a migrated module's port does not answer after the flip")
	}
	for _, p := range []int{9090, chaosRegistry, chaosStore} {
		if !passes(t, n, p) {
			t.Errorf("port %d (a module's or the foundation's) does not pass the derived firewall", p)
		}
	}
	if passes(t, n, 8080) {
		t.Error("8080/tcp, dropped at the flip, still passes")
	}

	for p, want := range chaosMesh {
		b, err := os.ReadFile(filepath.Join(n.Root, p))
		if err != nil || string(b) != want {
			t.Errorf("%s is %q (%v), want the mesh's %q", p, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(n.Root, "srv/svc/app.env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("srv/svc/app.env mode: %v %v", fi, err)
	}
	custodyIntact(t, n, st, chaosFound)
}

// custodyIntact checks every custody record against what was found and
// every blob against its name: the found bytes are still there to restore.
func custodyIntact(t *testing.T, n *node, st workflows.State, found map[string]string) {
	t.Helper()
	if len(st.Custody) != len(found) {
		t.Errorf("custody has %d records, want %d: %+v", len(st.Custody), len(found), st.Custody)
	}
	for _, r := range st.Custody {
		want, ok := found[r.Path]
		if !ok || !r.Found || r.Digest != keyedDigest(t, n, want) {
			t.Errorf("custody record of %s does not describe what was found: %+v", r.Path, r)
			continue
		}
		b, err := os.ReadFile(filepath.Join(n.StateDir, "custody", sha256Hex([]byte(want))))
		if err != nil {
			t.Errorf("custody blob of %s: %v", r.Path, err)
			continue
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != sha256Hex([]byte(want)) || string(b) != want {
			t.Errorf("custody blob of %s is corrupt: %q", r.Path, b)
		}
	}
}
