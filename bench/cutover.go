package main

// This file holds the cutover section: one service swapped from image v1
// to v2 while clients in a peer namespace connect in a loop, this
// project's cutover (containers.Engine) against docker stop && rm && run,
// on a node with its own Docker engine (sandbox.EngineNode).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"adoption/containers"
	"adoption/firewall"
	"adoption/sandbox"
)

const (
	cutPrefix   = "bench-cut-"
	probeEvery  = 10 * time.Millisecond
	stopTimeout = 10 * time.Second // ours; `docker stop` defaults to 10 s too
	methodOurs  = "containers.Engine cutover (port hold)"
	clients     = 6
	connectWait = 3 * time.Second // a client's connect may wait this long
	servicePort = 18080
	methodNaive = "docker stop && rm && run"
)

// CutoverRun is one procedure, once.
type CutoverRun struct {
	Seq          int     `json:"seq"`
	Method       string  `json:"method"`
	GapMS        float64 `json:"gap_ms"`        // the engine's window: nothing answered on the port (probed from the node every 10 ms, past the hold)
	ClientGapMS  float64 `json:"client_gap_ms"` // longest span with no prompt (200 ms) answer to a client's fresh connect
	FailedProbes int     `json:"failed_probes"` // failed client connections
	Attempts     int     `json:"attempts"`
	LongestWait  float64 `json:"longest_wait_ms"` // longest connect of a connection that succeeded
	ProcedureMS  float64 `json:"procedure_ms"`    // until the procedure returned (ours: healthy)
	DataKept     bool    `json:"data_kept"`       // GET /sums after equals before
}

// CutoverResult is one procedure's figures over its runs.
type CutoverResult struct {
	Method            string  `json:"method"`
	Runs              int     `json:"runs"`
	MedianGapMS       float64 `json:"median_gap_ms"`
	MaxGapMS          float64 `json:"max_gap_ms"`
	MedianClientGapMS float64 `json:"median_client_gap_ms"`
	FailedProbes      int     `json:"failed_probes"` // failed client connections, over all runs
	Attempts          int     `json:"attempts"`
	MedianFailed      float64 `json:"median_failed_probes"`
	MaxWaitMS         float64 `json:"max_longest_wait_ms"`
	MedianProcedureMS float64 `json:"median_procedure_ms"`
	DataKept          int     `json:"data_kept_runs"`
	Ratio             float64 `json:"ratio_vs_naive"` // median gap / naive's median gap
}

// CutoverReport is what bench/results/cutover-<date>.json holds.
type CutoverReport struct {
	Date         string          `json:"date"`
	Kernel       string          `json:"kernel"`
	Docker       []string        `json:"docker"`
	ProbeEveryMS float64         `json:"probe_every_ms"`
	Note         string          `json:"note"`
	Results      []CutoverResult `json:"results"`
	Runs         []CutoverRun    `json:"runs"`
}

type cutBench struct {
	node      *sandbox.EngineNode
	hostCLI   *client.Client // the host's engine: builds the images
	cli       *client.Client // the node's engine
	engine    *containers.Engine
	prefix    string
	imageV1   string
	imageV2   string
	volumes   map[string]bool // every volume seen on a container of ours
	dirs      []string        // bind-mount sources
	trial     int
	dockerCLI string
}

