// Package scale is the bench's scale section: a SIMULATION of N nodes
// driven through the real Fleet and NodeMigration code by one orchestrator
// process (adopt-worker orchestrate) on one Temporal dev server, then
// flipped a few at a time. Each node's agent runs in the bench process on
// the shared fakes. Run is its one entry; its figures are absolute rows
// (bench/report) with no peer, its details the JSON's "scale" section.
package scale

// This file holds Run and its phases, methods of scaleRun.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"adoption/activities/watch"
	"adoption/bench/report"
	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// Details is the scale section of the JSON.
type Details struct {
	Simulation       string           `json:"simulation"`
	Nodes            int              `json:"nodes"`
	Server           string           `json:"server"`
	Pollers          string           `json:"orchestrator_workflow_pollers"` // --workflow-pollers ("" its default)
	WorkerOptions    string           `json:"worker_options"`
	WorkersStartS    float64          `json:"workers_start_s"`
	StartAllS        float64          `json:"start_all_s"` // until every start request returned
	StartRetries     int64            `json:"start_retries"`
	CountRetries     int              `json:"count_retries"`  // visibility counts that timed out
	AdoptAllS        float64          `json:"adopt_all_s"`    // fleet start to every node adopted
	ConvergeAllS     float64          `json:"converge_all_s"` // fleet start to every node converged (flipped)
	FleetRuns        int              `json:"fleet_runs"`     // the fleet's continue-as-new generations
	FleetEnd         string           `json:"fleet_end"`      // how the fleet ended: completed, or what was seen instead
	FleetEvents      int              `json:"fleet_events"`   // events in the fleet's current run at the end
	OrchPeakRSSMiB   float64          `json:"orchestrator_peak_rss_mib"`
	OrchBuildID      string           `json:"orchestrator_build_id"`
	NodesPerSecond   float64          `json:"nodes_adopted_per_s"`
	HistorySample    int              `json:"history_sample"`
	EventsAdopted    Stats            `json:"history_events_adopted"`
	BytesAdopted     Stats            `json:"history_bytes_adopted"`
	EventsConverged  Stats            `json:"history_events_converged"`
	BytesConverged   Stats            `json:"history_bytes_converged"`
	FlipSample       int              `json:"flip_sample"`
	FlipParallel     int              `json:"flip_parallel"`
	FlipMS           Stats            `json:"flip_to_converged_ms"`     // Update sent until the workflow task that set phase converged completed
	FlipP99MS        float64          `json:"flip_to_converged_p99_ms"` // ... its p99
	FlipParts        map[string]Stats `json:"flip_parts_ms"`            // where that time went (breakdown.go)
	FlipClosedMS     Stats            `json:"flip_to_closed_ms"`        // Update sent until the workflow closed (after the fleet got its last progress signal)
	FlipClosedP99MS  float64          `json:"flip_to_closed_p99_ms"`
	FlipsReverted    []string         `json:"flips_reverted,omitempty"` // not confirmed in time: the node is adopted again
	BaselineRSSMiB   float64          `json:"baseline_rss_mib"`         // before any worker
	IdleRSSMiB       float64          `json:"idle_rss_mib"`             // workers started, no workflow yet
	PeakRSSMiB       float64          `json:"peak_rss_mib"`             // sampled every 250 ms while the workflows ran
	PeakHeapInuseMiB float64          `json:"peak_heap_inuse_mib"`      // runtime.MemStats.HeapInuse, sampled
	PeakHeapAllocMiB float64          `json:"peak_heap_alloc_mib"`      // runtime.MemStats.HeapAlloc, sampled
	SysMiB           float64          `json:"sys_mib"`                  // runtime.MemStats.Sys at the end
	PeakGoroutines   int              `json:"peak_goroutines"`          // sampled
	ServerPeakRSSMiB float64          `json:"server_peak_rss_mib"`      // the dev server's VmHWM
	NodesDir         string           `json:"nodes_dir"`                // the simulated nodes' roots and state directories
	ServerDB         string           `json:"server_db"`                // the dev server's SQLite file (-scale-db)
	Note             string           `json:"note"`
	Idle             *IdleDetails     `json:"idle,omitempty"`
}

// shmDir is /dev/shm when it is a directory, else the default temp dir.
func shmDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// Stats is a small summary of a sample.
type Stats struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func stats(xs []float64) Stats {
	s := Stats{N: len(xs)}
	if len(xs) == 0 {
		return s
	}
	s.Min, s.Max, s.Median = report.Percentile(xs, 0), report.Percentile(xs, 100), report.Median(xs)
	return s
}

