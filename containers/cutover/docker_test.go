package cutover

// Tests against the real Docker engine. No image can be pulled: the test
// service (testdata/svc) is built static and imported as a one-file image,
// twice, as v1 (the predecessor) and v2 (the module). Everything a test
// creates is named with a random ct-XXXXXX- prefix and removed when it ends;
// nothing else on the engine is touched.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"adoption/internal/testenv"
	"adoption/sandbox"
)

var (
	runPrefix  = "ct-" + randHex(3) + "-"
	imagesOnce sync.Once
	imagesErr  error
	imageV1    = runPrefix + "svc:v1"
	imageV2    = runPrefix + "svc:v2"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestMain(m *testing.M) {
	code := m.Run()
	// The images are shared by the package's tests; they go when all are done.
	if cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation()); err == nil {
		for _, ref := range []string{imageV1, imageV2} {
			_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	}
	os.Exit(code)
}

// dockerClient returns a client; an unreachable engine fails the test by
// name (skipped only under ADOPT_UNIT_ONLY).
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	if testenv.UnitOnly() {
		t.Skipf("needs the Docker engine: %s is set", testenv.UnitOnlyVar)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("Docker engine unreachable (start dockerd; apt-get install -y docker.io): %v", err)
	}
	imagesOnce.Do(func() { imagesErr = buildImages(cli) })
	if imagesErr != nil {
		t.Fatalf("build test images: %v", imagesErr)
	}
	return cli
}

func buildImages(cli *client.Client) error {
	return sandbox.ServiceImages(context.Background(), "../..", map[string]string{"v1": imageV1, "v2": imageV2})
}

