package scale

// This file holds the scale section's rows and note, from its details, and
// their pairing with the rows of the run with the earlier orchestrator
// (-scale-before): the same figure, the earlier value as the peer.

import (
	"fmt"
	"sort"
	"strings"

	"adoption/bench/report"
)

func scaleNote(sampleN int, baselineMiB float64) string {
	return fmt.Sprintf("one Fleet in waves (the control node alone first, then each wave once the one before is done), each plan read from the node's agent; "+
		"every node declares one module (a container publishing 8080/tcp) and migrates it when the bench, as the operator, sends `adopt fleet migrate` (the fleet-migrate Update, relayed to the started nodes wave by wave) "+
		"whenever every started node is adopted; plan defaults (confirm 2m, reconcile 1m, drift 5m); found ruleset: ufwfixture.DefaultDeny(22/tcp) "+
		"listed once from a bn- namespace and served from memory; simulated nodes: firewall, containers, sockets, marks and the flipper in memory, custody store (keyed digests) and state directory real, on tmpfs; "+
		"idle window: every node's history length read before and after, the orchestrator's utime+stime (/proc/PID/stat) before and after; "+
		"flip latency = Update \"flip\" sent until the workflow task that set phase converged completed, its time read from the history; to close = until the workflow closed, after its last progress signal reached the fleet; "+
		"histories of %d nodes spread over the fleet; the bench process had already run the other sections (baseline RSS %.0f MiB)", sampleN, baselineMiB)
}

func (r *scaleRun) rows(sampleN int) []report.Row {
	o, d := r.o, r.d
	sim := fmt.Sprintf("SIMULATION, %d simulated nodes with a module each (firewall, containers, sockets in memory; custody and state real on tmpfs)", o.Nodes)
	pollers := o.Pollers
	if pollers == "" {
		pollers = "its default"
	}
	ours := fmt.Sprintf("orchestrator built from %s (--workflow-pollers %s), one dev server (SQLite on %s)", d.Orchestrator, pollers, o.DB)
	waves := fmt.Sprintf("waves %s (%v nodes, the control node first)", o.Waves, d.WaveSizes)
	idle := d.Idle
	rows := []report.Row{
		report.Absolute("scale", fmt.Sprintf("fleet of %d in %s: wall time from the fleet's start until every node is adopted with its module migrated", o.Nodes, waves), d.MigrateAllS, "s", ours,
			fmt.Sprintf("%s; each wave migrated at %s s; %d fleet migrate request(s)", sim, joinS(d.WavesMigratedS), d.MigrateOps), 1),
		report.Absolute("scale", fmt.Sprintf("fleet of %d in %s: wall time from the fleet's start until every node is converged", o.Nodes, waves), d.ConvergeAllS, "s", ours,
			fmt.Sprintf("%s; after the %s idle window, flips in batches %s; the fleet continued as new %d time(s), %d events in its last run, and %s",
				sim, o.Idle, batchSizes(d.Flips), d.FleetRuns, d.FleetEvents, d.FleetEnd), 1),
		report.Absolute("scale", fmt.Sprintf("idle adopted node with a migrated module (reconcile %s, drift %s): history events per node per day, from a %s window",
			r.plans[0].ReconcileInterval, r.plans[0].DriftInterval, o.Idle), idle.EventsPerDay.Median, "events/day", ours,
			fmt.Sprintf("%s; median of all %d nodes (%.0f-%.0f), %.0f events in the window; goal < 50; a watch that answers only at its 6 h bound adds nothing within a shorter window",
				sim, idle.Nodes, idle.EventsPerDay.Min, idle.EventsPerDay.Max, idle.EventsInWindow.Median), 0),
		report.Absolute("scale", fmt.Sprintf("orchestrator CPU per simulated hour, %d nodes idle (adopted, migrated), from a %s window", o.Nodes, o.Idle), idle.OrchCPUPerHourS, "CPU s/h", ours,
			fmt.Sprintf("%s; utime+stime %.2f s in the window; %.1f s over the whole run (start to the last flip)", sim, idle.OrchCPUS, d.OrchCPUS), 1),
		report.Absolute("scale", fmt.Sprintf("idle adopted node: the server's write requests per node-hour (persistence and visibility), from a %s window", o.Idle), idle.WritesPerNodeHour, "writes/node-h", ours,
			fmt.Sprintf("%s; goal <= 6; by operation in the window: %s; the watch's heartbeat is every 20 min, so a window under an hour samples it", sim, opsNote(idle.Writes)), 1),
	}
	for k, b := range d.Flips {
		if !b.AtOnce {
			continue
		}
		// The batch's number keeps two batches of one size apart (at
		// fewer nodes than the batches ask, the last ones are cut).
		note := fmt.Sprintf("%s; %d of %d converged, %d reverted; the other nodes adopted or converged; %s; CPU per flip: %s", sim, b.MS.N, b.Size, len(b.Reverted), b.Where, cpuNote(b.CPUMS))
		rows = append(rows,
			report.Absolute("scale", fmt.Sprintf("flip Update to phase converged, batch %d, %d at once: p50", k+1, b.Size), b.MS.Median, "ms", ours, note, 0),
			report.Absolute("scale", fmt.Sprintf("flip Update to phase converged, batch %d, %d at once: p99", k+1, b.Size), b.P99MS, "ms", ours,
				fmt.Sprintf("%s; max %.0f ms; to the workflow's close (the fleet told): p50 %.0f ms, p99 %.0f ms", sim, b.MS.Max, b.ClosedMS.Median, b.Closed99), 0))
		if f := b.Floor; f != nil {
			floor := fmt.Sprintf("the floor: the smallest workflow doing a flip's work (floor.go: an Update, an activity on the node's queue with one heartbeat, one on the orchestrator's side, closing in that task), %d at once on the same node queues right after", f.Size)
			goal := "goal: ours at most 1.2x the floor (ratio >= 0.83)"
			rows = append(rows,
				report.WithPeer("scale", fmt.Sprintf("flip against the floor, batch %d, %d at once: the dev server's CPU per flip", k+1, b.Size), b.CPUMS[cpuServer], f.CPUMS[cpuServer], "ms", ours, floor,
					fmt.Sprintf("%s; %s; the flip's CPU per flip: %s; the floor's: %s; the floor's Update to close p50 %.0f ms", sim, goal, cpuNote(b.CPUMS), cpuNote(f.CPUMS), f.MS.Median), 0),
				report.WithPeer("scale", fmt.Sprintf("flip against the floor, batch %d, %d at once: history events from the Update to the close", k+1, b.Size), b.Events.Median, f.Events.Median, "events", ours, floor,
					fmt.Sprintf("%s; %s; the node's history only (the fleet's own events for the flip are not counted); medians (flip %.0f-%.0f)", sim, goal, b.Events.Min, b.Events.Max), 0))
		}
	}
	rows = append(rows,
		report.Absolute("scale", "orchestrator peak RSS (VmHWM) through migrating, idling and flipping", d.OrchPeakRSSMiB, "MiB", ours,
			fmt.Sprintf("%s; the node agents' process (this bench): peak RSS %.0f MiB, idle %.0f MiB, %d goroutines at peak; dev server peak RSS %.0f MiB",
				sim, d.PeakRSSMiB, d.IdleRSSMiB, d.PeakGoroutines, d.ServerPeakRSSMiB), 0),
		report.Absolute("scale", "history events per node, adopted with its module migrated", d.EventsMigrated.Median, "events", ours,
			fmt.Sprintf("%s; median of %d nodes (%.0f-%.0f), %.1f KiB", sim, sampleN, d.EventsMigrated.Min, d.EventsMigrated.Max, d.BytesMigrated.Median/1024), 0),
		report.Absolute("scale", "history events per node, through the flip to converged", d.EventsConverged.Median, "events", ours,
			fmt.Sprintf("%s; median of %d flipped nodes, %.1f KiB", sim, d.EventsConverged.N, d.BytesConverged.Median/1024), 0),
	)
	if a := d.Attention; a != nil {
		rows = append(rows, report.Absolute("scale", fmt.Sprintf("`adopt status --attention` (%s) at %d nodes, %d of them needing a person: time of the one visibility query", a.Query, o.Nodes, len(a.Chosen)), a.QueryMS, "ms", ours,
			fmt.Sprintf("%s; it returned %d, exactly the %d chosen (%s); the set matched %.0f s after the edits, and the query was empty %.0f s after the files were restored", sim, a.Count, len(a.Chosen), a.How, a.WaitS, a.ClearedS), 1))
	}
	return rows
}