// Options are the section's flags (-scale-*).
type Options struct {
	// Nodes simulated; Flips of them flipped (0: every one), Parallel at
	// a time; the run gives up after Timeout.
	Nodes, Flips, Parallel int
	Timeout                time.Duration
	// DB is where the dev server's SQLite file goes: "tmpfs" (beside the
	// simulated nodes) or "disk" (the bench's temp dir).
	DB string
	// Pollers is the orchestrator's --workflow-pollers ("" for its default).
	Pollers string
	// Idle, when set, runs only the idle phase (idle.go) with a window this
	// long; OrchTree builds the orchestrator from another tree (a checkout
	// of an earlier commit, for the figure before a change).
	Idle     time.Duration
	OrchTree string
}

// scaleRun is one run of the scale section: what its phases share.
type scaleRun struct {
	o        Options
	d        *Details
	out      io.Writer
	dir      string // logs, kept when the run fails
	nodesDir string
	found    json.RawMessage // the ruleset every node reports
	srv      *devServer
	orch     *orchestrator
	c        client.Client
	ws       []worker.Worker
	plans    []config.Plan
	start    time.Time // the fleet's start
	stops    []func()  // undone in reverse by close
}

// scaleFlips is what the flip phase measured.
type scaleFlips struct {
	closed   []float64 // Update sent until the workflow closed, ms
	lat      []float64 // Update sent until phase converged, ms
	sent     map[string]time.Time
	flipped  []string
	reverted []string
	where    string // where the flip's time went
	sampled  int    // converged histories read
}

// Run runs the section, printing its progress to stdout, and returns its
// rows and details; ctx bounds it beside o.Timeout.
func Run(ctx context.Context, o Options, stdout io.Writer) (rows []report.Row, det *Details, err error) {
	bin, err := scaleBinary(o)
	if err != nil {
		return nil, nil, err
	}
	r := &scaleRun{o: o, out: stdout, d: &Details{Nodes: o.Nodes, FlipSample: o.Flips, FlipParallel: o.Parallel,
		Simulation: "SIMULATION for scale only: the real Fleet and NodeMigration workflows in one real orchestrator (adopt-worker orchestrate) on a real dev server, every node's firewall, containers and sockets in memory, its custody store and state directory real on tmpfs"}}
	if r.dir, err = os.MkdirTemp("", "bn-scale-"); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(stdout, "scale: the dev server's and the SDK's logs are kept in %s\n", r.dir)
			return
		}
		os.RemoveAll(r.dir)
	}()
	defer r.close()
	if err := r.raise(bin); err != nil {
		return nil, nil, err
	}
	if err := r.startWorkers(); err != nil {
		return nil, nil, err
	}
	samp := startSampler()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.Idle > 0 {
		rows, err := r.idle(ctx)
		samp.stop()
		return rows, r.d, err
	}
	sampleN := min(20, o.Nodes)
	if err := r.adoptAll(ctx, sampleN); err != nil {
		samp.stop()
		return nil, nil, err
	}
	fl, err := r.flipAll(ctx)
	peak := samp.stop()
	if err != nil {
		return nil, nil, err
	}
	if err := r.afterFlips(ctx, fl); err != nil {
		return nil, nil, err
	}
	r.memory(peak)
	r.d.Note = scaleNote(sampleN, r.d.BaselineRSSMiB)
	return r.rows(fl, sampleN), r.d, nil
}

// scaleBinary checks the options and finds the Temporal CLI.
func scaleBinary(o Options) (string, error) {
	if o.Nodes < 1 || o.Flips < 0 || o.Flips > o.Nodes || o.Parallel < 1 {
		return "", fmt.Errorf("-scale-nodes must be at least 1, -scale-flips between 0 and it, -scale-flip-parallel at least 1")
	}
	if o.DB != "tmpfs" && o.DB != "disk" {
		return "", fmt.Errorf("-scale-db %q: it is tmpfs or disk", o.DB)
	}
	if o.DB == "tmpfs" && shmDir() == "" {
		return "", fmt.Errorf("-scale-db tmpfs: there is no /dev/shm here; pass -scale-db disk")
	}
	bin := os.Getenv("ADOPT_TEMPORAL_BIN")
	if bin == "" {
		bin = filepath.Join(os.Getenv("HOME"), ".cache", "adoption", "bin", "temporal")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("the Temporal CLI is not at %s: run `make temporal-cli` (or set ADOPT_TEMPORAL_BIN), or pass -skip-scale", bin)
	}
	return bin, nil
}

