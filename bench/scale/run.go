// Package scale is the bench's scale section: a SIMULATION of N nodes,
// each with one module (a container), driven through the real Fleet (in
// waves) and NodeMigration code by one orchestrator process (adopt-worker
// orchestrate) on one Temporal dev server: migrated wave by wave, left
// idle a while, then flipped in batches. Each node's agent runs in the
// bench process on the shared fakes. Run is its one entry; its figures
// are rows (bench/report), with -scale-before the same simulation's
// figures with an earlier orchestrator as their peer; its details are the
// JSON's "scale" section.
package scale

// This file holds Run, the options and details, and the simulation's
// setup (the dev server, the orchestrator and the node workers).

import (
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
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"adoption/activities"
	"adoption/activities/watch"
	"adoption/bench/report"
	"adoption/config"
	"adoption/sandbox"
	"adoption/workflows"
)

// Details is the scale section of the JSON: one simulation, and with
// -scale-before the same simulation run first with the earlier
// orchestrator (Before).
type Details struct {
	Simulation       string            `json:"simulation"`
	Orchestrator     string            `json:"orchestrator"` // the tree adopt-worker was built from
	Nodes            int               `json:"nodes"`
	Module           string            `json:"module"` // what each node declares and migrates
	Waves            string            `json:"waves"`  // as given (-scale-waves, -scale-max-failed)
	WaveSizes        []int             `json:"wave_sizes"`
	Server           string            `json:"server"`
	Pollers          string            `json:"orchestrator_workflow_pollers"` // --workflow-pollers ("" its default)
	WorkerOptions    string            `json:"worker_options"`
	WorkersStartS    float64           `json:"workers_start_s"`
	StartFleetS      float64           `json:"start_fleet_s"`     // until the fleet's start request returned
	WavesMigratedS   []float64         `json:"waves_migrated_s"`  // fleet start to every node of wave k done (control node = wave 0)
	MigrateAllS      float64           `json:"migrate_all_s"`     // fleet start to every node adopted with its module migrated
	MigrateOps       int               `json:"migrate_ops"`       // fleet migrate Updates the bench sent as the operator
	QueryRetries     int               `json:"query_retries"`     // fleet queries asked again (timed out, or the fleet's task failed)
	QueryFailedTask  int               `json:"query_failed_task"` // ... of them, answered "Workflow Task in failed state"
	ConvergeAllS     float64           `json:"converge_all_s"`    // fleet start to every node converged (flipped)
	FleetRuns        int               `json:"fleet_runs"`        // the fleet's continue-as-new generations
	FleetEnd         string            `json:"fleet_end"`         // how the fleet ended: completed, or what was seen instead
	FleetEvents      int               `json:"fleet_events"`      // events in the fleet's current run at the end
	OrchPeakRSSMiB   float64           `json:"orchestrator_peak_rss_mib"`
	OrchCPUS         float64           `json:"orchestrator_cpu_s"` // utime+stime from its start to the last flip
	OrchBuildID      string            `json:"orchestrator_build_id"`
	HistorySample    int               `json:"history_sample"`
	EventsMigrated   Stats             `json:"history_events_migrated"`
	BytesMigrated    Stats             `json:"history_bytes_migrated"`
	EventsConverged  Stats             `json:"history_events_converged"`
	BytesConverged   Stats             `json:"history_bytes_converged"`
	Idle             *IdleDetails      `json:"idle,omitempty"`
	Attention        *AttentionDetails `json:"attention,omitempty"`
	Flips            []FlipBatch       `json:"flips"`
	BaselineRSSMiB   float64           `json:"baseline_rss_mib"`    // before any worker
	IdleRSSMiB       float64           `json:"idle_rss_mib"`        // workers started, no workflow yet
	PeakRSSMiB       float64           `json:"peak_rss_mib"`        // sampled every 250 ms while the workflows ran
	PeakHeapInuseMiB float64           `json:"peak_heap_inuse_mib"` // runtime.MemStats.HeapInuse, sampled
	PeakHeapAllocMiB float64           `json:"peak_heap_alloc_mib"` // runtime.MemStats.HeapAlloc, sampled
	SysMiB           float64           `json:"sys_mib"`             // runtime.MemStats.Sys at the end
	PeakGoroutines   int               `json:"peak_goroutines"`     // sampled
	ServerPeakRSSMiB float64           `json:"server_peak_rss_mib"` // the dev server's VmHWM
	NodesDir         string            `json:"nodes_dir"`           // the simulated nodes' roots and state directories
	ServerDB         string            `json:"server_db"`           // the dev server's SQLite file (-scale-db)
	Namespace        string            `json:"namespace,omitempty"` // -scale-cluster: the run's own namespace
	// ClusterBaseline is the cluster's PostgreSQL writes in a window before
	// the simulation's workers start (-scale-cluster): what the cluster's
	// other users wrote meanwhile, per second.
	ClusterBaseline *PGBaseline `json:"cluster_baseline,omitempty"`
	LoadAvg         []string    `json:"load_average"` // /proc/loadavg at the start and at the end
	Note            string      `json:"note"`
	Before          *Details    `json:"before,omitempty"` // -scale-before: the run with the earlier orchestrator
	Error           string      `json:"error,omitempty"`  // the Before run's failure
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
	// Nodes simulated, each declaring and migrating one module.
	Nodes int
	// Waves and MaxFailed are the fleet file's waves: and max_failed: as
	// written, comma-separated ("" for none).
	Waves, MaxFailed string
	// Idle is the window the fleet is left alone in once every node is
	// migrated, for the idle rows.
	Idle time.Duration
	// Batches are the flips sent all at once, one batch after another
	// (each its own p50 and p99); the nodes left are then flipped
	// Parallel at a time, so every node converges.
	Batches  []int
	Parallel int
	// Timeout bounds one simulation.
	Timeout time.Duration
	// DB is where the dev server's SQLite file goes: "tmpfs" (beside the
	// simulated nodes) or "disk" (the bench's temp dir).
	DB string
	// Pollers is the orchestrator's --workflow-pollers ("" for its default).
	Pollers string
	// ServerConfig are more dynamic config values for the dev server
	// (KEY=VALUE), said in the rows.
	ServerConfig []string
	// OrchTree builds the orchestrator from another tree ("" this one);
	// Before, when set, runs the whole simulation first with the
	// orchestrator built from that tree, its figures the rows' peer.
	OrchTree, Before string
	// QueryVerdicts makes the simulated agents ask the witness's verdict
	// by query alone, as agents before the verdict heartbeat did: the
	// Before run's agents, when its orchestrator predates it.
	QueryVerdicts bool
	// Witness witnesses each flip from the orchestrator, as a real node's
	// flip is: it dials 127.0.0.1:22 (a refusal counts as an answer).
	Witness bool
	// Cluster, when set, is the directory of a running cluster (make
	// cluster: its tls/ and server.pid) the simulation runs on instead of
	// a dev server of its own, in a namespace of its own; ClusterAddr its
	// frontend ("" for 127.0.0.1:7233).
	Cluster, ClusterAddr string
	// Attention makes that many nodes need a person (drift, by a node
	// file edited by hand) once migrated, and checks that the visibility
	// query of `adopt status --attention` returns exactly them
	// (attention.go); 0 for none.
	Attention int
}