func joinS(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(s, ", ")
}

func batchSizes(bs []FlipBatch) string {
	var s []string
	for _, b := range bs {
		if b.AtOnce {
			s = append(s, fmt.Sprintf("%d at once", b.Size))
		} else {
			s = append(s, fmt.Sprintf("the other %d, %d at a time", b.Size, b.Parallel))
		}
	}
	return strings.Join(s, ", then ")
}

// pair gives each of ours the row of the same figure from before as its
// peer (ratio = before / ours). A figure only one run has stays absolute,
// marked so; with no rows of ours, before's are returned as they are.
func pair(ours, before []report.Row, beforeTree string) []report.Row {
	if len(ours) == 0 {
		return before
	}
	by := map[string]report.Row{}
	for _, b := range before {
		by[b.Figure] = b
	}
	out := make([]report.Row, 0, len(ours))
	for _, o := range ours {
		b, ok := by[o.Figure]
		if !ok {
			o.Note += "; no figure from the orchestrator built from " + beforeTree + " (its run failed or lacks it)"
			out = append(out, o)
			continue
		}
		_, rest, _ := strings.Cut(b.Note, "; ") // past the simulation's name, which both share
		out = append(out, report.WithPeer(o.Section, o.Figure, o.Ours, b.Ours, o.Unit, o.OursIs,
			"the same simulation, orchestrator built from "+beforeTree+", run first in this bench", o.Note+" | before: "+rest, o.Decimals))
	}
	return out
}

// opsNote is a count by operation, largest first.
func opsNote(ops map[string]float64) string {
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return ops[keys[i]] > ops[keys[j]] || ops[keys[i]] == ops[keys[j]] && keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, ops[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