// onClose has close undo f, after what was set up later.
func (r *scaleRun) onClose(f func()) { r.stops = append(r.stops, f) }

func (r *scaleRun) close() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// raise lays out the nodes' directory, starts the dev server and dials it.
func (r *scaleRun) raise(bin string) error {
	// The simulated nodes' roots and state directories: on tmpfs where
	// there is one, so a thousand nodes' fsyncs do not queue on the one
	// disk they would never share.
	nodesDir, err := os.MkdirTemp(shmDir(), "bn-scale-nodes-")
	if err != nil {
		return err
	}
	r.onClose(func() { os.RemoveAll(nodesDir) })
	r.nodesDir, r.d.NodesDir = nodesDir, nodesDir
	fmt.Fprintln(r.out, "scale: listing a found ruleset to serve from memory ...")
	if r.found, err = foundRuleset(); err != nil {
		return err
	}
	// The dev server's SQLite file: on tmpfs by default. The dev server
	// stands in for a Temporal cluster, whose persistence has storage of
	// its own; on a shared virtual disk SQLite's fsyncs are most of a
	// flip's time, a figure of the disk, not of the orchestration.
	// -scale-db disk measures that too.
	dbFile := filepath.Join(r.dir, "temporal.db")
	if r.o.DB == "tmpfs" {
		dbFile = filepath.Join(nodesDir, "temporal.db")
	}
	r.d.ServerDB = dbFile
	longPolls := max(1200, 2*r.o.Nodes+200)
	if r.srv, err = startServer(bin, dbFile, r.dir, longPolls); err != nil {
		return err
	}
	r.onClose(r.srv.stop)
	r.d.Pollers = r.o.Pollers
	r.d.Server = r.srv.version + fmt.Sprintf("; sqlite file %s (-scale-db %s); --dynamic-config-value frontend.namespaceCount=%d (concurrent long polls per API; default 1200), matching.numTaskqueueRead/WritePartitions=1 (default 4)", dbFile, r.o.DB, longPolls)
	fmt.Fprintf(r.out, "scale: dev server on %s (%s)\n", r.srv.addr, r.srv.version)
	logf, err := os.Create(filepath.Join(r.dir, "sdk.log"))
	if err != nil {
		return err
	}
	r.onClose(func() { logf.Close() })
	r.c, err = client.Dial(client.Options{HostPort: r.srv.addr,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return err
	}
	r.onClose(r.c.Close)
	return nil
}

// startWorkers starts the orchestrator and one worker per simulated node,
// each serving the found ruleset from memory.
func (r *scaleRun) startWorkers() error {
	runtime.GC()
	r.d.BaselineRSSMiB = rssMiB("self", "VmRSS")
	fmt.Fprintf(r.out, "scale: starting the workflow worker and %d node workers ...\n", r.o.Nodes)
	t0 := time.Now()
	var err error
	r.onClose(func() {
		var wg sync.WaitGroup
		for _, w := range r.ws {
			wg.Add(1)
			go func(w worker.Worker) { defer wg.Done(); w.Stop() }(w)
		}
		wg.Wait()
	})
	if r.orch, err = startOrchestrator(r.dir, r.srv.addr, r.o.Pollers, r.o.OrchTree); err != nil {
		return err
	}
	r.onClose(r.orch.stop)
	r.d.OrchBuildID = r.orch.buildID
	r.plans = make([]config.Plan, r.o.Nodes)
	for i := range r.plans {
		if err := r.startNode(i); err != nil {
			return err
		}
		// A first poll makes the server create the queue's rows: in
		// batches, so SQLite is not asked for 2,000 at once.
		if (i+1)%100 == 0 {
			time.Sleep(time.Second)
		}
	}
	r.d.WorkersStartS = time.Since(t0).Seconds()
	fmt.Fprintf(r.out, "scale: %d workers started in %.1f s\n", len(r.ws), r.d.WorkersStartS)
	r.d.WorkerOptions = fmt.Sprintf("one orchestrator process (adopt-worker orchestrate, build %s, Worker Deployment %q) on %q with SDK defaults; "+
		"%d simulated node agents in this process, one worker per node queue, MaxConcurrentActivityTaskPollers 1 and DisableWorkflowWorker, one client",
		r.orch.buildID, workflows.DeploymentName, workflows.TaskQueue, r.o.Nodes)
	runtime.GC()
	r.d.IdleRSSMiB = rssMiB("self", "VmRSS")
	return nil
}

// startNode lays out simulated node i and starts its worker.
func (r *scaleRun) startNode(i int) error {
	mem, err := newMemNode(r.nodesDir, fmt.Sprintf("sim%05d", i), r.found)
	if err != nil {
		return fmt.Errorf("lay out simulated node %d: %w", i, err)
	}
	if i == 0 {
		mem.plan.Role = "control" // a fleet has one, first
	}
	if r.o.Idle > 0 {
		mem.plan.Role = "member"
		mem.plan.Modules = []config.ModulePlan{idleModule}
	}
	r.plans[i] = mem.plan
	acts := mem.activities()
	acts.Temporal = r.c
	loop := &watch.Loop{Checks: acts, Records: mem.state}
	ctx, cancel := context.WithCancel(context.Background())
	r.onClose(cancel)
	go loop.Run(ctx)
	w := worker.New(r.c, workflows.NodeQueue(mem.name), worker.Options{MaxConcurrentActivityTaskPollers: 1, DisableWorkflowWorker: true,
		Interceptors: []interceptor.WorkerInterceptor{loop.Interceptor()}})
	w.RegisterActivity(acts)
	w.RegisterActivity(&watch.Watcher{Loop: loop})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start node worker %d: %w", i, err)
	}
	r.ws = append(r.ws, w)
	return nil
}

