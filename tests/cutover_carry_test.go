package tests

// The carry-over end to end on the reference node (the predecessor a container of
// the node's own engine, clients in the peer namespace, the agent on the
// node): the whole container carried over, a variable the predecessor was
// given that the module sets otherwise refused until decided, no
// environment value in the workflow history, and a published port that
// would vanish refused before anything changes.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"adoption/workflows"
)

const (
	carryPredSecret = "pred-tok-5b1e77a0"   // the predecessor's -e SECRET_TOKEN
	carryModSecret  = "mod-value-c03f9e12"  // the module's env override
	carryFileSecret = "file-value-8d2a4f6b" // the module's env_file
	carryPredMode   = "pred-mode-71c4e0d9"  // the predecessor's -e MODE, which the module sets otherwise
)

func TestCutoverCarriesTheContainer(t *testing.T) {
	srv := startDevServer(t)
	const name, port = "e2ecarry", 18501
	netName := name + "-net"
	files := cutoverFiles(name)
	files["/etc/"+name+"/extra.env"] = "FROM_FILE=" + carryFileSecret + "\n"
	plan := strings.Replace(refCutoverPlan(refModule(name, port, "")), "      ports:", fmt.Sprintf(`      env: ["MODE=%s"]
      env_file: /etc/%s/extra.env
      labels: ["com.example.tier=mesh"]
      ports:`, carryModSecret, name), 1)
	r := upRefNodeWith(t, name, 121, srv, nil, files, plan)
	n := r.node
	r.engine(t, "network", "create", netName)
	bind := r.predecessor(t, name, port, "--network", netName, "--network-alias", "mail-alias",
		"-e", "SECRET_TOKEN="+carryPredSecret, "-e", "MODE="+carryPredMode, "-l", "com.example.team=ops")
	sums := r.get(t, port, "/sums")
	startAgent(t, r)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	before := r.names(t, name)
	// The rehearsal refuses where the migration would, naming the key.
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--dry-run", "--config", n.cfg); code != 2 || !strings.Contains(out, "env:MODE") || strings.Contains(out+errs, carryPredMode) {
		t.Fatalf("rehearsal: exit %d, want 2 naming env:MODE\n%s%s", code, out, errs)
	}
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	// The predecessor's MODE, which the module sets otherwise, refuses the
	// preflight by key, with nothing changed; decided for the mesh, the
	// retry carries the module's value over it.
	st := waitFor(t, n, "the refusal", func(st workflows.State) bool { return st.Modules[0].State == workflows.ModuleFailed })
	if e := st.Modules[0].LastError; !strings.Contains(e, `step "preflight" failed`) || !strings.Contains(e, "env:MODE") || !strings.Contains(e, "container.keep") {
		t.Fatalf("refusal does not name the variable and the way out: %q", e)
	}
	if c := st.Modules[0].Conflicts; len(c) != 1 || c[0].Path != name || c[0].Key != "env:MODE" || !strings.Contains(c[0].Why, "hmac-sha256:") {
		t.Fatalf("conflicts recorded: %+v", c)
	}
	if after := r.names(t, name); !slices.Equal(after, before) {
		t.Fatalf("a refused cutover changed containers: %v, was %v", after, before)
	}
	if _, errs, code := adopt(t, "resolve", n.Name, name, "MODE", "--take", "mesh", "--config", n.cfg); code != 3 || !strings.Contains(errs, `key "MODE" of module `+name) {
		t.Fatalf("resolve of a key that is not env:NAME: exit %d %s", code, errs)
	}
	if out, errs, code := adopt(t, "resolve", n.Name, name, "env:MODE", "--take", "mesh", "--config", n.cfg); code != 0 || !strings.Contains(out, "adopt retry "+n.Name+" "+name) {
		t.Fatalf("resolve: exit %d %s%s", code, out, errs)
	}
	if out, errs, code := adopt(t, "retry", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("retry: exit %d %s%s", code, out, errs)
	}
	st = waitFor(t, n, "the cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || (st.Modules[0].State == workflows.ModuleFailed && st.Modules[0].Attempts > 1)
	})
	m := st.Modules[0]
	if m.State != workflows.ModuleMigrated {
		t.Fatalf("cutover failed: %s", m.LastError)
	}
	if got := r.get(t, port, "/sums"); got != sums {
		t.Fatalf("data changed: %s want %s", got, sums)
	}
	// The new image's own default wins (SVC_VERSION came from v1's image).
	if got := r.get(t, port, "/version"); got != "v2" {
		t.Fatalf("version %q, want v2", got)
	}
	var env []string
	if err := json.Unmarshal([]byte(r.engine(t, "inspect", "-f", "{{json .Config.Env}}", name)), &env); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SECRET_TOKEN=" + carryPredSecret, "MODE=" + carryModSecret, "FROM_FILE=" + carryFileSecret, "SVC_VERSION=v2"} {
		if !slices.Contains(env, want) {
			t.Errorf("the new container's environment lacks %s: %v", want, env)
		}
	}
	if l := r.engine(t, "inspect", "-f", `{{index .Config.Labels "com.example.team"}} {{index .Config.Labels "com.example.tier"}}`, name); l != "ops mesh" {
		t.Errorf("labels: %q", l)
	}
	if a := r.engine(t, "inspect", "-f", fmt.Sprintf(`{{json (index .NetworkSettings.Networks %q).Aliases}}`, netName), name); !strings.Contains(a, "mail-alias") {
		t.Errorf("network alias not carried: %s", a)
	}
	if b := r.engine(t, "inspect", "-f", "{{range .Mounts}}{{if eq .Type \"bind\"}}{{.Source}}{{end}}{{end}}", name); b != bind {
		t.Errorf("bind mount: %q want %q", b, bind)
	}
	if c := m.Carried; c == nil || !slices.Contains(c.Env, "SECRET_TOKEN") || !slices.Contains(c.EnvImage, "SVC_VERSION") ||
		!slices.Contains(c.EnvSet, "MODE") || !slices.Contains(c.EnvSet, "FROM_FILE") || !slices.Contains(c.Labels, "com.example.team") {
		t.Fatalf("status does not say what was carried: %+v", c)
	}
	// No value in the history, decoded.
	raw, err := proto.Marshal(history(t, srv, n.Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{carryPredSecret, carryModSecret, carryFileSecret, carryPredMode} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("an environment value (%s) reached the workflow history", secret)
		}
	}
	if !strings.Contains(string(raw), "SECRET_TOKEN") {
		t.Fatal("the history does not even name the carried variable: the check above proves nothing")
	}
}

