package scale

// This file holds the scale section's rows and note, from its details.

import (
	"fmt"

	"adoption/bench/report"
)

func scaleNote(sampleN int, baselineMiB float64) string {
	return fmt.Sprintf("one Fleet (control node first, each next node started when the previous is adopted: no module to migrate), each plan read from the node's agent; member nodes, no modules, 2 node files; plan defaults (confirm 2m, reconcile 1m, drift 5m); found ruleset: ufwfixture.DefaultDeny(22/tcp) "+
		"listed once from a bn- namespace and served from memory; adopted = visibility count of AdoptionPhase=\"adopted\" polled every second; "+
		"simulated nodes: firewall, containers, sockets, marks and the flipper in memory, custody store (keyed digests) and state directory real, on tmpfs; "+
		"flip latency = Update \"flip\" sent until the workflow task that set phase converged completed (the node previews and flips in one activity, then confirms and commits in one: 2 activities; 4 before flip-two-steps), its time read from the history; to close = until the workflow closed, after its last progress signal reached the fleet; "+
		"histories of %d nodes spread over the fleet; the bench process had already run the other sections (baseline RSS %.0f MiB)", sampleN, baselineMiB)
}

func (r *scaleRun) rows(fl *scaleFlips, sampleN int) []report.Row {
	o, d := r.o, r.d
	sim := fmt.Sprintf("SIMULATION, %d simulated nodes (firewall, containers, sockets in memory; custody and state real on tmpfs)", o.Nodes)
	pollers := o.Pollers
	if pollers == "" {
		pollers = "its default"
	}
	ours := fmt.Sprintf("one Fleet, one orchestrator (--workflow-pollers %s), one dev server (SQLite on %s)", pollers, o.DB)
	rows := []report.Row{
		report.Absolute("scale", fmt.Sprintf("orchestration: wall time from the fleet's start until all %d nodes are adopted", o.Nodes), d.AdoptAllS, "s", ours,
			fmt.Sprintf("%s; %.1f nodes/s, one after another as the Fleet orders them; the fleet continued as new %d time(s), %d events in its last run, and %s", sim, d.NodesPerSecond, d.FleetRuns, d.FleetEvents, d.FleetEnd), 1),
		report.Absolute("scale", "orchestrator peak RSS (VmHWM) while adopting and flipping", d.OrchPeakRSSMiB, "MiB", "adopt-worker orchestrate",
			fmt.Sprintf("%s; the node agents' process (this bench): peak RSS %.0f MiB, idle %.0f MiB, %d goroutines at peak; dev server peak RSS %.0f MiB",
				sim, d.PeakRSSMiB, d.IdleRSSMiB, d.PeakGoroutines, d.ServerPeakRSSMiB), 0),
		report.Absolute("scale", "history events per node, adopted", d.EventsAdopted.Median, "events", ours,
			fmt.Sprintf("%s; median of %d nodes (%.0f-%.0f), %.1f KiB", sim, sampleN, d.EventsAdopted.Min, d.EventsAdopted.Max, d.BytesAdopted.Median/1024), 0),
	}
	if d.ConvergeAllS > 0 {
		rows = append(rows, report.Absolute("scale", fmt.Sprintf("orchestration: wall time from the fleet's start until all %d nodes are converged", o.Nodes), d.ConvergeAllS, "s", ours,
			fmt.Sprintf("%s; every node flipped once adopted, %d at a time; %d of %d converged, %d flip(s) reverted (not confirmed in time)", sim, o.Parallel, len(fl.lat), o.Nodes, len(fl.reverted)), 1))
	}
	if len(fl.lat) > 0 {
		rows = append(rows,
			report.Absolute("scale", "history events per node, through the flip to converged", d.EventsConverged.Median, "events", ours,
				fmt.Sprintf("%s; median of %d flipped nodes, %.1f KiB", sim, fl.sampled, d.BytesConverged.Median/1024), 0),
			report.Absolute("scale", fmt.Sprintf("flip Update to phase converged, median of %d nodes", len(fl.lat)), d.FlipMS.Median, "ms", ours,
				fmt.Sprintf("%s; %d at a time, the other nodes adopted or converged (a drift check every 5 min each while adopted); %s", sim, o.Parallel, fl.where), 0),
			report.Absolute("scale", fmt.Sprintf("flip Update to phase converged, p99 of %d nodes", len(fl.lat)), d.FlipP99MS, "ms", ours,
				fmt.Sprintf("%s; max %.0f ms; to the workflow's close (the fleet told): median %.0f ms, p99 %.0f ms", sim, d.FlipMS.Max, d.FlipClosedMS.Median, d.FlipClosedP99MS), 0),
		)
	}
	return rows
}
