package cutover

// Real-Docker tests of the carry-over: the predecessor carried over, predecessors
// of other names, and the published-port contract. Same conventions as
// docker_test.go: everything is named with the run's random prefix and
// removed at the end.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	units "github.com/docker/go-units"

	"adoption/containers/cutoverwire"
)

const carrySecret = "tok-9f2c4e1d-secret" // must never appear in what a step returns

// carryRig raises a predecessor with what operators give containers:
// environment (one variable overriding nothing, one the image also sets),
// labels, a user-defined network with an alias and a static address, a bind
// mount, hostname, extra hosts, DNS, a capability, a ulimit, a memory limit
// and log options.
func carryRig(t *testing.T) (*rig, string) {
	t.Helper()
	r := newRig(t) // named + anonymous volume, bind, two networks, port
	ctx := context.Background()
	// Replace the rig's predecessor with a richer one on a network with a
	// subnet (a static address needs one), keeping its volumes and bind.
	if err := r.cli.ContainerRemove(ctx, r.predID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	sub := fmt.Sprintf("10.%d.%d.0/24", 200+int(randByte()%50), randByte())
	ipnet := r.prefix + "static"
	if _, err := r.cli.NetworkCreate(ctx, ipnet, network.CreateOptions{IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub}}}}); err != nil {
		t.Fatal(err)
	}
	r.networks = append(r.networks, ipnet)
	static := strings.TrimSuffix(sub, "0/24") + "17"
	created, err := r.cli.ContainerCreate(ctx, &container.Config{Image: imageV1, ExposedPorts: nat.PortSet{"8080/tcp": {}},
		Env:      []string{"SECRET_TOKEN=" + carrySecret, "MODE=replica"},
		Labels:   map[string]string{"com.example.team": "ops", "com.docker.compose.service": "svc"},
		Hostname: "svchost", WorkingDir: "/named"},
		&container.HostConfig{
			Binds:         []string{r.namedVol + ":/named", r.bindDir + ":/bind", r.anonVol + ":/anon"},
			PortBindings:  nat.PortMap{"8080/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(r.port)}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: 3},
			NetworkMode:   container.NetworkMode(ipnet),
			ExtraHosts:    []string{"db.internal:10.9.9.9"},
			DNS:           []string{"10.9.9.53"},
			CapAdd:        []string{"NET_ADMIN"},
			LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "5m"}},
			Resources: container.Resources{Memory: 256 << 20,
				Ulimits: []*units.Ulimit{{Name: "nofile", Soft: 4096, Hard: 8192}}},
		}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			ipnet: {Aliases: []string{"mail-alias"}, IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: static}}}}, nil, r.name)
	if err != nil {
		t.Fatal(err)
	}
	r.predID = created.ID
	if err := r.cli.ContainerStart(ctx, r.predID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitSums(t, "v1")
	return r, static
}

func randByte() byte { b := randHex(1); n, _ := strconv.ParseUint(b, 16, 8); return byte(n) }