// TestCutoverRefusesDroppedPort: a module whose container would not publish
// the predecessor's port is refused at preflight, naming the port; nothing
// changes, and clients still reach the predecessor.
func TestCutoverRefusesDroppedPort(t *testing.T) {
	srv := startDevServer(t)
	const name, port = "e2edrop", 18502
	plan := strings.Replace(refCutoverPlan(refModule(name, port, "")), fmt.Sprintf(`      ports: {"%d/tcp": "8080/tcp"}`, port)+"\n", "", 1)
	plan = strings.Replace(plan, fmt.Sprintf("      http: http://127.0.0.1:%d/health", port), "      tcp: 127.0.0.1:1", 1)
	r := upRefNodeWith(t, name, 122, srv, nil, cutoverFiles(name), plan)
	n := r.node
	r.predecessor(t, name, port)
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
	if e := st.Modules[0].LastError; !strings.Contains(e, `step "preflight" failed`) || !strings.Contains(e, fmt.Sprintf("host port %d/tcp", port)) || !strings.Contains(e, "drop_ports") {
		t.Fatalf("refusal does not name the port and the way out: %q", e)
	}
	if names := r.names(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("a refused cutover changed containers: %v", names)
	}
	if got := ruleset(t, n); got != found {
		t.Fatal("a refused cutover changed the ruleset")
	}
	b, _ := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if string(b) != cutoverFiles(name)["/srv/"+name+"/app.env"] {
		t.Fatalf("a refused cutover changed the module's file: %q", b)
	}
	if got := r.get(t, port, "/version"); got != "v1" {
		t.Fatalf("after the refusal clients get %q, want the predecessor v1", got)
	}
}
