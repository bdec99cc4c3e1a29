package main

// Orchestration at scale: a SIMULATION, for scale only. One Fleet of N
// nodes (the real Fleet and NodeMigration code) run by one orchestrator
// process, `adopt-worker orchestrate` built from this tree, on one Temporal
// dev server this bench starts on free ports. Each node's agent is
// simulated in this process: an activities.Activities whose Firewall,
// Marks, Containers, Cutover, Sockets and Flipper are fakes that answer at
// once (the found ruleset is a real one, listed once from a bn- namespace
// with sandbox.UFWRules, so Preview really evaluates it) and whose custody
// store and state directory are the real ones on a tmpfs node root (see
// memNode), one worker per node queue (adoption-node-<node>) with one
// activity poller each.
//
// Figures: wall time from the fleet's start until every node is `adopted`
// (visibility: AdoptionPhase="adopted"; the fleet starts each node once the
// previous one is adopted, as it would with no module to migrate) and until
// every node is `converged` (each flipped by its "flip" Update, 50 at a
// time); the orchestrator's peak RSS (VmHWM); history events per node; the
// flip Update to converged latency: from sending the Update until the
// workflow task that set phase converged completed (read from the node's
// history), and until the workflow closed, which it does once the fleet
// has its last progress signal. There is no peer: the figures are absolute.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"adoption/activities"
	"adoption/config"
	"adoption/custody"
	"adoption/firewall"
	"adoption/internal/fake"
	"adoption/internal/ufwfixture"
	"adoption/nodestate"
	"adoption/sockets"
	"adoption/workflows"
)

// ScaleDetails is the scale section of the JSON.
type ScaleDetails struct {
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
	FlipParts        map[string]Stats `json:"flip_parts_ms"`            // where that time went (scale_breakdown.go)
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
	s.Min, s.Max, s.Median = percentile(xs, 0), percentile(xs, 100), median(xs)
	return s
}

type scaleOpts struct {
	nodes, flips, parallel int
	timeout                time.Duration
	// db is where the dev server's SQLite file goes: "tmpfs" (beside the
	// simulated nodes) or "disk" (the bench's temp dir).
	db string
	// pollers is the orchestrator's --workflow-pollers ("" for its default).
	pollers string
}