// scaleRun is one run of the scale section: what its phases share.
type scaleRun struct {
	o        Options
	d        *Details
	out      io.Writer
	tag      string // "scale" or "scale (before)": the progress lines' prefix
	dir      string // logs, kept when the run fails
	nodesDir string
	found    [2]json.RawMessage // the rulesets every node reports: as found, and with its module's port opened
	srv      *devServer
	orch     *orchestrator
	c        client.Client
	ws       []worker.Worker
	plans    []config.Plan
	waves    *config.Waves
	start    time.Time // the fleet's start
	stops    []func()  // undone in reverse by close
}

// logf prints a progress line.
func (r *scaleRun) logf(format string, args ...any) {
	fmt.Fprintf(r.out, r.tag+": "+format+"\n", args...)
}

// queriesVerdicts says whether the orchestrator built from tree answers
// the node's question of the witness's verdict by query alone: a tree
// whose witness does not heartbeat its verdict (no witness/verdict.go).
func queriesVerdicts(tree string) bool {
	_, err := os.Stat(filepath.Join(tree, "witness", "verdict.go"))
	return err != nil
}

// Run runs the section, printing its progress to stdout, and returns its
// rows and details; ctx bounds it beside o.Timeout. With o.Before it runs
// the simulation twice, the earlier orchestrator first, and each row
// carries the earlier figure as its peer (ratio = before / ours).
func Run(ctx context.Context, o Options, stdout io.Writer) ([]report.Row, *Details, error) {
	bin, err := scaleBinary(o)
	if err != nil {
		return nil, nil, err
	}
	if o.Before == "" {
		return runOnce(ctx, o, bin, "scale", stdout)
	}
	bo := o
	bo.OrchTree = o.Before
	bo.QueryVerdicts = queriesVerdicts(o.Before)
	beforeRows, before, berr := runOnce(ctx, bo, bin, "scale (before)", stdout)
	rows, det, err := runOnce(ctx, o, bin, "scale", stdout)
	if det != nil {
		det.Before = before
		if berr != nil && before != nil {
			before.Error = berr.Error()
		}
	}
	return pair(rows, beforeRows, treeName(o.Before)), det, errors.Join(err, berr)
}

