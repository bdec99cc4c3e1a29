package main

// This file holds the cutover section's node and service: the images, a
// fresh predecessor for each run, each procedure run once under the
// clients' load, and the sweep of what the runs left.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/go-connections/nat"

	"adoption/bench/report"
	"adoption/containers/cutover"
	"adoption/containers/hold"
	"adoption/containers/steer"
	"adoption/sandbox"
)

func (b *cutBench) versions(ctx context.Context) []string {
	var out []string
	if v, err := b.cli.ServerVersion(ctx); err == nil {
		out = append(out, fmt.Sprintf("engine %s (API %s)", v.Version, v.APIVersion))
	}
	if v, err := exec.CommandContext(ctx, b.dockerCLI, "version", "--format", "{{.Client.Version}}").Output(); err == nil {
		out = append(out, "cli "+strings.TrimSpace(string(v)))
	}
	return out
}

// buildImages builds containers/testdata/svc static and imports it twice, as
// v1 and v2 (SVC_VERSION tells them apart), with VOLUME /anon.
func (b *cutBench) buildImages(ctx context.Context) error {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return fmt.Errorf("find the module root (go env GOMOD): %v", err)
	}
	return sandbox.ServiceImages(ctx, filepath.Dir(strings.TrimSpace(string(gomod))), map[string]string{"v1": b.imageV1, "v2": b.imageV2})
}

// service is one predecessor, raised for one run.
type service struct {
	node                             *sandbox.EngineNode
	name, namedVol, anonVol, bindDir string
	port                             int
	addr                             string
	sums                             map[string]string
}