// runCutover runs the cutover bench, prints its table and writes its JSON.
// An unreachable Docker engine skips it with a message, not an error.
func runCutover(n int, outDir string, stdout io.Writer) (err error) {
	if n < 1 {
		return fmt.Errorf("-cutover-n must be at least 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cli.Ping(pctx)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(stdout, "cutover bench skipped: docker engine unreachable: %v\n", err)
		return nil
	}
	defer cli.Close()
	dockerBin, err := exec.LookPath("docker")
	if err != nil {
		fmt.Fprintf(stdout, "cutover bench skipped: no docker CLI for the naive procedure: %v\n", err)
		return nil
	}
	id := make([]byte, 3)
	rand.Read(id)
	b := &cutBench{hostCLI: cli, prefix: cutPrefix + hex.EncodeToString(id) + "-",
		volumes: map[string]bool{}, dockerCLI: dockerBin}
	b.imageV1, b.imageV2 = b.prefix+"svc:v1", b.prefix+"svc:v2"
	defer func() {
		if cerr := b.cleanup(); cerr != nil {
			cerr = fmt.Errorf("cleanup (remove what is left named %s*): %w", b.prefix, cerr)
			if err == nil {
				err = cerr
			} else {
				fmt.Fprintln(os.Stderr, "bench:", cerr)
			}
		}
	}()
	defer func() {
		if b.cli != nil {
			b.cli.Close()
		}
	}()
	if err := b.raiseNode(ctx, stdout); err != nil {
		return err
	}
	runs, err := b.alternate(ctx, n, stdout)
	if err != nil {
		return err
	}
	results := []CutoverResult{summarize(methodOurs, runs), summarize(methodNaive, runs)}
	for i := range results {
		if results[1].MedianGapMS > 0 {
			results[i].Ratio = results[i].MedianGapMS / results[1].MedianGapMS
		}
	}
	printCutover(stdout, results, n)
	if err := writeCutover(outDir, b.report(ctx, results, runs), stdout); err != nil {
		return err
	}
	if results[0].DataKept != results[0].Runs {
		return fmt.Errorf("the cutover changed the service's data in %d of %d runs", results[0].Runs-results[0].DataKept, results[0].Runs)
	}
	return nil
}

// raiseNode builds the service's two images and starts a node with its own
// Docker engine holding them.
func (b *cutBench) raiseNode(ctx context.Context, stdout io.Writer) error {
	fmt.Fprintf(stdout, "cutover: building the test service as %s and %s ...\n", b.imageV1, b.imageV2)
	if err := b.buildImages(ctx); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", b.prefix+"node-")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cutover: starting a node with its own Docker engine (namespace adh-bcut) ...\n")
	if b.node, err = sandbox.StartEngineNode(ctx, "bcut", 232, dir); err != nil {
		return err
	}
	if err := b.node.Load(ctx, b.imageV1, b.imageV2); err != nil {
		return err
	}
	if b.cli, err = client.NewClientWithOpts(client.WithHost(b.node.Host), client.WithAPIVersionNegotiation()); err != nil {
		return err
	}
	b.engine = containers.NewWith(b.cli).WithHold(firewall.NewHold(b.node.NetnsPath(), "bcut"))
	return nil
}

// alternate runs each procedure n times, the order alternating (ours,
// naive, naive, ours, ...) so neither always runs on a warmer engine.
func (b *cutBench) alternate(ctx context.Context, n int, stdout io.Writer) ([]CutoverRun, error) {
	var runs []CutoverRun
	for i := 0; i < n; i++ {
		order := []string{methodOurs, methodNaive}
		if i%2 == 1 {
			order = []string{methodNaive, methodOurs}
		}
		for _, m := range order {
			fmt.Fprintf(stdout, "cutover %d/%d: %s ...\n", i+1, n, m)
			r, err := b.run(ctx, m == methodOurs)
			if err != nil {
				return nil, fmt.Errorf("%s, run %d: %w", m, i+1, err)
			}
			r.Seq, r.Method = len(runs)+1, m
			runs = append(runs, r)
		}
	}
	return runs, nil
}

func printCutover(stdout io.Writer, results []CutoverResult, n int) {
	fmt.Fprintf(stdout, "\none service swapped while %d clients in a peer namespace connect in a loop (a connect may wait %s), %d runs each:\n", clients, connectWait, n)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "procedure\truns\tfailed connections\tattempts\tlongest successful connect ms\tmedian gap ms\tmax gap ms\tmedian client gap ms\tprocedure ms\tdata kept\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%d/%d\t\n", r.Method, r.Runs, r.FailedProbes, r.Attempts, r.MaxWaitMS, r.MedianGapMS, r.MaxGapMS, r.MedianClientGapMS, r.MedianProcedureMS, r.DataKept, r.Runs)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "ours/naive median gap: %.2f (goal: at most 0.5, with 0 failed connections)\n", results[0].Ratio)
}