func runScale(o scaleOpts, stdout io.Writer) (rows []Row, det *ScaleDetails, err error) {
	if o.nodes < 1 || o.flips < 0 || o.flips > o.nodes || o.parallel < 1 {
		return nil, nil, fmt.Errorf("-scale-nodes must be at least 1, -scale-flips between 0 and it, -scale-flip-parallel at least 1")
	}
	if o.db != "tmpfs" && o.db != "disk" {
		return nil, nil, fmt.Errorf("-scale-db %q: it is tmpfs or disk", o.db)
	}
	if o.db == "tmpfs" && shmDir() == "" {
		return nil, nil, fmt.Errorf("-scale-db tmpfs: there is no /dev/shm here; pass -scale-db disk")
	}
	bin := os.Getenv("ADOPT_TEMPORAL_BIN")
	if bin == "" {
		bin = filepath.Join(os.Getenv("HOME"), ".cache", "adoption", "bin", "temporal")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("the Temporal CLI is not at %s: run `make temporal-cli` (or set ADOPT_TEMPORAL_BIN), or pass -skip-scale", bin)
	}
	d := &ScaleDetails{Nodes: o.nodes, FlipSample: o.flips, FlipParallel: o.parallel,
		Simulation: "SIMULATION for scale only: the real Fleet and NodeMigration workflows in one real orchestrator (adopt-worker orchestrate) on a real dev server, every node's firewall, containers and sockets in memory, its custody store and state directory real on tmpfs"}
	dir, err := os.MkdirTemp("", "bn-scale-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(stdout, "scale: the dev server's and the SDK's logs are kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	// The simulated nodes' roots and state directories: on tmpfs where
	// there is one, so a thousand nodes' fsyncs do not queue on the one
	// disk they would never share.
	nodesDir, err := os.MkdirTemp(shmDir(), "bn-scale-nodes-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(nodesDir)
	d.NodesDir = nodesDir

	fmt.Fprintln(stdout, "scale: listing a found ruleset to serve from memory ...")
	found, err := foundRuleset()
	if err != nil {
		return nil, nil, err
	}

	// The dev server's SQLite file: on tmpfs by default. The dev server
	// stands in for a Temporal cluster, whose persistence has storage of
	// its own; on this host's one shared virtual disk, SQLite's fsyncs
	// were most of a flip's time at 50 in flight (measured: p50 4.6 s on
	// disk, 1.7 s on tmpfs, 50 nodes), a figure of the disk, not of the
	// orchestration. -scale-db disk measures that too.
	dbFile := filepath.Join(dir, "temporal.db")
	if o.db == "tmpfs" {
		dbFile = filepath.Join(nodesDir, "temporal.db")
	}
	d.ServerDB = dbFile
	longPolls := max(1200, 2*o.nodes+200)
	srv, err := startServer(bin, dbFile, dir, longPolls)
	if err != nil {
		return nil, nil, err
	}
	defer srv.stop()
	d.Pollers = o.pollers
	d.Server = srv.version + fmt.Sprintf("; sqlite file %s (-scale-db %s); --dynamic-config-value frontend.namespaceCount=%d (concurrent long polls per API; default 1200), matching.numTaskqueueRead/WritePartitions=1 (default 4)", dbFile, o.db, longPolls)
	fmt.Fprintf(stdout, "scale: dev server on %s (%s)\n", srv.addr, srv.version)

	logf, err := os.Create(filepath.Join(dir, "sdk.log"))
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	c, err := client.Dial(client.Options{HostPort: srv.addr,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()

	runtime.GC()
	d.BaselineRSSMiB = rssMiB("self", "VmRSS")
	fmt.Fprintf(stdout, "scale: starting the workflow worker and %d node workers ...\n", o.nodes)
	t0 := time.Now()
	var ws []worker.Worker
	defer func() {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func(w worker.Worker) { defer wg.Done(); w.Stop() }(w)
		}
		wg.Wait()
	}()
	orch, err := startOrchestrator(dir, srv.addr, o.pollers)
	if err != nil {
		return nil, nil, err
	}
	defer orch.stop()
	d.OrchBuildID = orch.buildID
	plans := make([]config.Plan, o.nodes)
	for i := range plans {
		mem, err := newMemNode(nodesDir, fmt.Sprintf("sim%05d", i), found)
		if err != nil {
			return nil, nil, fmt.Errorf("lay out simulated node %d: %w", i, err)
		}
		if i == 0 {
			mem.plan.Role = "control" // a fleet has one, first
		}
		plans[i] = mem.plan
		w := worker.New(c, workflows.NodeQueue(mem.name), worker.Options{MaxConcurrentActivityTaskPollers: 1, DisableWorkflowWorker: true})
		w.RegisterActivity(mem.activities())
		if err := w.Start(); err != nil {
			return nil, nil, fmt.Errorf("start node worker %d: %w", i, err)
		}
		ws = append(ws, w)
		// A first poll makes the server create the queue's rows: in
		// batches, so SQLite is not asked for 2,000 at once.
		if (i+1)%100 == 0 {
			time.Sleep(time.Second)
		}
	}
	d.WorkersStartS = time.Since(t0).Seconds()
	fmt.Fprintf(stdout, "scale: %d workers started in %.1f s\n", len(ws), d.WorkersStartS)
	d.WorkerOptions = fmt.Sprintf("one orchestrator process (adopt-worker orchestrate, build %s, Worker Deployment %q) on %q with SDK defaults; "+
		"%d simulated node agents in this process, one worker per node queue, MaxConcurrentActivityTaskPollers 1 and DisableWorkflowWorker, one client",
		orch.buildID, workflows.DeploymentName, workflows.TaskQueue, o.nodes)
	runtime.GC()
	d.IdleRSSMiB = rssMiB("self", "VmRSS")

	samp := startSampler()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	fmt.Fprintf(stdout, "scale: starting one Fleet of %d nodes ...\n", o.nodes)
	start := time.Now()
	in := workflows.FleetInput{Name: "bench"}
	for _, p := range plans {
		in.Members = append(in.Members, workflows.FleetMember{Node: p.Node, Role: p.Role})
	}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.FleetID("bench"), TaskQueue: workflows.TaskQueue}, workflows.FleetWorkflow, in); err != nil {
		samp.stop()
		return nil, nil, fmt.Errorf("start the fleet: %w", err)
	}
	d.StartAllS = time.Since(start).Seconds()
	last := int64(-1)
	countRetries := 0
	for {
		n, err := count(ctx, c, `AdoptionPhase = "adopted"`)
		if err != nil && isTransient(err) && ctx.Err() == nil {
			countRetries++ // an overloaded dev server: ask again
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			samp.stop()
			return nil, nil, fmt.Errorf("count adopted nodes: %w", err)
		}
		if n != last && (n == int64(o.nodes) || n/100 != last/100) {
			fmt.Fprintf(stdout, "scale: %d/%d adopted after %.1f s\n", n, o.nodes, time.Since(start).Seconds())
		}
		last = n
		if n >= int64(o.nodes) {
			break
		}
		if ctx.Err() != nil {
			samp.stop()
			return nil, nil, fmt.Errorf("only %d of %d nodes adopted within -scale-timeout %s", n, o.nodes, o.timeout)
		}
		time.Sleep(time.Second)
	}
	d.AdoptAllS = time.Since(start).Seconds()
	d.CountRetries = countRetries
	d.NodesPerSecond = float64(o.nodes) / d.AdoptAllS

	// Histories of a sample spread over the nodes, once adopted.
	sampleN := min(20, o.nodes)
	d.HistorySample = sampleN
	var evA, byA []float64
	for i := 0; i < sampleN; i++ {
		ev, by, err := history(ctx, c, workflows.WorkflowID(plans[i*o.nodes/sampleN].Node))
		if err != nil {
			samp.stop()
			return nil, nil, err
		}
		evA, byA = append(evA, float64(ev)), append(byA, float64(by))
	}
	d.EventsAdopted, d.BytesAdopted = stats(evA), stats(byA)

	// Flip every node (or a sample), `parallel` at a time.
	if o.flips == 0 {
		o.flips = o.nodes
		d.FlipSample = o.nodes
	}
	fmt.Fprintf(stdout, "scale: flipping %d nodes, %d at a time ...\n", o.flips, o.parallel)
	var lat, closed []float64
	sent := map[string]time.Time{}
	var flipped []string
	var mu sync.Mutex
	var firstErr error
	var reverted []string
	sem := make(chan struct{}, o.parallel)
	var wg sync.WaitGroup
	for i := 0; i < o.flips; i++ {
		node := plans[i*o.nodes/max(o.flips, 1)].Node
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0, l, err := flipOne(ctx, c, node)
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, errReverted) {
				reverted = append(reverted, err.Error())
				return
			}
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			closed = append(closed, l)
			flipped = append(flipped, node)
			sent[node] = t0
		}()
	}
	wg.Wait()
	if o.flips == o.nodes {
		d.ConvergeAllS = time.Since(start).Seconds()
	}
	d.FlipsReverted = reverted
	peak := samp.stop()
	if firstErr != nil {
		return nil, nil, firstErr
	}
	d.OrchPeakRSSMiB = rssMiB(strconv.Itoa(orch.cmd.Process.Pid), "VmHWM")
	// The fleet ends once its last node has: wait for it (bounded), and
	// say how it ended, or why it could not be read.
	var fst workflows.FleetState
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if err := c.GetWorkflow(wctx, workflows.FleetID("bench"), "").Get(wctx, &fst); err != nil {
		d.FleetEnd = "not ended within 2 min of the last flip: " + err.Error()
		if v, qerr := c.QueryWorkflow(ctx, workflows.FleetID("bench"), "", workflows.QueryFleet); qerr == nil {
			_ = v.Get(&fst)
		} else {
			d.FleetEnd += "; query: " + qerr.Error()
		}
	} else {
		d.FleetEnd = "completed"
	}
	cancel()
	d.FleetRuns = fst.Runs
	if ev, _, err := historyOf(ctx, c, workflows.FleetID("bench")); err == nil {
		d.FleetEvents = ev
	}
	fmt.Fprintf(stdout, "scale: the fleet %s after %d continue-as-new (%d events in its last run)\n", d.FleetEnd, d.FleetRuns, d.FleetEvents)
	d.FlipClosedMS, d.FlipClosedP99MS = stats(closed), percentile(closed, 99)
	fmt.Fprintf(stdout, "scale: reading when each of %d flipped nodes recorded phase converged ...\n", len(flipped))
	spans, err := flipSpans(ctx, c, sent)
	if err != nil {
		return nil, nil, err
	}
	for _, sp := range spans {
		lat = append(lat, ms(sp.total))
	}
	d.FlipMS, d.FlipP99MS = stats(lat), percentile(lat, 99)
	var where string
	where, d.FlipParts = breakdownNote(spans)
	var evC, byC []float64
	for i := 0; i < min(20, len(flipped)); i++ {
		ev, by, err := history(ctx, c, workflows.WorkflowID(flipped[i]))
		if err != nil {
			return nil, nil, err
		}
		evC, byC = append(evC, float64(ev)), append(byC, float64(by))
	}
	d.EventsConverged, d.BytesConverged = stats(evC), stats(byC)
	var msEnd runtime.MemStats
	runtime.ReadMemStats(&msEnd)
	d.SysMiB = float64(msEnd.Sys) / (1 << 20)
	d.PeakRSSMiB, d.PeakHeapInuseMiB, d.PeakHeapAllocMiB, d.PeakGoroutines = peak.rss, peak.heapInuse, peak.heapAlloc, peak.goroutines
	d.ServerPeakRSSMiB = rssMiB(strconv.Itoa(srv.cmd.Process.Pid), "VmHWM")
	d.Note = fmt.Sprintf("one Fleet (control node first, each next node started when the previous is adopted: no module to migrate), each plan read from the node's agent; member nodes, no modules, 2 node files; plan defaults (confirm 2m, reconcile 1m, drift 5m); found ruleset: ufwfixture.DefaultDeny(22/tcp) "+
		"listed once from a bn- namespace and served from memory; adopted = visibility count of AdoptionPhase=\"adopted\" polled every second; "+
		"simulated nodes: firewall, containers, sockets, marks and the flipper in memory, custody store (keyed digests) and state directory real, on tmpfs; "+
		"flip latency = Update \"flip\" sent until the workflow task that set phase converged completed (the node previews and flips in one activity, then confirms and commits in one: 2 activities; 4 before flip-two-steps), its time read from the history; to close = until the workflow closed, after its last progress signal reached the fleet; "+
		"histories of %d nodes spread over the fleet; the bench process had already run the other sections (baseline RSS %.0f MiB)", sampleN, d.BaselineRSSMiB)

	sim := fmt.Sprintf("SIMULATION, %d simulated nodes (firewall, containers, sockets in memory; custody and state real on tmpfs)", o.nodes)
	pollers := o.pollers
	if pollers == "" {
		pollers = "its default"
	}
	ours := fmt.Sprintf("one Fleet, one orchestrator (--workflow-pollers %s), one dev server (SQLite on %s)", pollers, o.db)
	rows = []Row{
		absolute("scale", fmt.Sprintf("orchestration: wall time from the fleet's start until all %d nodes are adopted", o.nodes), d.AdoptAllS, "s", ours,
			fmt.Sprintf("%s; %.1f nodes/s, one after another as the Fleet orders them; the fleet continued as new %d time(s), %d events in its last run, and %s", sim, d.NodesPerSecond, d.FleetRuns, d.FleetEvents, d.FleetEnd), 1),
		absolute("scale", "orchestrator peak RSS (VmHWM) while adopting and flipping", d.OrchPeakRSSMiB, "MiB", "adopt-worker orchestrate",
			fmt.Sprintf("%s; the node agents' process (this bench): peak RSS %.0f MiB, idle %.0f MiB, %d goroutines at peak; dev server peak RSS %.0f MiB",
				sim, d.PeakRSSMiB, d.IdleRSSMiB, d.PeakGoroutines, d.ServerPeakRSSMiB), 0),
		absolute("scale", "history events per node, adopted", d.EventsAdopted.Median, "events", ours,
			fmt.Sprintf("%s; median of %d nodes (%.0f-%.0f), %.1f KiB", sim, sampleN, d.EventsAdopted.Min, d.EventsAdopted.Max, d.BytesAdopted.Median/1024), 0),
	}
	if d.ConvergeAllS > 0 {
		rows = append(rows, absolute("scale", fmt.Sprintf("orchestration: wall time from the fleet's start until all %d nodes are converged", o.nodes), d.ConvergeAllS, "s", ours,
			fmt.Sprintf("%s; every node flipped once adopted, %d at a time; %d of %d converged, %d flip(s) reverted (not confirmed in time)", sim, o.parallel, len(lat), o.nodes, len(reverted)), 1))
	}
	if len(lat) > 0 {
		rows = append(rows,
			absolute("scale", "history events per node, through the flip to converged", d.EventsConverged.Median, "events", ours,
				fmt.Sprintf("%s; median of %d flipped nodes, %.1f KiB", sim, len(evC), d.BytesConverged.Median/1024), 0),
			absolute("scale", fmt.Sprintf("flip Update to phase converged, median of %d nodes", len(lat)), d.FlipMS.Median, "ms", ours,
				fmt.Sprintf("%s; %d at a time, the other nodes adopted or converged (a drift check every 5 min each while adopted); %s", sim, o.parallel, where), 0),
			absolute("scale", fmt.Sprintf("flip Update to phase converged, p99 of %d nodes", len(lat)), d.FlipP99MS, "ms", ours,
				fmt.Sprintf("%s; max %.0f ms; to the workflow's close (the fleet told): median %.0f ms, p99 %.0f ms", sim, d.FlipMS.Max, d.FlipClosedMS.Median, d.FlipClosedP99MS), 0),
		)
	}
	return rows, d, nil
}