// adoptAll starts the fleet, waits until every node is adopted and reads
// the histories of sampleN nodes spread over the fleet.
func (r *scaleRun) adoptAll(ctx context.Context, sampleN int) error {
	fmt.Fprintf(r.out, "scale: starting one Fleet of %d nodes ...\n", r.o.Nodes)
	r.start = time.Now()
	in := fleet.FleetInput{Name: "bench"}
	for _, p := range r.plans {
		in.Members = append(in.Members, fleet.FleetMember{Node: p.Node, Role: p.Role})
	}
	if _, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fleet.FleetID("bench"), TaskQueue: workflows.TaskQueue}, fleet.FleetWorkflow, in); err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	r.d.StartAllS = time.Since(r.start).Seconds()
	if err := r.waitAdopted(ctx); err != nil {
		return err
	}
	r.d.AdoptAllS = time.Since(r.start).Seconds()
	r.d.NodesPerSecond = float64(r.o.Nodes) / r.d.AdoptAllS
	r.d.HistorySample = sampleN
	ids := make([]string, sampleN)
	for i := range ids {
		ids[i] = r.plans[i*r.o.Nodes/sampleN].Node
	}
	var err error
	r.d.EventsAdopted, r.d.BytesAdopted, _, err = r.histories(ctx, ids)
	return err
}

// waitAdopted polls the visibility count of adopted nodes every second.
func (r *scaleRun) waitAdopted(ctx context.Context) error {
	last := int64(-1)
	for {
		n, err := count(ctx, r.c, `AdoptionPhase = "adopted"`)
		if err != nil && isTransient(err) && ctx.Err() == nil {
			r.d.CountRetries++ // an overloaded dev server: ask again
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			return fmt.Errorf("count adopted nodes: %w", err)
		}
		if n != last && (n == int64(r.o.Nodes) || n/100 != last/100) {
			fmt.Fprintf(r.out, "scale: %d/%d adopted after %.1f s\n", n, r.o.Nodes, time.Since(r.start).Seconds())
		}
		last = n
		if n >= int64(r.o.Nodes) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d nodes adopted within -scale-timeout %s", n, r.o.Nodes, r.o.Timeout)
		}
		time.Sleep(time.Second)
	}
}

// histories are the event counts and sizes of the nodes' histories.
func (r *scaleRun) histories(ctx context.Context, nodes []string) (events, bytes Stats, n int, err error) {
	var ev, by []float64
	for _, node := range nodes {
		e, b, err := history(ctx, r.c, workflows.WorkflowID(node))
		if err != nil {
			return Stats{}, Stats{}, 0, err
		}
		ev, by = append(ev, float64(e)), append(by, float64(b))
	}
	return stats(ev), stats(by), len(nodes), nil
}

