package tests

// Issue 13 end to end (host Docker + a sandbox node): the whole container
// carried over, no environment value in the workflow history, and a
// published port that would vanish refused before anything changes.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

const (
	carryPredSecret = "pred-tok-5b1e77a0"   // the predecessor's -e SECRET_TOKEN
	carryModSecret  = "mod-value-c03f9e12"  // the module's env override
	carryFileSecret = "file-value-8d2a4f6b" // the module's env_file
)

func TestCutoverCarriesTheContainer(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2ecarry", 18501
	netName := name + "-net"
	t.Cleanup(func() {
		for _, c := range []string{name, name + ".next", name + ".predecessor"} {
			_ = exec.Command("docker", "rm", "-f", "-v", c).Run()
		}
		_ = exec.Command("docker", "network", "rm", netName).Run()
		_ = exec.Command("docker", "volume", "rm", "-f", name+"-data").Run()
	})
	_ = exec.Command("docker", "network", "rm", netName).Run()
	docker(t, "network", "create", netName)
	bind := t.TempDir()
	docker(t, "run", "-d", "--name", name, "--restart", "unless-stopped", "--network", netName, "--network-alias", "mail-alias",
		"-e", "SECRET_TOKEN="+carryPredSecret, "-e", "MODE=replica", "-l", "com.example.team=ops",
		"-v", name+"-data:/named", "-v", bind+":/bind", "-p", fmt.Sprintf("127.0.0.1:%d:8080", port), svcV1)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/health", port))
	sums := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port))
	files := cutoverFiles(name)
	files["/etc/"+name+"/extra.env"] = "FROM_FILE=" + carryFileSecret + "\n"
	plan := strings.Replace(cutoverPlan(name, port, ""), "      ports:", fmt.Sprintf(`      env: ["MODE=%s"]
      env_file: /etc/%s/extra.env
      labels: ["com.example.tier=mesh"]
      ports:`, carryModSecret, name), 1)
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 121, Files: files, Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), plan)
	startWorker(t, n)
	if _, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatal(errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	if out, errs, code := adopt(t, "migrate", n.Name, name, "--config", n.cfg); code != 0 {
		t.Fatalf("migrate: %s%s", out, errs)
	}
	st := waitFor(t, n, "the cutover", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated || st.Modules[0].State == workflows.ModuleFailed
	})
	m := st.Modules[0]
	if m.State != workflows.ModuleMigrated {
		t.Fatalf("cutover failed: %s", m.LastError)
	}
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/sums", port)); got != sums {
		t.Fatalf("data changed: %s want %s", got, sums)
	}
	// The new image's own default wins (SVC_VERSION came from v1's image).
	if got := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/version", port)); !strings.Contains(got, "v2") {
		t.Fatalf("version %q, want v2", got)
	}
	var env []string
	if err := json.Unmarshal([]byte(docker(t, "inspect", "-f", "{{json .Config.Env}}", name)), &env); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SECRET_TOKEN=" + carryPredSecret, "MODE=" + carryModSecret, "FROM_FILE=" + carryFileSecret, "SVC_VERSION=v2"} {
		if !slices.Contains(env, want) {
			t.Errorf("the new container's environment lacks %s: %v", want, env)
		}
	}
	if l := docker(t, "inspect", "-f", `{{index .Config.Labels "com.example.team"}} {{index .Config.Labels "com.example.tier"}}`, name); l != "ops mesh" {
		t.Errorf("labels: %q", l)
	}
	if a := docker(t, "inspect", "-f", fmt.Sprintf(`{{json (index .NetworkSettings.Networks %q).Aliases}}`, netName), name); !strings.Contains(a, "mail-alias") {
		t.Errorf("network alias not carried: %s", a)
	}
	if b := docker(t, "inspect", "-f", "{{range .Mounts}}{{if eq .Type \"bind\"}}{{.Source}}{{end}}{{end}}", name); b != bind {
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
	for _, secret := range []string{carryPredSecret, carryModSecret, carryFileSecret} {
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
// changes.
func TestCutoverRefusesDroppedPort(t *testing.T) {
	needDocker(t)
	srv := startDevServer(t)
	const name, port = "e2edrop", 18502
	predecessor(t, name, port)
	plan := strings.Replace(cutoverPlan(name, port, ""), fmt.Sprintf(`      ports: {"127.0.0.1:%d/tcp": "8080/tcp"}`, port)+"\n", "", 1)
	plan = strings.Replace(plan, fmt.Sprintf("      http: http://127.0.0.1:%d/health", port), "      tcp: 127.0.0.1:1", 1)
	n := upNodeWith(t, sandbox.Spec{Name: name, Index: 122, Files: cutoverFiles(name), Allowed: config.MustPorts([]string{"22/tcp"})}, srv.Addr(), plan)
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
	if e := st.Modules[0].LastError; !strings.Contains(e, `step "preflight" failed`) || !strings.Contains(e, fmt.Sprintf("host port %d/tcp", port)) || !strings.Contains(e, "drop_ports") {
		t.Fatalf("refusal does not name the port and the way out: %q", e)
	}
	if names := containerNames(t, name); len(names) != 1 || names[0] != name+" running" {
		t.Fatalf("a refused cutover changed containers: %v", names)
	}
	if got := ruleset(t, n); got != found {
		t.Fatal("a refused cutover changed the ruleset")
	}
	b, _ := os.ReadFile(filepath.Join(n.Root, "srv", name, "app.env"))
	if string(b) != cutoverFiles(name)["/srv/"+name+"/app.env"] {
		t.Fatalf("a refused cutover changed the module's file: %q", b)
	}
}