// foundRuleset lists ufwfixture.DefaultDeny(22/tcp) from a throwaway bn-
// namespace: the found firewall every simulated node reports.
func foundRuleset() (json.RawMessage, error) {
	ns, err := newNS("sc")
	if err != nil {
		return nil, err
	}
	defer ns.del()
	rules := ufwfixture.DefaultDeny(config.MustPorts([]string{"22/tcp"}))
	for _, fam := range []string{"iptables-restore", "ip6tables-restore"} {
		if _, err := ns.run([]byte(rules), fam); err != nil {
			return nil, err
		}
	}
	rs, err := firewall.Inspector{Netns: ns.path}.Ruleset()
	if err != nil {
		return nil, err
	}
	return json.Marshal(rs)
}

type devServer struct {
	cmd     *exec.Cmd
	addr    string
	version string
	done    chan struct{}
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts a dev server as tests/harness_test.go does, on free
// ports with its own database file.
func startServer(bin, dbFile, dir string, longPolls int) (*devServer, error) {
	var ports [3]int
	for i := range ports {
		p, err := freeTCPPort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	s := &devServer{addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), done: make(chan struct{})}
	if v, err := exec.Command(bin, "--version").Output(); err == nil {
		s.version = strings.TrimSpace(string(v))
	}
	s.cmd = exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]), "--metrics-port", strconv.Itoa(ports[2]),
		"--db-filename", dbFile, "--log-level", "warn",
		"--dynamic-config-value", fmt.Sprintf("frontend.namespaceCount=%d", longPolls),
		// One partition per task queue: a node queue has one poller, and
		// 1,000 queues of 4 partitions each are 4,000 task queue rows for
		// SQLite to create at once.
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
		"--search-attribute", "AdoptionNode=Keyword", "--search-attribute", "AdoptionPhase=Keyword")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.done) }() //nolint:errcheck
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		c, err := client.Dial(client.Options{HostPort: s.addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
		if err == nil {
			_, herr := c.CheckHealth(context.Background(), &client.CheckHealthRequest{})
			if herr == nil {
				_, herr = c.WorkflowService().DescribeNamespace(context.Background(), &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			}
			c.Close()
			if herr == nil {
				return s, nil
			}
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("dev server exited: %s", b)
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.stop()
	b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
	return nil, fmt.Errorf("dev server did not become healthy on %s: %s", s.addr, b)
}

func (s *devServer) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func isTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded")
}

func count(ctx context.Context, c client.Client, query string) (int64, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: query})
	if err != nil {
		return 0, err
	}
	return resp.GetCount(), nil
}