func (b *cutBench) report(ctx context.Context, results []CutoverResult, runs []CutoverRun) CutoverReport {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return CutoverReport{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Kernel:       strings.TrimSpace(string(kernel)),
		Docker:       b.versions(ctx),
		ProbeEveryMS: float64(probeEvery) / float64(time.Millisecond),
		Note: "a node with its own dockerd in a network namespace (sandbox.EngineNode); each run starts from a fresh predecessor (svc v1: named volume, anonymous volume from the image's VOLUME, bind mount, " +
			"restart unless-stopped, published on the node's port 18080) and takes it to svc v2; 6 clients in a peer namespace connect to it in a loop (GET /version over a new connection each time, " +
			"a connect may wait 3 s, 10 ms between attempts; waits and gaps counted after a 1.5 s warm-up, before the procedure starts); failed = a connect or request that did not get a 200; longest wait = the longest connect that succeeded; " +
			"gap = the engine's window, probed from the node every 10 ms past the hold (containers.MeasureWith): from the first failed probe to the end of the next answered one; " +
			"client gap = the longest span from the start of a client's attempt not answered promptly (200 ms) to the start of the next prompt one (a held SYN is retransmitted after 1 s); " +
			"ours = Preflight, Create, Swap (holding the port: new SYNs dropped, not rejected, until the new container answers), WaitHealthy, PortsAnswer; " +
			"naive = docker stop, docker rm, docker run -d with the same volumes (the anonymous one by name), bind and port, through the docker CLI; " +
			"order alternates ours, naive, naive, ours, ...; procedure_ms runs until the procedure returns; data_kept compares GET /sums after with before",
		Results: results,
		Runs:    runs,
	}
}

// writeCutover writes the report to outDir/cutover-<date>.json.
func writeCutover(outDir string, rep CutoverReport, stdout io.Writer) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(outDir, "cutover-"+time.Now().Format("2006-01-02")+".json")
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false) // "&&" as is
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if err := os.WriteFile(file, js.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", file)
	return nil
}

func summarize(method string, runs []CutoverRun) CutoverResult {
	r := CutoverResult{Method: method}
	var gaps, cgaps, fails, procs []float64
	for _, x := range runs {
		if x.Method != method {
			continue
		}
		r.Runs++
		r.FailedProbes += x.FailedProbes
		r.Attempts += x.Attempts
		r.MaxWaitMS = max(r.MaxWaitMS, x.LongestWait)
		r.MaxGapMS = max(r.MaxGapMS, x.GapMS)
		if x.DataKept {
			r.DataKept++
		}
		gaps, fails, procs = append(gaps, x.GapMS), append(fails, float64(x.FailedProbes)), append(procs, x.ProcedureMS)
		cgaps = append(cgaps, x.ClientGapMS)
	}
	r.MedianGapMS, r.MedianFailed, r.MedianProcedureMS = median(gaps), median(fails), median(procs)
	r.MedianClientGapMS = median(cgaps)
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

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
func (b *cutBench) run(ctx context.Context, ours bool) (CutoverRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := b.raise(ctx)
	if err != nil {
		return CutoverRun{}, err
	}
	do := func() error { return b.naive(ctx, s) }
	if ours {
		do = func() error { return b.ours(ctx, s) }
	}
	stop := make(chan struct{})
	stats := make(chan sandbox.ClientStats, 1)
	go func() { stats <- b.node.Clients(ctx, s.addr, "/version", clients, connectWait, stop) }()
	time.Sleep(sandbox.ClientWarmup + 200*time.Millisecond)
	// The engine's own window, seen from the node every 10 ms past the hold:
	// from the predecessor letting go of the port to the new container
	// taking it.
	probe := containers.DialProbe(firewall.NewHold(b.node.NetnsPath(), "bcut").Dial, fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond)
	var took time.Duration
	window, _, err := containers.MeasureWith(ctx, "the node's port", probe, probeEvery, func() error {
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
	if err != nil {
		return CutoverRun{}, err
	}
	after, err := s.waitSums(ctx, "v2")
	if err != nil {
		return CutoverRun{}, err
	}
	r := CutoverRun{GapMS: ms(window), ClientGapMS: ms(cs.Gap), FailedProbes: cs.Failed, Attempts: cs.Attempts, LongestWait: ms(cs.LongestWait),
		ProcedureMS: ms(took), DataKept: reflect.DeepEqual(after, s.sums)}
	if err := b.sweep(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// ours is this project's cutover, as the Migrate activity runs it.
func (b *cutBench) ours(ctx context.Context, s *service) error {
	spec := containers.Spec{Name: s.name, Image: b.imageV2, Ports: map[string]string{fmt.Sprintf("%d/tcp", s.port): "8080/tcp"}}
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
