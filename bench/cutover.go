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
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/docker/docker/client"

	"adoption/bench/report"
	"adoption/containers/cutover"
	"adoption/containers/hold"
	"adoption/containers/steer"
	"adoption/sandbox"
)

const (
	cutPrefix   = "bench-cut-"
	probeEvery  = 10 * time.Millisecond
	stopTimeout = 10 * time.Second // ours; `docker stop` defaults to 10 s too
	methodOurs  = "containers.Engine cutover (queued port hold)"
	clients     = 6
	connectWait = 3 * time.Second // a client's connect may wait this long
	servicePort = 18080
	methodNaive = "docker stop && rm && run"
	// methodOverlap is the overlap cutover: the new container beside the
	// old, the port moved to it by the steering in one transaction.
	methodOverlap = "containers.Engine overlap cutover (port steered)"
)

// CutoverRun is one procedure, once.
type CutoverRun struct {
	Seq          int     `json:"seq"`
	Method       string  `json:"method"`
	GapMS        float64 `json:"gap_ms"`        // the engine's window: nothing answered on the port (probed from the node every 10 ms, past the hold)
	ClientGapMS  float64 `json:"client_gap_ms"` // longest span with no prompt (200 ms) answer to a client's fresh connect
	FailedProbes int     `json:"failed_probes"` // failed client connections
	Attempts     int     `json:"attempts"`
	LongestWait  float64 `json:"longest_wait_ms"`      // longest connect of a connection that succeeded
	P50WaitMS    float64 `json:"p50_wait_ms"`          // median connect that succeeded
	P99WaitMS    float64 `json:"p99_wait_ms"`          // 99th percentile connect that succeeded
	ProcedureMS  float64 `json:"procedure_ms"`         // until the procedure returned (ours: healthy)
	DataKept     bool    `json:"data_kept"`            // GET /sums after equals before
	FirstFail    string  `json:"first_fail,omitempty"` // the first failed connection's error
	// HandshakeMS is the longest handshake the clients' kernel measured
	// (SYN to SYN-ACK) of the connects that succeeded: the node's part of
	// LongestWait. SynRetransmitted counts connects whose SYN was sent again.
	HandshakeMS      float64 `json:"longest_handshake_ms"`
	SynRetransmitted int     `json:"syn_retransmitted"`
	// CPUWaitMS is how long the bench process's threads (the clients among
	// them) waited, runnable, for a CPU while the clients ran, summed over
	// its threads: the host's share of LongestWait.
	CPUWaitMS float64 `json:"bench_cpu_wait_ms"`
	// HoldDropped (ours): the hold fell back to dropping SYNs, and why.
	HoldDropped string `json:"hold_dropped,omitempty"`
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
	MedianP50WaitMS   float64 `json:"median_p50_wait_ms"`
	MaxP99WaitMS      float64 `json:"max_p99_wait_ms"`
	HoldDropped       int     `json:"hold_dropped_runs"` // runs whose hold dropped instead of queueing
	MaxHandshakeMS    float64 `json:"max_longest_handshake_ms"`
	SynRetransmitted  int     `json:"syn_retransmitted"` // connects whose SYN was sent again, over all runs
	MaxCPUWaitMS      float64 `json:"max_bench_cpu_wait_ms"`
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
	engine    *cutover.Engine
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
	cli, err := dockerClient(ctx)
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
	results := []CutoverResult{summarize(methodOurs, runs), summarize(methodOverlap, runs), summarize(methodNaive, runs)}
	for i := range results {
		if naive := results[len(results)-1]; naive.MedianGapMS > 0 {
			results[i].Ratio = results[i].MedianGapMS / naive.MedianGapMS
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
	b.engine = cutover.NewWith(b.cli).WithHold(hold.NewHold(b.node.NetnsPath(), "bcut")).WithSteer(steer.New(b.node.NetnsPath(), "bcut"))
	return nil
}

// alternate runs each procedure n times, the order alternating (ours,
// naive, naive, ours, ...) so neither always runs on a warmer engine.
func (b *cutBench) alternate(ctx context.Context, n int, stdout io.Writer) ([]CutoverRun, error) {
	var runs []CutoverRun
	for i := 0; i < n; i++ {
		// Each procedure first once every three rounds.
		all := []string{methodOurs, methodOverlap, methodNaive}
		order := append(all[i%3:], all[:i%3]...)
		for _, m := range order {
			fmt.Fprintf(stdout, "cutover %d/%d: %s ...\n", i+1, n, m)
			r, err := b.run(ctx, m)
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
	fmt.Fprintln(tw, "procedure\truns\tfailed connections\tattempts\tlongest successful connect ms\tp50 connect ms\tmax p99 connect ms\tmedian gap ms\tmax gap ms\tmedian client gap ms\tprocedure ms\tdata kept\thold dropped\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\t%d/%d\t%d\t\n", r.Method, r.Runs, r.FailedProbes, r.Attempts, r.MaxWaitMS, r.MedianP50WaitMS, r.MaxP99WaitMS,
			r.MedianGapMS, r.MaxGapMS, r.MedianClientGapMS, r.MedianProcedureMS, r.DataKept, r.Runs, r.HoldDropped)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "swap: longest wait %.0f ms against a longest gap of %.0f ms (goal: within 50 ms); overlap: longest wait %.0f ms (goal: at most 50 ms); both with 0 failed connections\n",
		results[0].MaxWaitMS, results[0].MaxGapMS, results[1].MaxWaitMS)
	for _, r := range results {
		fmt.Fprintf(stdout, "%s: longest handshake the clients' kernel measured %.1f ms, connects whose SYN was sent again %d; the bench's threads waited for a CPU up to %.0f ms in a run\n",
			r.Method, r.MaxHandshakeMS, r.SynRetransmitted, r.MaxCPUWaitMS)
	}
	if results[0].HoldDropped > 0 {
		fmt.Fprintf(stdout, "WARNING: in %d of %d runs the hold fell back to dropping SYNs (see hold_dropped in the runs)\n", results[0].HoldDropped, results[0].Runs)
	}
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
			"gap = the engine's window, probed from the node every 10 ms past the hold at the node's address, through the engine's DNAT as the clients go (cutover.MeasureWith): from the first failed probe to the end of the next answered one; " +
			"client gap = the longest span from the start of a client's attempt not answered promptly (200 ms) to the start of the next prompt one (a held SYN is retransmitted after 1 s); " +
			"ours = Preflight, Create, Swap (holding the port as the agent does: new SYNs queued (NFQUEUE), let through as the new container answers; hold_dropped says a run whose hold fell back to dropping), WaitHealthy, PortsAnswer; " +
			"overlap = Preflight, Create (the engine publishing its port on loopback only), Overlap (started beside the old one, the node's port steered to it by a DNAT in table ip adoption_steer in one transaction, the old one stopped with SIGTERM, finishing its requests), WaitHealthy, PortsAnswer; " +
			"p50/p99 connect = of the connects that succeeded after the warm-up; " +
			"handshake = the longest SYN to SYN-ACK the clients' kernel measured (TCP_INFO's first round trip) of the connects that succeeded, syn_retransmitted = connects whose SYN was sent again: the node's part of a wait; " +
			"bench_cpu_wait_ms = how long the bench process's threads (the clients among them) waited runnable for a CPU while the clients ran (/proc/self/task/*/schedstat, summed over threads): the host's part; " +
			"naive = docker stop, docker rm, docker run -d with the same volumes (the anonymous one by name), bind and port, through the docker CLI; " +
			"order rotates (swap, overlap, naive; overlap, naive, swap; ...); procedure_ms runs until the procedure returns; data_kept compares GET /sums after with before",
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
	var gaps, cgaps, fails, procs, p50s []float64
	for _, x := range runs {
		if x.Method != method {
			continue
		}
		r.Runs++
		r.FailedProbes += x.FailedProbes
		r.Attempts += x.Attempts
		r.MaxWaitMS = max(r.MaxWaitMS, x.LongestWait)
		r.MaxP99WaitMS = max(r.MaxP99WaitMS, x.P99WaitMS)
		r.MaxHandshakeMS = max(r.MaxHandshakeMS, x.HandshakeMS)
		r.SynRetransmitted += x.SynRetransmitted
		r.MaxCPUWaitMS = max(r.MaxCPUWaitMS, x.CPUWaitMS)
		p50s = append(p50s, x.P50WaitMS)
		if x.HoldDropped != "" {
			r.HoldDropped++
		}
		r.MaxGapMS = max(r.MaxGapMS, x.GapMS)
		if x.DataKept {
			r.DataKept++
		}
		gaps, fails, procs = append(gaps, x.GapMS), append(fails, float64(x.FailedProbes)), append(procs, x.ProcedureMS)
		cgaps = append(cgaps, x.ClientGapMS)
	}
	r.MedianGapMS, r.MedianFailed, r.MedianProcedureMS = report.Median(gaps), report.Median(fails), report.Median(procs)
	r.MedianClientGapMS, r.MedianP50WaitMS = report.Median(cgaps), report.Median(p50s)
	return r
}

// dockerClient is a client of the host's Docker engine, once it answered a
// ping within 5 s.
func dockerClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}