func historyOf(ctx context.Context, c client.Client, id string) (events, bytes int, err error) {
	return history(ctx, c, id)
}

func history(ctx context.Context, c client.Client, id string) (events, bytes int, err error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, 0, fmt.Errorf("history of %s: %w", id, err)
		}
		events++
		bytes += proto.Size(e)
	}
	return events, bytes, nil
}

// flipSpans reads, from each flipped node's history, when the workflow
// task that set phase converged completed (its search attribute upsert is
// in that task) and where the time from the flip Update's sending to it
// went (scale_breakdown.go).
func flipSpans(ctx context.Context, c client.Client, sent map[string]time.Time) ([]flipSpan, error) {
	type res struct {
		sp  flipSpan
		err error
	}
	out := make(chan res, len(sent))
	sem := make(chan struct{}, 8)
	for node, t0 := range sent {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			sp, err := flipSpanOf(ctx, c, workflows.WorkflowID(node), t0)
			out <- res{sp, err}
		}()
	}
	var spans []flipSpan
	for range sent {
		r := <-out
		if r.err != nil {
			return nil, r.err
		}
		spans = append(spans, r.sp)
	}
	return spans, nil
}

// errReverted: the flip was reverted (not confirmed in time); the node is
// adopted again and its workflow goes on.
var errReverted = errors.New("flip reverted")