// raise starts a fresh predecessor (image v1) and waits until it serves its
// data's checksums.
func (b *cutBench) raise(ctx context.Context) (*service, error) {
	b.trial++
	s := &service{name: fmt.Sprintf("%s%d-svc", b.prefix, b.trial)}
	s.namedVol = s.name + "-data"
	b.volumes[s.namedVol] = true
	dir, err := os.MkdirTemp("", s.name+"-bind-")
	if err != nil {
		return nil, err
	}
	b.dirs = append(b.dirs, dir)
	s.bindDir = dir
	s.port = servicePort
	s.addr = fmt.Sprintf("%s:%d", b.node.Addr, s.port)
	s.node = b.node
	created, err := b.cli.ContainerCreate(ctx, &container.Config{Image: b.imageV1, ExposedPorts: nat.PortSet{"8080/tcp": {}}},
		&container.HostConfig{
			Binds:         []string{s.namedVol + ":/named", s.bindDir + ":/bind"},
			PortBindings:  nat.PortMap{"8080/tcp": {{HostPort: strconv.Itoa(s.port)}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
		}, nil, nil, s.name)
	if err != nil {
		return nil, fmt.Errorf("create predecessor %s: %w", s.name, err)
	}
	if err := b.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start predecessor %s: %w", s.name, err)
	}
	c, err := b.cli.ContainerInspect(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	for _, m := range c.Mounts {
		if m.Type == "volume" {
			b.volumes[m.Name] = true
			if m.Destination == "/anon" {
				s.anonVol = m.Name
			}
		}
	}
	if s.anonVol == "" {
		return nil, fmt.Errorf("predecessor %s has no anonymous volume at /anon: %+v", s.name, c.Mounts)
	}
	if s.sums, err = s.waitSums(ctx, "v1"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *service) get(ctx context.Context, path string) (string, error) {
	return s.node.Get(ctx, s.addr, path)
}

// waitSums waits up to 20 s for version to serve, and returns its checksums
// of the three data directories.
func (s *service) waitSums(ctx context.Context, version string) (map[string]string, error) {
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v, err := s.get(ctx, "/version")
		switch {
		case err != nil:
			last = err
		case v != version:
			last = fmt.Errorf("version %q", v)
		default:
			body, err := s.get(ctx, "/sums")
			if err != nil {
				last = err
				break
			}
			var sums map[string]string
			if err := json.Unmarshal([]byte(body), &sums); err != nil {
				return nil, fmt.Errorf("GET /sums: %w", err)
			}
			if len(sums) != 3 {
				return nil, fmt.Errorf("GET /sums: want three data directories, got %v", sums)
			}
			return sums, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s (%s) did not serve %s: %v", s.name, s.addr, version, errors.Join(last, ctx.Err()))
}

// run raises a predecessor, takes it to v2 by one procedure while probing,
// checks the data, and removes what it made.
func (b *cutBench) run(ctx context.Context, method string) (CutoverRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := b.raise(ctx)
	if err != nil {
		return CutoverRun{}, err
	}
	do := func() error { return b.naive(ctx, s) }
	var dropped string
	switch method {
	case methodOverlap:
		do = func() error { return b.overlap(ctx, s) }
	case methodOurs:
		// The hold reports as it does to the agent's activity.
		hctx := cutover.WithHoldReport(ctx, func(r cutover.HoldReport) {
			if !r.Queued {
				dropped = r.Dropped
			}
		})
		do = func() error { return b.ours(hctx, s) }
	}
	stop := make(chan struct{})
	waitedBefore := cpuWait()
	stats := make(chan sandbox.ClientStats, 1)
	go func() { stats <- b.node.Clients(ctx, s.addr, "/version", clients, connectWait, stop) }()
	time.Sleep(sandbox.ClientWarmup + 200*time.Millisecond)
	// The engine's own window, seen from the node every 10 ms past the hold:
	// from the predecessor letting go of the port to the new container
	// taking it. The probe dials the node's address, as the clients do,
	// so the engine's DNAT takes it to the container itself: at 127.0.0.1
	// the engine's proxy answers while no container listens behind it.
	probe := cutover.DialProbe(hold.NewHold(b.node.NetnsPath(), "bcut").Dial, s.addr, 100*time.Millisecond)
	var took time.Duration
	window, _, err := cutover.MeasureWith(ctx, "the node's port", probe, probeEvery, func() error {
		start := time.Now()
		err := do()
		took = time.Since(start)
		return err
	})
	if err == nil {
		_, err = s.waitSums(ctx, "v2")
	}
	time.Sleep(connectWait) // every held client has had its answer
	close(stop)
	cs := <-stats
	waited := max(cpuWait()-waitedBefore, 0)
	if err != nil {
		return CutoverRun{}, err
	}
	after, err := s.waitSums(ctx, "v2")
	if err != nil {
		return CutoverRun{}, err
	}
	r := CutoverRun{GapMS: report.MS(window), ClientGapMS: report.MS(cs.Gap), FailedProbes: cs.Failed, Attempts: cs.Attempts, LongestWait: report.MS(cs.LongestWait),
		P50WaitMS: report.MS(cs.P50Wait), P99WaitMS: report.MS(cs.P99Wait), ProcedureMS: report.MS(took), DataKept: reflect.DeepEqual(after, s.sums), HoldDropped: dropped, FirstFail: cs.FirstFail,
		HandshakeMS: report.MS(cs.LongestHandshake), SynRetransmitted: cs.SynRetransmitted, CPUWaitMS: report.MS(waited)}
	if err := b.sweep(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// overlap is this project's overlap cutover: Preflight, Create (its port
// on loopback), Overlap (started beside, the port steered to it, the
// predecessor drained and stopped), WaitHealthy, PortsAnswer.
func (b *cutBench) overlap(ctx context.Context, s *service) error {
	spec := cutover.Spec{Name: s.name, Image: b.imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", s.port): "8080/tcp"}, Cutover: cutover.CutoverOverlap}
	pred, err := b.engine.Preflight(ctx, spec)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if pred == nil {
		return fmt.Errorf("preflight found no predecessor %s", s.name)
	}
	if _, err := b.engine.Create(ctx, spec, pred); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	// Swap, as the agent's activity calls it: a container created for an
	// overlap is started beside its predecessor, and drains it.
	dctx := cutover.WithDrainReport(ctx, func(r cutover.DrainReport) { fmt.Fprintf(os.Stderr, "cutover: overlap: %s\n", r) })
	if err := b.engine.Swap(dctx, s.name, stopTimeout); err != nil {
		return fmt.Errorf("swap (overlap): %w", err)
	}
	if err := b.engine.WaitHealthy(ctx, s.name, nil, 30*time.Second); err != nil {
		return fmt.Errorf("wait healthy: %w", err)
	}
	if err := b.engine.PortsAnswer(ctx, []uint16{uint16(s.port)}); err != nil {
		return fmt.Errorf("ports answer: %w", err)
	}
	return nil
}

// ours is this project's cutover, as the Migrate activity runs it.
func (b *cutBench) ours(ctx context.Context, s *service) error {
	spec := cutover.Spec{Name: s.name, Image: b.imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", s.port): "8080/tcp"}}
	pred, err := b.engine.Preflight(ctx, spec)
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	if pred == nil {
		return fmt.Errorf("preflight found no predecessor %s", s.name)
	}
	if _, err := b.engine.Create(ctx, spec, pred); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := b.engine.Swap(ctx, s.name, stopTimeout); err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	if err := b.engine.WaitHealthy(ctx, s.name, nil, 30*time.Second); err != nil {
		return fmt.Errorf("wait healthy: %w", err)
	}
	if err := b.engine.PortsAnswer(ctx, []uint16{uint16(s.port)}); err != nil {
		return fmt.Errorf("ports answer: %w", err)
	}
	return nil
}

// naive is `docker stop NAME && docker rm NAME && docker run -d --name NAME
// ... v2` through the docker CLI, with the same volumes (the anonymous one
// passed by its name, as a careful operator would), bind mount, restart
// policy and port.
func (b *cutBench) naive(ctx context.Context, s *service) error {
	for _, args := range [][]string{
		{"-H", b.node.Host, "stop", s.name},
		{"-H", b.node.Host, "rm", s.name},
		{"-H", b.node.Host, "run", "-d", "--name", s.name, "--restart", "unless-stopped",
			"-v", s.namedVol + ":/named", "-v", s.anonVol + ":/anon", "-v", s.bindDir + ":/bind",
			"-p", fmt.Sprintf("%d:8080", s.port), b.imageV2},
	} {
		if out, err := exec.CommandContext(ctx, b.dockerCLI, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// sweep removes every container named with the prefix, then every volume one
// of them used or the bench named, and the bind-mount directories.
func (b *cutBench) sweep(ctx context.Context) error {
	var errs []error
	list, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", b.prefix))})
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range list {
		if !slices.ContainsFunc(c.Names, func(n string) bool { return strings.HasPrefix(strings.TrimPrefix(n, "/"), b.prefix) }) {
			continue
		}
		for _, m := range c.Mounts {
			if m.Type == "volume" && m.Name != "" {
				b.volumes[m.Name] = true
			}
		}
		for _, n := range c.Names {
			// An overlap's steering goes with its module's containers.
			_ = steer.New(b.node.NetnsPath(), "bcut").Remove(strings.TrimPrefix(n, "/"))
		}
		if err := b.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %v: %w", c.Names, err))
		}
	}
	if vl, err := b.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", b.prefix))}); err == nil {
		for _, v := range vl.Volumes {
			if strings.HasPrefix(v.Name, b.prefix) {
				b.volumes[v.Name] = true
			}
		}
	} else {
		errs = append(errs, err)
	}
	for v := range b.volumes {
		if err := b.cli.VolumeRemove(ctx, v, true); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v, err))
			continue
		}
		delete(b.volumes, v)
	}
	for _, d := range b.dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	b.dirs = nil
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	return err != nil && (cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "no such volume"))
}

// cleanup stops the node (its engine, containers and volumes go with it)
// and removes the two images from the host's engine; it runs on its own
// context, so an interrupted bench still cleans up.
func (b *cutBench) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if b.node != nil {
		errs = append(errs, b.node.Close())
	}
	for _, d := range b.dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	for _, ref := range []string{b.imageV1, b.imageV2} {
		if _, err := b.hostCLI.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove image %s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

// cpuWait is how long this process's threads have waited, runnable, for a
// CPU since they started (/proc/self/task/*/schedstat, second field),
// summed over the threads alive now.
func cpuWait() time.Duration {
	tasks, _ := os.ReadDir("/proc/self/task")
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err == nil {
			sum += time.Duration(wait)
		}
	}
	return sum
}