func TestDockerCarryOver(t *testing.T) {
	r, static := carryRig(t)
	ctx := context.Background()
	spec := r.spec
	spec.Env = map[string]string{"MODE": "primary"} // the module's own, over the predecessor's replica
	spec.Labels = map[string]string{"com.example.tier": "mesh"}
	// Undecided, the predecessor's MODE refuses the preflight by key and
	// keyed digests, and nothing changes; decided for the mesh, the
	// module's value goes over it.
	r.engine.WithDigest(func(b []byte) string {
		m := hmac.New(sha256.New, []byte("node-key"))
		m.Write(b)
		return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	})
	before := r.names(t)
	_, err := r.engine.Preflight(ctx, spec)
	var vc *ValueConflicts
	if !errors.As(err, &vc) || len(vc.Conflicts) != 1 || vc.Conflicts[0].Key != "env:MODE" || !strings.HasPrefix(vc.Conflicts[0].Node, "hmac-sha256:") ||
		vc.Conflicts[0].Node == vc.Conflicts[0].Mesh {
		t.Fatalf("preflight with MODE undecided: %v", err)
	}
	if said := err.Error() + vc.Conflicts[0].Why(); strings.Contains(said, "replica") || strings.Contains(said, "primary") {
		t.Fatalf("a value in the refusal: %s", said)
	}
	undecided := spec
	spec.Takes = map[string]string{"env:MODE": TakeMesh}
	pred, err := r.engine.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The engine's create refuses on its own too.
	if _, err := r.engine.Create(ctx, undecided, pred); !errors.As(err, &vc) {
		t.Fatalf("create with MODE undecided: %v", err)
	}
	if after := r.names(t); !reflect.DeepEqual(after, before) {
		t.Fatalf("the refused cutover changed the containers: %v, was %v", after, before)
	}
	if !reflect.DeepEqual(pred.Env, []string{"MODE", "SECRET_TOKEN"}) || !slices.Contains(pred.Labels, "com.example.team") {
		t.Fatalf("preflight records env %v labels %v; want the operator's names (not SVC_VERSION, the image's)", pred.Env, pred.Labels)
	}
	carried, err := r.engine.Create(ctx, spec, pred)
	if err != nil {
		t.Fatal(err)
	}
	r.trackNewAnonVolumes(t, r.name+NextSuffix)
	if err := r.engine.Swap(ctx, r.name, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.engine.WaitHealthy(ctx, r.name, TCPProbe(r.addr), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// The new image's own default wins: SVC_VERSION=v1 came from the old
	// image, so the service now says v2.
	if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
		t.Fatalf("data changed: %v want %v", got, r.sums)
	}
	c, err := r.cli.ContainerInspect(ctx, r.name)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range c.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["SECRET_TOKEN"] != carrySecret || env["MODE"] != "primary" || env["SVC_VERSION"] != "v2" {
		t.Fatalf("environment: %v", c.Config.Env)
	}
	if c.Config.Labels["com.example.team"] != "ops" || c.Config.Labels["com.docker.compose.service"] != "svc" || c.Config.Labels["com.example.tier"] != "mesh" {
		t.Fatalf("labels: %v", c.Config.Labels)
	}
	ep := c.NetworkSettings.Networks[r.prefix+"static"]
	if ep == nil || !slices.Contains(ep.Aliases, "mail-alias") || ep.IPAddress != static {
		t.Fatalf("network endpoint: %+v (want alias mail-alias, address %s)", ep, static)
	}
	hc := c.HostConfig
	if c.Config.Hostname != "svchost" || c.Config.WorkingDir != "/named" || !reflect.DeepEqual(hc.ExtraHosts, []string{"db.internal:10.9.9.9"}) ||
		!reflect.DeepEqual(hc.DNS, []string{"10.9.9.53"}) || !(slices.Contains(hc.CapAdd, "NET_ADMIN") || slices.Contains(hc.CapAdd, "CAP_NET_ADMIN")) || hc.Memory != 256<<20 ||
		len(hc.Ulimits) != 1 || hc.Ulimits[0].Soft != 4096 || hc.LogConfig.Config["max-size"] != "5m" ||
		hc.RestartPolicy.Name != container.RestartPolicyOnFailure || hc.RestartPolicy.MaximumRetryCount != 3 {
		t.Fatalf("settings not carried: hostname %q workdir %q hosts %v dns %v caps %v mem %d ulimits %v log %v restart %v",
			c.Config.Hostname, c.Config.WorkingDir, hc.ExtraHosts, hc.DNS, hc.CapAdd, hc.Memory, hc.Ulimits, hc.LogConfig, hc.RestartPolicy)
	}
	binds := 0
	for _, m := range c.Mounts {
		if m.Type == "bind" && m.Source == r.bindDir && m.Destination == "/bind" {
			binds++
		}
	}
	if binds != 1 {
		t.Fatalf("bind mount not carried: %+v", c.Mounts)
	}
	for _, want := range []string{"hostname", "working_dir", "extra_hosts", "dns", "capabilities", "ulimits", "resource_limits", "log_driver", "mounts", "networks", "restart_policy"} {
		if !slices.Contains(carried.Settings, want) {
			t.Errorf("carried settings %v lack %s", carried.Settings, want)
		}
	}
	if !reflect.DeepEqual(carried.Env, []string{"MODE", "SECRET_TOKEN"}) || !reflect.DeepEqual(carried.EnvImage, []string{"SVC_VERSION"}) ||
		!reflect.DeepEqual(carried.EnvSet, []string{"MODE"}) || !slices.Contains(carried.Changed, "label com.example.tier") {
		t.Fatalf("carried: %+v", carried)
	}
	// What a step returns goes into the workflow history: names only.
	for what, v := range map[string]any{"predecessor": pred, "carried": carried, "spec": spec} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), carrySecret) || strings.Contains(string(b), "primary") {
			t.Fatalf("an environment value is in the %s's JSON: %s", what, b)
		}
	}
}