// flipAll flips every node (or a sample), parallel at a time.
func (r *scaleRun) flipAll(ctx context.Context) (*scaleFlips, error) {
	if r.o.Flips == 0 {
		r.o.Flips = r.o.Nodes
		r.d.FlipSample = r.o.Nodes
	}
	fmt.Fprintf(r.out, "scale: flipping %d nodes, %d at a time ...\n", r.o.Flips, r.o.Parallel)
	fl := &scaleFlips{sent: map[string]time.Time{}}
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, r.o.Parallel)
	var wg sync.WaitGroup
	for i := 0; i < r.o.Flips; i++ {
		node := r.plans[i*r.o.Nodes/max(r.o.Flips, 1)].Node
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0, l, err := flipOne(ctx, r.c, node)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errReverted):
				fl.reverted = append(fl.reverted, err.Error())
			case err != nil:
				firstErr = cmp.Or(firstErr, err)
			default:
				fl.closed, fl.flipped = append(fl.closed, l), append(fl.flipped, node)
				fl.sent[node] = t0
			}
		}()
	}
	wg.Wait()
	if r.o.Flips == r.o.Nodes {
		r.d.ConvergeAllS = time.Since(r.start).Seconds()
	}
	r.d.FlipsReverted = fl.reverted
	return fl, firstErr
}

// afterFlips waits for the fleet's end and reads, from the histories, when
// each flipped node converged and where the time went.
func (r *scaleRun) afterFlips(ctx context.Context, fl *scaleFlips) error {
	r.d.OrchPeakRSSMiB = rssMiB(strconv.Itoa(r.orch.cmd.Process.Pid), "VmHWM")
	r.fleetEnd(ctx)
	r.d.FlipClosedMS, r.d.FlipClosedP99MS = stats(fl.closed), report.Percentile(fl.closed, 99)
	fmt.Fprintf(r.out, "scale: reading when each of %d flipped nodes recorded phase converged ...\n", len(fl.flipped))
	spans, err := flipSpans(ctx, r.c, fl.sent)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		fl.lat = append(fl.lat, report.MS(sp.total))
	}
	r.d.FlipMS, r.d.FlipP99MS = stats(fl.lat), report.Percentile(fl.lat, 99)
	fl.where, r.d.FlipParts = breakdownNote(spans)
	r.d.EventsConverged, r.d.BytesConverged, fl.sampled, err = r.histories(ctx, fl.flipped[:min(20, len(fl.flipped))])
	return err
}

// fleetEnd waits (bounded) for the fleet, which ends once its last node
// has, and says how it ended, or why it could not be read.
func (r *scaleRun) fleetEnd(ctx context.Context) {
	var fst fleet.FleetState
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := r.c.GetWorkflow(wctx, fleet.FleetID("bench"), "").Get(wctx, &fst); err != nil {
		r.d.FleetEnd = "not ended within 2 min of the last flip: " + err.Error()
		if v, qerr := r.c.QueryWorkflow(ctx, fleet.FleetID("bench"), "", fleet.QueryFleet); qerr == nil {
			_ = v.Get(&fst)
		} else {
			r.d.FleetEnd += "; query: " + qerr.Error()
		}
	} else {
		r.d.FleetEnd = "completed"
	}
	r.d.FleetRuns = fst.Runs
	if ev, _, err := history(ctx, r.c, fleet.FleetID("bench")); err == nil {
		r.d.FleetEvents = ev
	}
	fmt.Fprintf(r.out, "scale: the fleet %s after %d continue-as-new (%d events in its last run)\n", r.d.FleetEnd, r.d.FleetRuns, r.d.FleetEvents)
}

// memory records the bench process's and the dev server's memory.
func (r *scaleRun) memory(peak peakMem) {
	var msEnd runtime.MemStats
	runtime.ReadMemStats(&msEnd)
	r.d.SysMiB = float64(msEnd.Sys) / (1 << 20)
	r.d.PeakRSSMiB, r.d.PeakHeapInuseMiB, r.d.PeakHeapAllocMiB, r.d.PeakGoroutines = peak.rss, peak.heapInuse, peak.heapAlloc, peak.goroutines
	r.d.ServerPeakRSSMiB = rssMiB(strconv.Itoa(r.srv.cmd.Process.Pid), "VmHWM")
}
