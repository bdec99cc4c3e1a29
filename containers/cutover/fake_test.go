package cutover

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"adoption/containers"
)

// fakeDocker is an in-memory engine: names, renames, start and stop, labels,
// restart policies, mounts and networks, enough to drive the cutover's
// resume logic without Docker. It fails a test's invariants loudly: removing
// a container with its volumes is recorded.
type fakeDocker struct {
	mu          sync.Mutex
	byID        map[string]*container.InspectResponse
	images      map[string]bool
	seq         int
	volumesGone []string // volumes a RemoveVolumes removal would have taken
	onStart     func(c *container.InspectResponse)
}

var _ containers.API = (*fakeDocker)(nil)

func newFake(images ...string) *fakeDocker {
	f := &fakeDocker{byID: map[string]*container.InspectResponse{}, images: map[string]bool{}}
	for _, i := range images {
		f.images[i] = true
	}
	return f
}

func notFound(what string) error { return fmt.Errorf("no such %s: %w", what, cerrdefs.ErrNotFound) }

func (f *fakeDocker) find(ref string) *container.InspectResponse {
	if c, ok := f.byID[ref]; ok {
		return c
	}
	for _, c := range f.byID {
		if c.Name == "/"+ref {
			return c
		}
	}
	return nil
}

func clone(c *container.InspectResponse) container.InspectResponse {
	base := *c.ContainerJSONBase
	st := *c.State
	if st.Health != nil {
		h := *st.Health
		st.Health = &h
	}
	hc := *c.HostConfig
	base.State, base.HostConfig = &st, &hc
	cfg := *c.Config
	nets := map[string]*network.EndpointSettings{}
	for k, v := range c.NetworkSettings.Networks {
		nets[k] = v
	}
	return container.InspectResponse{ContainerJSONBase: &base, Mounts: append([]container.MountPoint(nil), c.Mounts...),
		Config: &cfg, NetworkSettings: &container.NetworkSettings{Networks: nets}}
}

func (f *fakeDocker) ContainerInspect(_ context.Context, ref string) (container.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return container.InspectResponse{}, notFound("container: " + ref)
	}
	return clone(c), nil
}

// add puts a container straight in, as the predecessor's tooling would.
func (f *fakeDocker) add(name, img string, hc container.HostConfig, mounts []container.MountPoint, nets []string, run bool, lbl map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("%064x", f.seq)
	n := map[string]*network.EndpointSettings{}
	for _, x := range nets {
		n[x] = &network.EndpointSettings{}
	}
	if hc.NetworkMode == "" && len(nets) > 0 {
		hc.NetworkMode = container.NetworkMode(nets[0])
	}
	f.byID[id] = &container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: id, Name: "/" + name, Image: "sha256:" + img,
			State: &container.State{Running: run, Status: map[bool]container.ContainerState{true: "running", false: "exited"}[run]}, HostConfig: &hc},
		Mounts: mounts, Config: &container.Config{Image: img, Labels: lbl},
		NetworkSettings: &container.NetworkSettings{Networks: n},
	}
	return id
}

func (f *fakeDocker) ContainerCreate(_ context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, _ *ocispec.Platform, name string) (container.CreateResponse, error) {
	if !f.images[cfg.Image] {
		return container.CreateResponse{}, notFound("image " + cfg.Image)
	}
	f.mu.Lock()
	if f.find(name) != nil {
		f.mu.Unlock()
		return container.CreateResponse{}, fmt.Errorf("conflict: the container name %q is already in use", "/"+name)
	}
	f.mu.Unlock()
	var mps []container.MountPoint
	for _, m := range hc.Mounts {
		mp := container.MountPoint{Type: m.Type, Source: m.Source, Destination: m.Target, RW: !m.ReadOnly}
		if m.Type == mount.TypeVolume {
			mp.Name = m.Source
		}
		mps = append(mps, mp)
	}
	nets := []string{}
	if hc.NetworkMode != "" {
		nets = append(nets, string(hc.NetworkMode))
	} else {
		nets = append(nets, "bridge")
	}
	_ = nc
	id := f.add(name, cfg.Image, *hc, mps, nets, false, cfg.Labels)
	f.mu.Lock()
	f.byID[id].Config.Healthcheck = cfg.Healthcheck
	f.byID[id].Config.Cmd = cfg.Cmd
	f.byID[id].State.Status = "created"
	f.mu.Unlock()
	return container.CreateResponse{ID: id}, nil
}