// TestDockerCreateIgnoresRequestMounts: the predecessor a request carries
// is only a name for the one on the node; a mount or network it adds is
// not used (DESIGN: what the node measures is never taken from a request).
func TestDockerCreateIgnoresRequestMounts(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	pred, err := r.engine.Preflight(ctx, r.spec)
	if err != nil {
		t.Fatal(err)
	}
	forged := *pred
	forged.Mounts = append(forged.Mounts, cutoverwire.Mount{Type: "bind", Source: "/", Destination: "/host"})
	forged.Networks = append(forged.Networks, "host")
	if _, err := r.engine.Create(ctx, r.spec, &forged); err != nil {
		t.Fatal(err)
	}
	r.trackNewAnonVolumes(t, r.name+NextSuffix)
	c, err := r.cli.ContainerInspect(ctx, r.name+NextSuffix)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Mounts {
		if m.Destination == "/host" {
			t.Fatalf("a mount from the request was used: %+v", m)
		}
	}
	other := forged
	other.ID = strings.Repeat("ab", 32)
	if _, err := r.engine.Create(ctx, r.spec, &other); !errors.Is(err, ErrConflict) {
		t.Fatalf("a request naming another predecessor: %v", err)
	}
}

// TestDockerReplacesOtherName: a module whose port is held by a container
// of another name (a reverse proxy, say) takes it over: cutover, rollback
// on failure (the old one serves again), retry, prune. Bad input is
// refused naming the key, with nothing changed.
func TestDockerReplacesOtherName(t *testing.T) {
	r := newRig(t) // the predecessor is r.name, published on r.port
	ctx := context.Background()
	mod := r.prefix + "web"
	spec := Spec{Name: mod, Image: imageV2, Ports: map[string]string{r.addr + "/tcp": "8080/tcp"}, Replaces: []string{r.name}}

	t.Run("bad input", func(t *testing.T) {
		before := r.names(t)
		bad := spec
		bad.Replaces = []string{r.prefix + "nosuch"}
		if _, err := r.engine.Preflight(ctx, bad); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "container.replaces[0]") {
			t.Fatalf("replaces naming a missing container: %v", err)
		}
		// A container that belongs to another module.
		owned, err := r.cli.ContainerCreate(ctx, &container.Config{Image: imageV1, Labels: map[string]string{LabelModule: "other"}}, nil, nil, nil, r.prefix+"owned")
		if err != nil {
			t.Fatal(err)
		}
		bad.Replaces = []string{r.name, r.prefix + "owned"}
		if _, err := r.engine.Preflight(ctx, bad); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), `belongs to module "other"`) ||
			!strings.Contains(err.Error(), "container.replaces[1]") {
			t.Fatalf("replaces naming another module's container: %v", err)
		}
		// Without replaces, the port is refused naming the holder.
		bad.Replaces = nil
		if _, err := r.engine.Preflight(ctx, bad); !errors.Is(err, ErrPortHeld) || !strings.Contains(err.Error(), r.name) {
			t.Fatalf("port held by a container not replaced: %v", err)
		}
		if err := r.cli.ContainerRemove(ctx, owned.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Fatal(err)
		}
		if got := r.names(t); !reflect.DeepEqual(got, before) {
			t.Fatalf("bad input changed containers: %v -> %v", before, got)
		}
	})

	// First attempt: the module's container never listens. Rolled back.
	failing := spec
	failing.Cmd = []string{"-fail", "nolisten"}
	pred, err := r.engine.Preflight(ctx, failing)
	if err != nil {
		t.Fatal(err)
	}
	if pred == nil || pred.ID != r.predID || len(pred.Replaces) != 1 || pred.Replaces[0].Name != r.name {
		t.Fatalf("preflight: %+v", pred)
	}
	if _, err := r.engine.Create(ctx, failing, pred); err != nil {
		t.Fatal(err)
	}
	if err := r.engine.Swap(ctx, mod, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if p, err := r.cli.ContainerInspect(ctx, r.name+PredecessorSuffix); err != nil || p.State.Running {
		t.Fatalf("the replaced container is not kept stopped as %s%s: %v", r.name, PredecessorSuffix, err)
	}
	if err := r.engine.WaitHealthy(ctx, mod, TCPProbe(r.addr), 3*time.Second); !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("wait healthy: %v", err)
	}
	if err := r.engine.Rollback(ctx, mod); err != nil {
		t.Fatal(err)
	}
	if got := r.waitSums(t, "v1"); !reflect.DeepEqual(got, r.sums) {
		t.Fatal("after rollback the replaced container does not serve its data")
	}
	if p, err := r.cli.ContainerInspect(ctx, r.name); err != nil || p.ID != r.predID || !p.State.Running || p.HostConfig.RestartPolicy.Name != "unless-stopped" {
		t.Fatalf("after rollback: %v %+v", err, p.State)
	}
	if got := r.names(t); !reflect.DeepEqual(got, []string{"=*"}) {
		t.Fatalf("containers after rollback: %v", got)
	}

	// Retry, fixed: cut over, keep, prune.
	pred, err = r.engine.Preflight(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.engine.Create(ctx, spec, pred); err != nil {
		t.Fatal(err)
	}
	r.trackNewAnonVolumes(t, mod+NextSuffix)
	if err := r.engine.Swap(ctx, mod, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.engine.WaitHealthy(ctx, mod, TCPProbe(r.addr), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.waitSums(t, "v2"); !reflect.DeepEqual(got, r.sums) {
		t.Fatal("the module's container does not serve the replaced one's data")
	}
	if err := r.engine.PortsAnswer(ctx, []uint16{uint16(r.port)}); err != nil {
		t.Fatal(err)
	}
	if err := r.engine.Prune(ctx, mod); err != nil {
		t.Fatal(err)
	}
	if got := r.names(t); !reflect.DeepEqual(got, []string{mod + "*"}) {
		t.Fatalf("after prune: %v", got)
	}
	r.invariantsVolumes(t)
	if err := r.engine.Rollback(ctx, mod); !errors.Is(err, ErrNoRollback) {
		t.Fatalf("rollback after prune: %v", err)
	}
}

func (r *rig) invariantsVolumes(t *testing.T) {
	t.Helper()
	for _, v := range []string{r.namedVol, r.anonVol} {
		if _, err := r.cli.VolumeInspect(context.Background(), v); err != nil {
			t.Fatalf("volume %s lost: %v", v, err)
		}
	}
}

// TestDockerRefusesDroppedPort: a module that would stop publishing a port
// its predecessor publishes is refused at preflight, naming the port, with
// nothing changed; dropping it explicitly lets it through.
func TestDockerRefusesDroppedPort(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	spec := r.spec
	spec.Ports = nil
	before := r.names(t)
	_, err := r.engine.Preflight(ctx, spec)
	want := fmt.Sprintf("%d/tcp", r.port)
	if !errors.Is(err, ErrPortDropped) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "drop_ports") {
		t.Fatalf("got %v", err)
	}
	if got := r.names(t); !reflect.DeepEqual(got, before) {
		t.Fatalf("a refused preflight changed containers: %v -> %v", before, got)
	}
	spec.DropPorts = []string{want}
	if _, err := r.engine.Preflight(ctx, spec); err != nil {
		t.Fatalf("a port dropped on purpose: %v", err)
	}
}