// runOnce is one simulation with the orchestrator built from o.OrchTree.
func runOnce(ctx context.Context, o Options, bin, tag string, stdout io.Writer) (rows []report.Row, det *Details, err error) {
	r := &scaleRun{o: o, out: stdout, tag: tag, d: &Details{Nodes: o.Nodes, Module: simModule.Name, Orchestrator: treeName(o.OrchTree),
		Simulation: "SIMULATION for scale only: the real Fleet and NodeMigration workflows in one real orchestrator (adopt-worker orchestrate) on a real dev server, every node's firewall, containers and sockets in memory, its custody store and state directory real on tmpfs"}}
	if o.Cluster != "" {
		r.d.Simulation = strings.Replace(r.d.Simulation, "on a real dev server", "on a running cluster (make cluster: Temporal's server on PostgreSQL, mTLS), in a namespace of its own", 1)
	}
	if o.Witness {
		r.d.Simulation += "; each flip witnessed from the orchestrator (dialling 127.0.0.1:22)"
	}
	if o.QueryVerdicts {
		r.d.Simulation += "; the agents ask the flip witness's verdict by query only, as agents before the verdict heartbeat"
	}
	r.d.LoadAvg = append(r.d.LoadAvg, loadAvg())
	if r.waves, r.d.WaveSizes, err = resolveWaves(o, o.Nodes); err != nil {
		return nil, nil, err
	}
	r.d.Waves = o.Waves
	if o.MaxFailed != "" {
		r.d.Waves += "; max_failed " + o.MaxFailed
	}
	if r.dir, err = os.MkdirTemp("", "bn-scale-"); err != nil {
		return nil, nil, err
	}
	defer func() {
		r.d.LoadAvg = append(r.d.LoadAvg, loadAvg())
		if err != nil {
			r.logf("the dev server's, the orchestrator's and the SDK's logs are kept in %s", r.dir)
			return
		}
		os.RemoveAll(r.dir)
	}()
	defer r.close()
	if err := r.raise(bin); err != nil {
		return nil, r.d, err
	}
	if err := r.startWorkers(); err != nil {
		return nil, r.d, err
	}
	samp := startSampler()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	sampleN := min(20, o.Nodes)
	if err := r.migrateAll(ctx, sampleN); err != nil {
		samp.stop()
		return nil, r.d, err
	}
	edited, err := r.startAttention()
	if err != nil {
		samp.stop()
		return nil, r.d, err
	}
	if err := r.idle(ctx); err != nil {
		samp.stop()
		return nil, r.d, err
	}
	if err := r.checkAttention(ctx, edited); err != nil {
		samp.stop()
		return nil, r.d, err
	}
	fl, err := r.flipAll(ctx)
	r.d.OrchCPUS = r.orch.cpuSeconds()
	peak := samp.stop()
	if err != nil {
		return nil, r.d, err
	}
	if err := r.afterFlips(ctx, fl); err != nil {
		return nil, r.d, err
	}
	r.memory(peak)
	r.d.Note = scaleNote(sampleN, r.d.BaselineRSSMiB)
	return r.rows(sampleN), r.d, nil
}

