package scale

// This file holds the idle window: once every node is adopted with its
// module migrated (default reconcile and drift intervals), the fleet is
// left alone for -scale-idle. What the nodes' histories gained in it is
// the background load of an idle adopted node, per day; the CPU the
// orchestrator used in it (utime+stime from /proc), per hour.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// IdleDetails is what the idle window measured.
type IdleDetails struct {
	WindowS         float64 `json:"window_s"`
	Nodes           int     `json:"nodes"`
	EventsBefore    Stats   `json:"history_events_at_window_start"`
	EventsInWindow  Stats   `json:"history_events_in_window"`
	EventsPerDay    Stats   `json:"history_events_per_node_per_day"` // in the window, times a day over the window
	ReconcileEveryS float64 `json:"reconcile_interval_s"`
	DriftEveryS     float64 `json:"drift_interval_s"`
	OrchCPUS        float64 `json:"orchestrator_cpu_s"`          // utime+stime in the window
	OrchCPUPerHourS float64 `json:"orchestrator_cpu_s_per_hour"` // ... times an hour over the window
	// CPUPerS is each process's CPU per second of the window, in ms (the
	// baseline a flip batch's CPU is measured over).
	CPUPerS map[string]float64 `json:"cpu_ms_per_s"`
	// Writes are the server's write requests in the window by operation
	// (writes.go); WritesPerNodeHour their sum per node and hour.
	Writes            map[string]float64 `json:"server_writes_in_window"`
	WritesPerNodeHour float64            `json:"server_writes_per_node_hour"`
	// On a cluster (-scale-cluster): its PostgreSQL's committed
	// transactions and rows written (inserted, updated, deleted) in the
	// window, by database and table (cluster.go), and per node and hour;
	// the cluster's other users' writes are in them (Details.ClusterBaseline).
	PGWrites          map[string]float64 `json:"postgres_in_window,omitempty"`
	PGCommitsNodeHour float64            `json:"postgres_commits_per_node_hour,omitempty"`
	PGRowsNodeHour    float64            `json:"postgres_rows_written_per_node_hour,omitempty"`
	// ... less the cluster's background rate read before the run (its
	// other users' writes, if they held steady).
	PGCommitsNetNodeHour float64 `json:"postgres_commits_per_node_hour_less_background,omitempty"`
	PGRowsNetNodeHour    float64 `json:"postgres_rows_written_per_node_hour_less_background,omitempty"`
}

// userHZ is the unit of /proc/PID/stat's utime and stime (USER_HZ, 100
// on Linux whatever the kernel's tick).
const userHZ = 100

// cpuSeconds is the orchestrator's utime+stime so far, 0 if unreadable.
func (o *orchestrator) cpuSeconds() float64 { return procCPU(o.cmd.Process.Pid) }

// procCPU is process pid's utime+stime so far in seconds, 0 if unreadable.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (utime + stime) / userHZ
}

// idle leaves the migrated fleet alone for the window and measures it.
func (r *scaleRun) idle(ctx context.Context) error {
	// Let the last requests' own tail (the first watch or timer) settle.
	time.Sleep(5 * time.Second)
	det := &IdleDetails{WindowS: r.o.Idle.Seconds(), Nodes: r.o.Nodes,
		ReconcileEveryS: r.plans[0].ReconcileInterval.Seconds(), DriftEveryS: r.plans[0].DriftInterval.Seconds()}
	before, err := r.eventCounts(ctx)
	if err != nil {
		return err
	}
	cpu0, all0 := r.orch.cpuSeconds(), r.cpu()
	w0, p0, err := r.srv.writes(ctx)
	if err != nil {
		return err
	}
	r.logf("every node migrated; idle for %s (reconcile %s, drift %s) ...", r.o.Idle, r.plans[0].ReconcileInterval, r.plans[0].DriftInterval)
	select {
	case <-time.After(r.o.Idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	det.OrchCPUS = r.orch.cpuSeconds() - cpu0
	w1, p1, err := r.srv.writes(ctx)
	if err != nil {
		return err
	}
	perNodeHour := func(n float64) float64 { return n / float64(r.o.Nodes) * time.Hour.Seconds() / r.o.Idle.Seconds() }
	var writes float64
	det.Writes, writes = writesBetween(w0, w1)
	det.WritesPerNodeHour = perNodeHour(writes)
	if p0 != nil {
		det.PGWrites, _ = writesBetween(p0, p1)
		commits, rows := pgSums(det.PGWrites)
		det.PGCommitsNodeHour, det.PGRowsNodeHour = perNodeHour(commits), perNodeHour(rows)
		if b := r.d.ClusterBaseline; b != nil {
			det.PGCommitsNetNodeHour = perNodeHour(max(0, commits-b.CommitsPerS*r.o.Idle.Seconds()))
			det.PGRowsNetNodeHour = perNodeHour(max(0, rows-b.RowsPerS*r.o.Idle.Seconds()))
		}
		r.logf("idle: PostgreSQL: %.0f commits, %.0f rows written in the window: %.1f commits and %.1f rows per node-hour (%.1f and %.1f less the background)",
			commits, rows, det.PGCommitsNodeHour, det.PGRowsNodeHour, det.PGCommitsNetNodeHour, det.PGRowsNetNodeHour)
	}
	// perFlip over the window's seconds is ms per second.
	det.CPUPerS = perFlip(all0, r.cpu(), int(r.o.Idle.Seconds()))
	det.OrchCPUPerHourS = det.OrchCPUS * time.Hour.Seconds() / r.o.Idle.Seconds()
	after, err := r.eventCounts(ctx)
	if err != nil {
		return err
	}
	in, per := make([]float64, len(after)), make([]float64, len(after))
	for i := range after {
		in[i] = after[i] - before[i]
		per[i] = in[i] * (24 * time.Hour).Seconds() / r.o.Idle.Seconds()
	}
	det.EventsBefore, det.EventsInWindow, det.EventsPerDay = stats(before), stats(in), stats(per)
	r.d.Idle = det
	r.logf("idle: events in %s: median %.0f (min %.0f, max %.0f), per node per day median %.0f; orchestrator CPU %.2f s, %.1f s per hour; CPU per second idle: %s; server writes %.0f (%.1f per node-hour): %v",
		r.o.Idle, det.EventsInWindow.Median, det.EventsInWindow.Min, det.EventsInWindow.Max, det.EventsPerDay.Median, det.OrchCPUS, det.OrchCPUPerHourS, cpuNote(det.CPUPerS),
		writes, det.WritesPerNodeHour, det.Writes)
	return nil
}

// writes are the server's write counters (nil without a metrics
// endpoint) and its PostgreSQL's (nil on a dev server).
func (s *devServer) writes(ctx context.Context) (metrics, pg map[string]float64, err error) {
	if s.metrics != "" {
		if metrics, err = s.writeCounters(ctx); err != nil {
			return nil, nil, err
		}
	}
	if s.pg != "" {
		if pg, err = s.pgCounters(ctx); err != nil {
			return nil, nil, err
		}
	}
	return metrics, pg, nil
}

// eventCounts are the history lengths of every node's workflow, in the
// fleet's order (a node's window is between its two reads: the same
// length for each, the reads going in the same order).
func (r *scaleRun) eventCounts(ctx context.Context) ([]float64, error) {
	nodes := make([]string, len(r.plans))
	for i, p := range r.plans {
		nodes[i] = p.Node
	}
	by, err := r.eventsOf(ctx, nodes)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(nodes))
	for i, node := range nodes {
		out[i] = float64(by[node])
	}
	return out, nil
}