// rig is one predecessor service and everything made for it.
type rig struct {
	cli                *client.Client
	prefix, name       string
	port               int
	namedVol, anonVol  string
	bindDir            string
	networks           []string
	predID             string
	sums               map[string]string
	url                string
	addr               string
	spec               Spec
	engine             *Engine
	createdAnonVolumes []string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newRig raises the predecessor: image v1, a named volume, an anonymous
// volume (the image's VOLUME /anon), a bind mount, two networks, restart
// unless-stopped, port 8080 published on 127.0.0.1. It waits until the
// service has written its data and records the checksums.
func newRig(t *testing.T) *rig {
	t.Helper()
	cli := dockerClient(t)
	ctx := context.Background()
	r := &rig{cli: cli, prefix: runPrefix + randHex(3) + "-"}
	r.name = r.prefix + "svc"
	r.namedVol = r.prefix + "data"
	r.bindDir = t.TempDir()
	r.port = freePort(t)
	r.addr = fmt.Sprintf("127.0.0.1:%d", r.port)
	r.url = "http://" + r.addr
	r.engine = New()
	t.Cleanup(func() { r.cleanup(t) })
	for _, n := range []string{r.prefix + "net", r.prefix + "net2"} {
		if _, err := cli.NetworkCreate(ctx, n, network.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.networks = append(r.networks, n)
	}
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: imageV1, ExposedPorts: nat.PortSet{"8080/tcp": {}}},
		&container.HostConfig{
			Binds:         []string{r.namedVol + ":/named", r.bindDir + ":/bind"},
			PortBindings:  nat.PortMap{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(r.port)}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			NetworkMode:   container.NetworkMode(r.networks[0]),
		}, nil, nil, r.name)
	if err != nil {
		t.Fatal(err)
	}
	r.predID = created.ID
	if err := cli.NetworkConnect(ctx, r.networks[1], r.predID, nil); err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctx, r.predID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerInspect(ctx, r.predID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Mounts {
		if m.Destination == "/anon" {
			r.anonVol = m.Name
		}
	}
	if r.anonVol == "" {
		t.Fatalf("no anonymous volume at /anon: %+v", c.Mounts)
	}
	r.sums = r.waitSums(t, "v1")
	r.spec = Spec{Name: r.name, Image: imageV2, Ports: map[string]string{r.addr + "/tcp": "8080/tcp"}}
	return r
}

// get fetches path from the service on its published port.
func (r *rig) get(path string) (string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(r.url + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return strings.TrimSpace(string(b)), err
}

// waitSums waits for the given version to serve, and returns its checksums.
func (r *rig) waitSums(t *testing.T, version string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		v, err := r.get("/version")
		if err == nil && v == version {
			s, err := r.get("/sums")
			if err == nil {
				var sums map[string]string
				if err := json.Unmarshal([]byte(s), &sums); err != nil {
					t.Fatal(err)
				}
				if len(sums) != 3 {
					t.Fatalf("sums: %v", sums)
				}
				return sums
			}
			last = err
		} else if err == nil {
			last = fmt.Errorf("version %q", v)
		} else {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("service %s did not serve: %v", version, last)
	return nil
}

// ours lists the containers whose names start with the rig's prefix:
// name -> running.
func (r *rig) containers(t *testing.T) map[string]*container.Summary {
	t.Helper()
	list, err := r.cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", r.prefix))})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*container.Summary{}
	for i, c := range list {
		for _, n := range c.Names {
			if n = strings.TrimPrefix(n, "/"); strings.HasPrefix(n, r.prefix) {
				out[n] = &list[i]
			}
		}
	}
	return out
}

// names is a compact view: "svc*" running, ".next", ".predecessor".
func (r *rig) names(t *testing.T) []string {
	var out []string
	for n, c := range r.containers(t) {
		n = strings.TrimPrefix(n, r.name)
		if n == "" {
			n = "="
		}
		if c.State == "running" {
			n += "*"
		}
		out = append(out, n)
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// invariants: at most one container named exactly <name> (Docker guarantees
// it; checked anyway), at most one running, every volume still there.
func (r *rig) invariants(t *testing.T, when string) {
	t.Helper()
	cs := r.containers(t)
	running := 0
	for n, c := range cs {
		if n != r.name && n != r.name+NextSuffix && n != r.name+PredecessorSuffix {
			t.Fatalf("%s: unexpected container %s", when, n)
		}
		if c.State == "running" {
			running++
		}
	}
	if running > 1 {
		t.Fatalf("%s: %d containers running: %v", when, running, r.names(t))
	}
	for _, v := range []string{r.namedVol, r.anonVol} {
		if _, err := r.cli.VolumeInspect(context.Background(), v); err != nil {
			t.Fatalf("%s: volume %s lost: %v", when, v, err)
		}
	}
	if _, err := os.Stat(filepath.Join(r.bindDir, "data")); err != nil {
		t.Fatalf("%s: bind data lost: %v", when, err)
	}
}

func (r *rig) cleanup(t *testing.T) {
	ctx := context.Background()
	for n := range r.containers(t) {
		if err := r.cli.ContainerRemove(ctx, n, container.RemoveOptions{Force: true}); err != nil {
			t.Logf("cleanup: remove %s: %v", n, err)
		}
	}
	vols := []string{r.namedVol, r.anonVol}
	if list, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", r.prefix))}); err == nil {
		for _, v := range list.Volumes {
			if strings.HasPrefix(v.Name, r.prefix) {
				vols = append(vols, v.Name)
			}
		}
	}
	vols = append(vols, r.createdAnonVolumes...)
	for _, v := range vols {
		if v != "" {
			_ = r.cli.VolumeRemove(ctx, v, true)
		}
	}
	for _, n := range r.networks {
		_ = r.cli.NetworkRemove(ctx, n)
	}
}

// trackNewAnonVolumes records anonymous volumes of the new container that are
// not the predecessor's, so cleanup removes them (none expected).
func (r *rig) trackNewAnonVolumes(t *testing.T, ref string) {
	c, err := r.cli.ContainerInspect(context.Background(), ref)
	if err != nil {
		return
	}
	for _, m := range c.Mounts {
		if m.Type == "volume" && m.Name != r.namedVol && m.Name != r.anonVol {
			r.createdAnonVolumes = append(r.createdAnonVolumes, m.Name)
		}
	}
}

func TestDockerCutoverKeepsData(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	spec := r.spec
	// The container's own Docker healthcheck decides; no probe is given.
	spec.Healthcheck = &Healthcheck{Test: []string{"CMD", "/svc", "-check", "http://127.0.0.1:8080/health"}, Interval: 200 * time.Millisecond, Timeout: time.Second, Retries: 3}
	start := time.Now()
	pred, err := r.engine.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if pred == nil || pred.ID != r.predID || pred.RestartPolicy != "unless-stopped" || !pred.Running ||
		!reflect.DeepEqual(pred.Networks, r.networks) || len(pred.Mounts) != 3 {
		t.Fatalf("predecessor: %+v", pred)
	}
	for _, m := range pred.Mounts {
		if (m.Destination == "/anon") != m.Anonymous || (m.Destination == "/anon" && m.Name != r.anonVol) {
			t.Fatalf("mount %+v: anonymous volume is %s", m, r.anonVol)
		}
	}
	if _, err := r.engine.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	r.trackNewAnonVolumes(t, r.name+NextSuffix)
	tCreate := time.Since(start)
	if err := r.engine.Swap(ctx, r.name, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	tSwap := time.Since(start)
	if err := r.engine.WaitHealthy(ctx, r.name, nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("preflight+create %s, swap %s, healthy (docker healthcheck) %s", tCreate.Round(time.Millisecond), tSwap.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
		t.Fatalf("data changed across the cutover:\n v1 %v\n v2 %v", r.sums, got)
	}
	if got := r.names(t); !reflect.DeepEqual(got, []string{".predecessor", "=*"}) {
		t.Fatalf("containers: %v", got)
	}
	c, err := r.cli.ContainerInspect(ctx, r.name)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Labels[LabelModule] != r.name || c.HostConfig.RestartPolicy.Name != "unless-stopped" || len(c.NetworkSettings.Networks) != 2 {
		t.Fatalf("new container: labels %v restart %v networks %v", c.Config.Labels, c.HostConfig.RestartPolicy, c.NetworkSettings.Networks)
	}
	for _, m := range c.Mounts {
		if m.Destination == "/anon" && m.Name != r.anonVol {
			t.Fatalf("anonymous volume recreated as %s, not reattached (%s)", m.Name, r.anonVol)
		}
	}
	p, err := r.cli.ContainerInspect(ctx, r.name+PredecessorSuffix)
	if err != nil || p.ID != r.predID || p.State.Running || p.HostConfig.RestartPolicy.Name != "no" {
		t.Fatalf("kept predecessor: %v %+v", err, p.State)
	}
	st, _ := r.engine.State(ctx, r.name)
	if st.Phase != PhaseSwapped {
		t.Fatalf("state: %+v", st)
	}
	if _, err := r.engine.Preflight(ctx, spec); !errors.Is(err, ErrMigrated) {
		t.Fatalf("preflight of a migrated module: %v", err)
	}

	// Prune keeps every volume: the anonymous one is the new container's now.
	if err := r.engine.Prune(ctx, r.name); err != nil {
		t.Fatal(err)
	}
	if got := r.names(t); !reflect.DeepEqual(got, []string{"=*"}) {
		t.Fatalf("after prune: %v", got)
	}
	r.invariants(t, "after prune")
	if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
		t.Fatalf("data after prune: %v", got)
	}
	if err := r.engine.Rollback(ctx, r.name); !errors.Is(err, ErrNoRollback) {
		t.Fatalf("rollback after prune: %v", err)
	}
}

func TestDockerRollbackWhenNeverHealthy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmd     []string
		timeout time.Duration
	}{
		{"exits", []string{"-fail=exit"}, 20 * time.Second},
		{"never listens", []string{"-fail=nolisten"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			bad := r.spec
			bad.Cmd = tc.cmd
			pred, err := r.engine.Preflight(ctx, bad)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.engine.Create(ctx, bad, pred); err != nil {
				t.Fatal(err)
			}
			r.trackNewAnonVolumes(t, r.name+NextSuffix)
			if err := r.engine.Swap(ctx, r.name, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = r.engine.WaitHealthy(ctx, r.name, TCPProbe(r.addr), tc.timeout)
			waited := time.Since(start)
			if !errors.Is(err, ErrUnhealthy) {
				t.Fatalf("wait healthy: %v", err)
			}
			t.Logf("not healthy after %s: %v", waited.Round(time.Millisecond), err)
			if tc.name == "exits" && waited > 5*time.Second {
				t.Fatalf("an exited container must fail fast, took %s", waited)
			}
			start = time.Now()
			if err := r.engine.Rollback(ctx, r.name); err != nil {
				t.Fatal(err)
			}
			if got := r.waitSums(t, "v1"); !reflect.DeepEqual(got, r.sums) {
				t.Fatalf("predecessor's data after rollback: %v, was %v", got, r.sums)
			}
			t.Logf("rollback until the predecessor serves: %s", time.Since(start).Round(time.Millisecond))
			if got := r.names(t); !reflect.DeepEqual(got, []string{"=*"}) {
				t.Fatalf("after rollback: %v", got)
			}
			c, _ := r.cli.ContainerInspect(ctx, r.name)
			if c.ID != r.predID || c.HostConfig.RestartPolicy.Name != "unless-stopped" {
				t.Fatalf("restored: %s %v", c.ID, c.HostConfig.RestartPolicy)
			}
			r.invariants(t, "after rollback")

			// adopt retry: the fixed module goes through.
			if err := cutover(ctx, r.engine, r.spec, HTTPProbe(r.url+"/health")); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
				t.Fatalf("data after retry: %v", got)
			}
		})
	}
}

func TestDockerResumeAfterEachStep(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	probe := HTTPProbe(r.url + "/health")
	for i, step := range forwardSteps {
		for _, then := range []string{"resume", "rollback"} {
			t.Run(step+"/"+then, func(t *testing.T) {
				crashAt(r.engine, step)
				err := cutover(ctx, r.engine, r.spec, probe)
				r.engine.beforeStep = nil
				if !errors.Is(err, errCrash) {
					t.Fatalf("crash at %s: %v", step, err)
				}
				r.invariants(t, "after the crash at "+step)
				if then == "resume" {
					if err := cutover(ctx, r.engine, r.spec, probe); err != nil {
						t.Fatalf("resume: %v (%v)", err, r.names(t))
					}
					if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
						t.Fatalf("data after resume: %v", got)
					}
					if got := r.names(t); !reflect.DeepEqual(got, []string{".predecessor", "=*"}) {
						t.Fatalf("after resume: %v", got)
					}
				}
				// Roll back, itself interrupted once at one of its steps.
				rb := rollbackSteps[i%len(rollbackSteps)]
				crashAt(r.engine, rb)
				err = r.engine.Rollback(ctx, r.name)
				r.engine.beforeStep = nil
				if err != nil && !errors.Is(err, errCrash) {
					t.Fatalf("rollback (crash at %s): %v", rb, err)
				}
				r.invariants(t, "after the rollback crash at "+rb)
				if err := r.engine.Rollback(ctx, r.name); err != nil {
					t.Fatalf("rollback again: %v (%v)", err, r.names(t))
				}
				if got := r.names(t); !reflect.DeepEqual(got, []string{"=*"}) {
					c, _ := r.cli.ContainerInspect(ctx, r.name)
					t.Fatalf("after rollback: %v (%s %+v): %s", got, c.Name, c.State, r.engine.tail(ctx, c.ID))
				}
				if got := r.waitSums(t, "v1"); !reflect.DeepEqual(got, r.sums) {
					t.Fatalf("predecessor's data: %v", got)
				}
				if got := r.names(t); !reflect.DeepEqual(got, []string{"=*"}) {
					t.Fatalf("after rollback: %v", got)
				}
				r.invariants(t, "at the end")
			})
		}
	}
}

func TestDockerBadInput(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	t.Run("image missing", func(t *testing.T) {
		before := r.names(t)
		spec := r.spec
		spec.Image = r.prefix + "nosuch:1"
		_, err := r.engine.Preflight(ctx, spec)
		if !errors.Is(err, ErrImageMissing) || !strings.Contains(err.Error(), "image "+spec.Image+" is not present on the node; load it (docker load") {
			t.Fatalf("got %v", err)
		}
		if after := r.names(t); !reflect.DeepEqual(before, after) {
			t.Fatalf("changed: %v -> %v", before, after)
		}
		t.Log(err)
	})

	t.Run("unrelated .next", func(t *testing.T) {
		_, err := r.cli.ContainerCreate(ctx, &container.Config{Image: imageV1}, nil, nil, nil, r.name+NextSuffix)
		if err != nil {
			t.Fatal(err)
		}
		defer r.cli.ContainerRemove(ctx, r.name+NextSuffix, container.RemoveOptions{Force: true, RemoveVolumes: true})
		r.trackNewAnonVolumes(t, r.name+NextSuffix)
		before := r.names(t)
		_, err = r.engine.Preflight(ctx, r.spec)
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), r.name+NextSuffix) {
			t.Fatalf("got %v", err)
		}
		_, createErr := r.engine.Create(ctx, r.spec, nil)
		for _, step := range []error{createErr, r.engine.Swap(ctx, r.name, time.Second), r.engine.Rollback(ctx, r.name)} {
			if !errors.Is(step, ErrConflict) {
				t.Fatalf("a step went on despite the conflict: %v", step)
			}
		}
		if after := r.names(t); !reflect.DeepEqual(before, after) {
			t.Fatalf("changed: %v -> %v", before, after)
		}
		t.Log(err)
	})

	t.Run("port held by another container", func(t *testing.T) {
		other := freePort(t)
		created, err := r.cli.ContainerCreate(ctx, &container.Config{Image: imageV1, ExposedPorts: nat.PortSet{"8080/tcp": {}}},
			&container.HostConfig{PortBindings: nat.PortMap{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(other)}}}}, nil, nil, r.prefix+"squatter")
		if err != nil {
			t.Fatal(err)
		}
		defer r.cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		spec := r.spec
		spec.Ports = map[string]string{fmt.Sprintf("127.0.0.1:%d/tcp", other): "8080/tcp"}
		spec.DropPorts = []string{fmt.Sprintf("%d/tcp", r.port)} // moved on purpose
		_, err = r.engine.Preflight(ctx, spec)
		if !errors.Is(err, ErrPortHeld) || !strings.Contains(err.Error(), r.prefix+"squatter") {
			t.Fatalf("got %v", err)
		}
		t.Log(err)
	})

	t.Run("no predecessor: a new service is raised", func(t *testing.T) {
		spec := Spec{Name: r.prefix + "fresh", Image: imageV2, Cmd: []string{"-data", "/anon"}, Ports: map[string]string{fmt.Sprintf("127.0.0.1:%d/tcp", freePort(t)): "8080/tcp"}}
		pred, err := r.engine.Preflight(ctx, spec)
		if err != nil || pred != nil {
			t.Fatalf("preflight: %v %v", pred, err)
		}
		if _, err := r.engine.Create(ctx, spec, nil); err != nil {
			t.Fatal(err)
		}
		r.trackNewAnonVolumes(t, spec.Name+NextSuffix)
		if err := r.engine.Swap(ctx, spec.Name, time.Second); err != nil {
			t.Fatal(err)
		}
		addr := strings.TrimSuffix(firstKey(spec.Ports), "/tcp")
		if err := r.engine.WaitHealthy(ctx, spec.Name, TCPProbe(addr), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		st, _ := r.engine.State(ctx, spec.Name)
		if st.Phase != PhaseMigrated || !st.Live.Running {
			t.Fatalf("state: %+v", st)
		}
		c, _ := r.cli.ContainerInspect(ctx, spec.Name)
		if c.HostConfig.RestartPolicy.Name != "unless-stopped" {
			t.Fatalf("restart: %v", c.HostConfig.RestartPolicy)
		}
		if err := r.engine.Rollback(ctx, spec.Name); err != nil {
			t.Fatal(err)
		}
		if st, _ := r.engine.State(ctx, spec.Name); st.Phase != PhaseAbsent {
			t.Fatalf("after rollback of a new service: %+v", st)
		}
	})
	r.invariants(t, "after bad input")
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

// TestDockerUnavailability measures, side by side, the window in which the
// service does not answer: this cutover against a naive stop, rm, run of the
// same image. It asserts only that both come back; the bench prints the ratio.
func TestDockerUnavailability(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var steps []string
	t0 := time.Now()
	pctx := WithProgress(ctx, func(s string) { steps = append(steps, fmt.Sprintf("%s@%s", s, time.Since(t0).Round(time.Millisecond))) })
	cut, cutFails, err := MeasureUnavailability(ctx, r.addr, 10*time.Millisecond, func() error {
		t0 = time.Now()
		return cutover(pctx, r.engine, r.spec, TCPProbe(r.addr))
	})
	t.Logf("cutover steps: %s", strings.Join(steps, " "))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
		t.Fatalf("data: %v", got)
	}
	// Naive: docker stop && docker rm && docker run, same volumes, same image.
	naive, naiveFails, err := MeasureUnavailability(ctx, r.addr, 10*time.Millisecond, func() error {
		c, err := r.cli.ContainerInspect(ctx, r.name)
		if err != nil {
			return err
		}
		if err := r.cli.ContainerStop(ctx, c.ID, stopOptions(10*time.Second)); err != nil {
			return err
		}
		if err := r.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{}); err != nil {
			return err
		}
		created, err := r.cli.ContainerCreate(ctx, c.Config, c.HostConfig, nil, nil, r.name)
		if err != nil {
			return err
		}
		// The same networks as the cutover's container, for a fair race.
		if err := r.cli.NetworkConnect(ctx, r.networks[1], created.ID, nil); err != nil {
			return err
		}
		return r.cli.ContainerStart(ctx, created.ID, container.StartOptions{})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("unavailable: cutover %s (%d failed probes), naive stop/rm/run %s (%d failed probes), ratio %.2f",
		cut.Round(time.Millisecond), cutFails, naive.Round(time.Millisecond), naiveFails, float64(cut)/float64(max(naive, time.Millisecond)))
}