// flipOne sends the flip Update and waits for the workflow to complete,
// which it does once phase converged is set and the fleet told; or for the
// flip to be reverted, which it reports as errReverted. The end is awaited
// by the SDK's long poll on the close event (exact, and no load on the
// server while it waits); a revert, which leaves the workflow running, is
// looked for by a status query every 2 s, which does not time anything.
func flipOne(ctx context.Context, c client.Client, node string) (time.Time, float64, error) {
	id := workflows.WorkflowID(node)
	t0 := time.Now()
	lat, err := flipWait(ctx, c, id, node, t0)
	return t0, lat, err
}

func flipWait(ctx context.Context, c client.Client, id, node string, t0 time.Time) (float64, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateFlip,
		Args: []any{workflows.RequestInput{}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return 0, fmt.Errorf("flip %s: %w", node, err)
	}
	var rr workflows.RequestResult
	if err := h.Get(ctx, &rr); err != nil {
		return 0, fmt.Errorf("flip %s: %w", node, err)
	}
	type end struct {
		st  workflows.State
		lat float64
		err error
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan end, 1)
	go func() {
		var e end
		e.err = c.GetWorkflow(wctx, id, "").Get(wctx, &e.st)
		e.lat = ms(time.Since(t0))
		done <- e
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case e := <-done:
			if e.err != nil {
				return 0, fmt.Errorf("wait for %s to converge: %w", node, e.err)
			}
			if e.st.Phase != workflows.PhaseConverged {
				return 0, fmt.Errorf("node %s ended in phase %s, not converged: %s", node, e.st.Phase, e.st.LastError)
			}
			return e.lat, nil
		case <-tick.C:
			var st workflows.State
			if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus); err == nil && v.Get(&st) == nil &&
				st.Phase == workflows.PhaseAdopted && st.LastError != "" {
				if st.Flip != nil && st.Flip.State == workflows.FlipStateReverted {
					return 0, fmt.Errorf("node %s: %w: %s", node, errReverted, st.Flip.Error)
				}
				if st.Flip == nil || st.Flip.State != workflows.FlipStateFlipping {
					return 0, fmt.Errorf("node %s: the flip did not run: %s", node, st.LastError)
				}
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func rssMiB(pid, field string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

type peakMem struct {
	rss, heapInuse, heapAlloc float64
	goroutines                int
}

type sampler struct {
	done chan struct{}
	out  chan peakMem
}

func startSampler() *sampler {
	s := &sampler{done: make(chan struct{}), out: make(chan peakMem, 1)}
	go func() {
		var p peakMem
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			p.rss = max(p.rss, rssMiB("self", "VmRSS"))
			p.heapInuse = max(p.heapInuse, float64(m.HeapInuse)/(1<<20))
			p.heapAlloc = max(p.heapAlloc, float64(m.HeapAlloc)/(1<<20))
			p.goroutines = max(p.goroutines, runtime.NumGoroutine())
			select {
			case <-s.done:
				s.out <- p
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() peakMem {
	close(s.done)
	return <-s.out
}

// memNode is one simulated node. What it reports of its firewall,
// containers and sockets, and what its Flipper, Marks and Cutover do, are
// the shared in-memory fakes (internal/fake), which answer at once; its custody store (custody.Store, with its
// own custody key, so the digests in the history are keyed as a real
// agent's are) and its state directory (nodestate.Dir: the adopted marker,
// the flip record, converged) are the real ones, on files under a tmpfs
// node root: a healthy node's answers under the activities' current
// contracts (drift by keyed digest, the flip record, the commit's boot
// files), not a second implementation of them to keep in step.
type memNode struct {
	name     string
	plan     config.Plan
	found    json.RawMessage
	contents map[string][]byte
	files    *custody.Store
	state    *nodestate.Dir
}

// memFiles are each node's found files under its root: the two declared
// node files, and ufw's boot switch, which the commit turns off.
var memFiles = map[string]string{
	"/etc/hosts":           "127.0.0.1 localhost\n10.0.0.1 control\n",
	"/etc/resolv.conf":     "nameserver 10.0.0.53\nsearch mesh.internal\n",
	activities.BootUfwConf: "# /etc/ufw/ufw.conf\nENABLED=yes\nLOGLEVEL=low\n",
}

// newMemNode lays out the node's root and state directory under dir and
// creates its custody key, as the agent does at start.
func newMemNode(dir, name string, found json.RawMessage) (*memNode, error) {
	root, stateDir := filepath.Join(dir, name, "root"), filepath.Join(dir, name, "state")
	for path, content := range memFiles {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	m := &memNode{name: name, found: found, contents: map[string][]byte{},
		files: custody.New(root, stateDir), state: nodestate.New(stateDir)}
	if err := m.files.EnsureKey(); err != nil {
		return nil, err
	}
	m.plan = config.Plan{Node: name, Role: "member", ManagementPorts: config.MustPorts([]string{"22/tcp"}),
		Control: []string{"predecessor-sync"}, ConfirmTimeout: 2 * time.Minute, ReconcileInterval: time.Minute,
		DriftInterval: 5 * time.Minute, StopTimeout: 10 * time.Second}
	for _, path := range []string{"/etc/hosts", "/etc/resolv.conf"} {
		mesh := memFiles[path] + "# mesh\n"
		sum := sha256.Sum256([]byte(mesh))
		m.contents[hex.EncodeToString(sum[:])] = []byte(mesh)
		m.plan.NodeFiles = append(m.plan.NodeFiles, config.FilePlan{Path: path, SHA256: hex.EncodeToString(sum[:])})
	}
	return m, nil
}

func (m *memNode) activities() *activities.Activities {
	return &activities.Activities{
		Node:          m.name,
		Firewall:      fake.Listed{Found: m.found},
		Marks:         fake.Marks{},
		Engine:        fake.Engine{Containers: fake.Services([]string{"web", "app", "db"}, 0)},
		Cutover:       fake.Cutover{},
		Flipper:       &fake.Flipper{Saved: "# the predecessor's firewall, as it was\n"},
		Sockets:       fake.Sockets{Listening: []sockets.Listener{{Proto: "tcp", Addr: "0.0.0.0", Port: 22, PID: 1, Exe: "sshd"}}},
		Flips:         m.state,
		StartWatchdog: func() error { return nil },
		Files:         m.files,
		State:         m.state,
		Local:         activities.Fixed(m.plan, m.contents, 30*time.Minute),
	}
}

// orchestrator is `adopt-worker orchestrate`, built from this tree and run
// as its own process, so that its memory is its own.
type orchestrator struct {
	cmd     *exec.Cmd
	buildID string
	done    chan struct{}
}

func startOrchestrator(dir, addr, pollers string) (*orchestrator, error) {
	exe := filepath.Join(dir, "adopt-worker")
	if out, err := exec.Command("go", "build", "-o", exe, "./worker").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build adopt-worker: %v\n%s", err, out)
	}
	logf, err := os.Create(filepath.Join(dir, "orchestrator.log"))
	if err != nil {
		return nil, err
	}
	o := &orchestrator{done: make(chan struct{}), buildID: "bench"}
	args := []string{"orchestrate", "--build-id", o.buildID}
	if pollers != "" {
		args = append(args, "--workflow-pollers", pollers)
	}
	o.cmd = exec.Command(exe, args...)
	o.cmd.Env = append(os.Environ(), "ADOPT_CONFIG=", "ADOPT_TEMPORAL_ADDRESS="+addr)
	o.cmd.Stdout, o.cmd.Stderr = logf, logf
	if err := o.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { o.cmd.Wait(); logf.Close(); close(o.done) }() //nolint:errcheck
	return o, nil
}

func (o *orchestrator) stop() {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(20 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}