func (f *fakeDocker) ContainerStart(_ context.Context, ref string, _ container.StartOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return notFound("container " + ref)
	}
	// A published port held by another running container makes start fail.
	for _, o := range f.byID {
		if o == c || !o.State.Running {
			continue
		}
		for p, bs := range c.HostConfig.PortBindings {
			for _, b := range bs {
				for _, ob := range o.HostConfig.PortBindings[p] {
					if ob.HostPort == b.HostPort {
						return fmt.Errorf("driver failed programming external connectivity: Bind for 0.0.0.0:%s failed: port is already allocated", b.HostPort)
					}
				}
			}
		}
	}
	c.State.Running, c.State.Status = true, "running"
	if c.Config.Healthcheck != nil {
		c.State.Health = &container.Health{Status: container.Starting}
	}
	if f.onStart != nil {
		f.onStart(c)
	}
	return nil
}

func (f *fakeDocker) ContainerStop(_ context.Context, ref string, _ container.StopOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return notFound("container " + ref)
	}
	c.State.Running, c.State.Status = false, "exited"
	return nil
}

func (f *fakeDocker) ContainerRename(_ context.Context, ref, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return notFound("container " + ref)
	}
	if o := f.find(name); o != nil && o != c {
		return fmt.Errorf("conflict: the container name %q is already in use by container %q", "/"+name, o.ID)
	}
	c.Name = "/" + name
	return nil
}

func (f *fakeDocker) ContainerRemove(_ context.Context, ref string, o container.RemoveOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return notFound("container " + ref)
	}
	if c.State.Running && !o.Force {
		return fmt.Errorf("conflict: you cannot remove a running container %s", c.ID)
	}
	if o.RemoveVolumes {
		for _, m := range c.Mounts {
			if m.Type == mount.TypeVolume {
				f.volumesGone = append(f.volumesGone, m.Name)
			}
		}
	}
	delete(f.byID, c.ID)
	return nil
}

func (f *fakeDocker) ContainerUpdate(_ context.Context, ref string, u container.UpdateConfig) (container.UpdateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return container.UpdateResponse{}, notFound("container " + ref)
	}
	c.HostConfig.RestartPolicy = u.RestartPolicy
	return container.UpdateResponse{}, nil
}

func (f *fakeDocker) ContainerLogs(context.Context, string, container.LogsOptions) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("")), nil
}

func (f *fakeDocker) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	if !f.images[ref] {
		return image.InspectResponse{}, notFound("image: " + ref)
	}
	return image.InspectResponse{ID: "sha256:" + ref}, nil
}

// NetworkInspect knows no endpoint addresses: the swap falls back to the
// container's inspect once it started.
func (f *fakeDocker) NetworkInspect(_ context.Context, n string, _ network.InspectOptions) (network.Inspect, error) {
	return network.Inspect{Name: n}, nil
}

func (f *fakeDocker) NetworkConnect(_ context.Context, n, ref string, es *network.EndpointSettings) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.find(ref)
	if c == nil {
		return notFound("container " + ref)
	}
	c.NetworkSettings.Networks[n] = es
	return nil
}

func (f *fakeDocker) ContainerList(_ context.Context, o container.ListOptions) ([]container.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []container.Summary
	for _, c := range f.byID {
		if !o.All && !c.State.Running {
			continue
		}
		s := container.Summary{ID: c.ID, Names: []string{c.Name}, Image: c.Config.Image, Labels: c.Config.Labels, State: c.State.Status}
		if c.State.Running {
			for p, bs := range c.HostConfig.PortBindings {
				for _, b := range bs {
					var hp uint16
					fmt.Sscan(b.HostPort, &hp)
					s.Ports = append(s.Ports, container.Port{IP: b.HostIP, PrivatePort: uint16(p.Int()), PublicPort: hp, Type: p.Proto()})
				}
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Names[0] < out[j].Names[0] })
	return out, nil
}

// names lists the fake's container names, running ones marked with *.
func (f *fakeDocker) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.byID {
		n := strings.TrimPrefix(c.Name, "/")
		if c.State.Running {
			n += "*"
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NetworkList knows Docker's default bridge network alone.
func (f *fakeDocker) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return []network.Summary{{Name: "bridge", ID: "f00dfeedf00dfeedf00d", Driver: "bridge", Options: map[string]string{"com.docker.network.bridge.name": "docker0"}}}, nil
}