// treeName is how the rows name the tree an orchestrator was built from.
func treeName(tree string) string {
	if tree == "" {
		return "this tree"
	}
	return tree
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// scaleBinary checks the options and finds the Temporal CLI.
func scaleBinary(o Options) (string, error) {
	if o.Nodes < 2 || o.Parallel < 1 || o.Idle <= 0 {
		return "", fmt.Errorf("-scale-nodes must be at least 2 (a control node and a wave), -scale-flip-parallel at least 1, -scale-idle more than 0")
	}
	if o.Attention < 0 || o.Attention > o.Nodes-1 {
		return "", fmt.Errorf("-scale-attention %d: it is between 0 and -scale-nodes - 1 (%d): the control node is never chosen", o.Attention, o.Nodes-1)
	}
	for _, b := range o.Batches {
		if b < 1 {
			return "", fmt.Errorf("-scale-flip-batches: %d: each batch is at least 1 flip", b)
		}
	}
	if _, _, err := resolveWaves(o, o.Nodes); err != nil {
		return "", err
	}
	if o.Cluster != "" && o.Before != "" {
		return "", fmt.Errorf("-scale-cluster with -scale-before: run the two simulations on the cluster one at a time (-scale-orch-tree)")
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
	r.logf("listing the found rulesets to serve from memory ...")
	if r.found[0], err = foundRuleset(nil); err != nil {
		return err
	}
	if r.found[1], err = foundRuleset(&simModule.Ports[0]); err != nil {
		return err
	}
	r.d.Pollers = r.o.Pollers
	if r.o.Cluster != "" {
		if err := r.joinCluster(); err != nil {
			return err
		}
	} else if err := r.startServer(bin, nodesDir); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(r.dir, "sdk.log"))
	if err != nil {
		return err
	}
	r.onClose(func() { logf.Close() })
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if r.srv.cluster != nil {
		r.c, err = dialTemporal(*r.srv.cluster, logger)
	} else {
		r.c, err = client.Dial(client.Options{HostPort: r.srv.addr, Logger: sdklog.NewStructuredLogger(logger)})
	}
	if err != nil {
		return err
	}
	r.onClose(r.c.Close)
	return nil
}

// startServer starts the run's own dev server.
func (r *scaleRun) startServer(bin, nodesDir string) error {
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
	var err error
	if r.srv, err = startServer(bin, dbFile, r.dir, longPolls, r.o.ServerConfig); err != nil {
		return err
	}
	r.onClose(r.srv.stop)
	r.d.Server = r.srv.version + fmt.Sprintf("; sqlite file %s (-scale-db %s); --dynamic-config-value frontend.namespaceCount=%d (concurrent long polls per API; default 1200), matching.numTaskqueueRead/WritePartitions=1 (default 4)", dbFile, r.o.DB, longPolls)
	if len(r.o.ServerConfig) > 0 {
		r.d.Server += "; " + strings.Join(r.o.ServerConfig, ", ")
	}
	r.logf("dev server on %s (%s)", r.srv.addr, r.srv.version)
	return nil
}

// startWorkers starts the orchestrator and one worker per simulated node,
// each serving the found ruleset from memory.
func (r *scaleRun) startWorkers() error {
	runtime.GC()
	r.d.BaselineRSSMiB = rssMiB("self", "VmRSS")
	r.logf("starting the orchestrator (built from %s) and %d node workers ...", treeName(r.o.OrchTree), r.o.Nodes)
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
	if r.orch, err = startOrchestrator(r.dir, r.srv.env(), r.o.Pollers, r.o.OrchTree); err != nil {
		return err
	}
	r.onClose(r.orch.stop)
	if err := r.startFloorWorker(); err != nil {
		return err
	}
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
	r.logf("%d workers started in %.1f s", len(r.ws), r.d.WorkersStartS)
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
	if r.o.Witness {
		wk, err := sandbox.WitnessKey()
		if err != nil {
			return err
		}
		mem.plan.Witness = &config.Witness{Address: "127.0.0.1", Key: config.KeyLines{wk.Public}}
	}
	if i == 0 {
		mem.plan.Role = "control" // a fleet has one, first
	}
	mem.plan.Modules = []config.ModulePlan{simModule}
	r.plans[i] = mem.plan
	acts := mem.activities()
	acts.Temporal = r.c
	if !r.o.QueryVerdicts {
		acts.Converter = converter.GetDefaultDataConverter()
	}
	loop := &watch.Loop{Checks: activities.Checks{Activities: acts}, Records: mem.state, Local: acts.Local}
	ctx, cancel := context.WithCancel(context.Background())
	r.onClose(cancel)
	go loop.Run(ctx)
	w := worker.New(r.c, workflows.NodeQueue(mem.name), worker.Options{MaxConcurrentActivityTaskPollers: 1, DisableWorkflowWorker: true,
		Interceptors: []interceptor.WorkerInterceptor{loop.Interceptor()}})
	w.RegisterActivity(acts)
	w.RegisterActivity(&watch.Watcher{Loop: loop})
	registerFloorNode(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start node worker %d: %w", i, err)
	}
	r.ws = append(r.ws, w)
	return nil
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

// memory records the bench process's and the server's memory (a
// cluster's VmHWM is since its start, its other users' load included).
func (r *scaleRun) memory(peak peakMem) {
	var msEnd runtime.MemStats
	runtime.ReadMemStats(&msEnd)
	r.d.SysMiB = float64(msEnd.Sys) / (1 << 20)
	r.d.PeakRSSMiB, r.d.PeakHeapInuseMiB, r.d.PeakHeapAllocMiB, r.d.PeakGoroutines = peak.rss, peak.heapInuse, peak.heapAlloc, peak.goroutines
	r.d.ServerPeakRSSMiB = rssMiB(strconv.Itoa(r.srv.pid), "VmHWM")
}
