package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// TestRehearseKeepResolve: the three questions adoption leaves open (keep, rehearse, resolve), answered on a
// real node with a real predecessor container.
//   - The rehearsal (migrate --dry-run) names the predecessor's mounts, the
//     port's holder, the marked rule, each file's keys (values masked) and
//     the conflict it would be refused on, and changes nothing: ruleset,
//     files, state_dir and `docker ps -a` hash the same, the module stays
//     pending.
//   - The cutover is refused on the conflict before anything changes;
//     `adopt resolve --take mesh` records the decision, the retry migrates,
//     the sshd drop-in keeps its load-bearing Port and AllowUsers while the
//     mesh's PasswordAuthentication lands.
//   - No kept or conflicting value is in the history.
func TestRehearseKeepResolve(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2ekeep", 18491
	bind := predecessor(t, name, port)
	const (
		sshd       = "/etc/ssh/sshd_config.d/10-site.conf"
		env        = "/srv/e2ekeep/app.env"
		keptUser   = "opskeep7431"
		nodeLevel  = "debug-nodecanary5518"
		meshLevel  = "warn-meshcanary2209"
		foundLevel = "info-foundcanary8804"
	)
	files := map[string]string{
		sshd: "Port 2222\nAllowUsers " + keptUser + "\nPasswordAuthentication yes\n",
		env:  "LEVEL=" + foundLevel + "\nMODE=prod\n",
	}
	plan := fmt.Sprintf(`modules:
  - name: %[1]s
    ports: ["%[2]d/tcp"]
    container:
      name: %[1]s
      image: %[3]s
      ports: {"127.0.0.1:%[2]d/tcp": "8080/tcp"}
    files:
      - path: %[4]s
        content: "PasswordAuthentication no\nPort 22\n"
        keep: [Port, AllowUsers]
      - path: %[5]s
        format: env
        content: "LEVEL=%[6]s\nMODE=prod\n"
    health:
      http: http://127.0.0.1:%[2]d/health
      timeout: 3s
cutover:
  stop_timeout: 2s
`, name, port, svcV2, sshd, env, meshLevel)
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 111, Files: files, Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), plan)
	// Before adopt start: the briefing from a local probe.
	out, errs, code := runBin(t, "adopt-worker", "brief", "--config", n.cfg)
	if code != 0 {
		t.Fatalf("adopt-worker brief: exit %d %s", code, errs)
	}
	for _, want := range []string{"# Briefing: node " + name, "phase **not started**", "iptables-nft", sshd, env, "volume"} {
		if !strings.Contains(strings.ReplaceAll(out, `\_`, "_"), want) {
			t.Errorf("the briefing before start lacks %q:\n%s", want, out)
		}
	}
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)

	// The node's env file changes after custody, as a predecessor's tool
	// or an operator would change it.
	if err := os.WriteFile(filepath.Join(n.Root, env), []byte("LEVEL="+nodeLevel+"\nMODE=prod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// snapshot hashes each part the rehearsal and a refused cutover must
	// leave alone, and says which part changed.
	snapshot := func() string {
		part := func(name string, fill func(h hash.Hash)) string {
			h := sha256.New()
			fill(h)
			return name + "=" + hex.EncodeToString(h.Sum(nil))[:12]
		}
		return strings.Join([]string{
			part("ruleset", func(h hash.Hash) { h.Write([]byte(ruleset(t, n))) }),
			part("files", func(h hash.Hash) { hashTree(t, h, n.Root) }),
			// The record of the operator's verified intent (intents/) is
			// the one write a request the node then refuses leaves.
			part("state_dir", func(h hash.Hash) { hashTreeExcept(t, h, n.StateDir, "intents") }),
			"containers=[" + containersOf(t, name) + "]",
		}, " ")
	}
	before := snapshot()

	out, errs, code = adopt(t, "migrate", n.Name, name, "--dry-run", "--config", n.cfg)
	if code != 2 {
		t.Fatalf("a rehearsal that would be refused: exit %d, want 2\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"REHEARSAL of migrate " + name, "nothing was changed",
		"1. preflight", "2. open ports", "3. create container", "4. swap: stop the predecessor", "5. swap: converge files", "6. swap: start the new container", "7. wait healthy",
		"volume " + name + "-data", bind, // the predecessor's mounts, carried over
		fmt.Sprintf("%d/tcp by", port),                           // the port's holder
		fmt.Sprintf("adoption:%s:%s:%d/tcp", n.Name, name, port), // the marked rule
		"keeps the node's allowusers, port", "(values masked)",   // load-bearing keys
		"CONFLICT on LEVEL", "WOULD BE REFUSED", "adopt resolve " + n.Name,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the rehearsal does not say %q:\n%s", want, out)
		}
	}
	for _, v := range []string{keptUser, nodeLevel, meshLevel, foundLevel} {
		if strings.Contains(out, v) {
			t.Errorf("the rehearsal shows the value %q", v)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("the rehearsal changed the node:\nbefore %s\nafter  %s", before, after)
	}
	st := waitFor(t, n, "the status", func(workflows.State) bool { return true })
	if st.Modules[0].State != workflows.ModulePending {
		t.Fatalf("the rehearsal moved the module to %s", st.Modules[0].State)
	}

	// The cutover itself is refused on the conflict, before anything changes.
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: exit %d %s%s", code, out, errs)
	}
	st = waitFor(t, n, "the conflict", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleFailed })
	if c := st.Modules[0].Conflicts; len(c) != 1 || c[0].Path != env || c[0].Key != "LEVEL" {
		t.Fatalf("conflicts recorded: %+v (last error %q)", c, st.Modules[0].LastError)
	}
	if next := workflows.NextStep(&st); !strings.Contains(next, "adopt resolve "+n.Name+" "+env+" LEVEL") {
		t.Fatalf("NEXT: %s", next)
	}
	if after := snapshot(); after != before {
		t.Fatalf("a cutover refused on a conflict changed the node:\nbefore %s\nafter  %s", before, after)
	}

	// The briefing names the conflict and how to decide it; no value.
	brief, errs, code := adopt(t, "brief", n.Name, "--config", n.cfg)
	if code != 0 || !strings.Contains(brief, "conflict in "+env+" LEVEL") || strings.Contains(brief, nodeLevel) {
		t.Fatalf("adopt brief: exit %d %s\n%s", code, errs, brief)
	}
	// A key with no conflict is refused; the real one is decided.
	if _, errs, code := adopt(t, "resolve", n.Name, env, "MODE", "--take", "mesh", "--config", n.cfg); code != 2 || !strings.Contains(errs, "has no conflict") {
		t.Fatalf("resolve of a key without conflict: exit %d %s", code, errs)
	}
	if out, errs, code := adopt(t, "resolve", n.Name, env, "LEVEL", "--take", "mesh", "--config", n.cfg); code != 0 || !strings.Contains(out, "adopt retry "+n.Name+" "+name) {
		t.Fatalf("resolve: exit %d %s%s", code, out, errs)
	}
	if out, errs, code := adopt(t, "retry", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: exit %d %s%s", code, out, errs)
	}
	st = waitFor(t, n, "the migration", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	if st.Modules[0].State != workflows.ModuleMigrated {
		t.Fatalf("retry after the decision failed: %s", st.Modules[0].LastError)
	}
	if got, want := read(t, filepath.Join(n.Root, sshd)), "PasswordAuthentication no\nPort 2222\nAllowUsers "+keptUser+"\n"; got != want {
		t.Fatalf("sshd drop-in converged to %q, want %q", got, want)
	}
	if got, want := read(t, filepath.Join(n.Root, env)), "LEVEL="+meshLevel+"\nMODE=prod\n"; got != want {
		t.Fatalf("env file converged to %q, want %q", got, want)
	}

	raw, err := proto.Marshal(history(t, srv, n.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{keptUser, nodeLevel, meshLevel, foundLevel} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the value %q reached the workflow history", v)
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// containersOf lists the containers whose names start with prefix, each
// with its ID, state and mounts in a stable order (docker ps orders mounts
// as it likes).
func containersOf(t *testing.T, prefix string) string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(docker(t, "ps", "-a", "--no-trunc", "--filter", "name=^"+prefix, "--format", "{{.ID}} {{.Names}} {{.State}}"), "\n") {
		if l == "" {
			continue
		}
		id, _, _ := strings.Cut(l, " ")
		mounts := strings.Split(strings.TrimSuffix(docker(t, "inspect", "--format",
			"{{range .Mounts}}{{.Type}} {{.Name}} {{.Source}} {{.Destination}};{{end}}", id), ";"), ";")
		sort.Strings(mounts)
		out = append(out, l+" "+strings.Join(mounts, ";"))
	}
	sort.Strings(out)
	return strings.Join(out, " | ")
}
