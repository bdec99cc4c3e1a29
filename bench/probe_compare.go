package main

// This file holds the probe section's figure of the preview's comparison
// alone: flip.PreviewFlipOn of the ruleset and node as listed once (the
// regions of the header space and the ports before and after the flip,
// compared), its time and its memory, at once and at the section's
// multiple of the control node.

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"adoption/activities"
	"adoption/bench/report"
	"adoption/firewall/eval"
	"adoption/firewall/flip"
)

// ComparisonDetails is the comparison alone, in the probe section of the
// JSON.
type ComparisonDetails struct {
	Runs     int       `json:"runs"`
	MS       []float64 `json:"ms"`
	MedianMS float64   `json:"median_ms"`
	// AllocBytes and Allocs are allocated per comparison: the runs'
	// total over the runs.
	AllocBytes uint64 `json:"alloc_bytes_per_run"`
	Allocs     uint64 `json:"allocs_per_run"`
	// PeakHeapBytes is the heap's live objects at their highest during the
	// runs (sampled every millisecond), above what they were before.
	PeakHeapBytes uint64 `json:"peak_heap_bytes"`
	Fates         int    `json:"fates"`
}

const heapObjects = "/memory/classes/heap/objects:bytes"

// timeComparison times the preview's comparison alone, n runs, after one
// untimed run, with the memory they take.
func (r *probeRun) timeComparison(n int) error {
	listed, err := eval.Inspector{Netns: r.p.ns.Path}.Ruleset()
	if err != nil {
		return err
	}
	nr, ok := r.acts.Firewall.(activities.NodeReader)
	if !ok {
		return fmt.Errorf("the probe's firewall reads no node")
	}
	node, err := nr.Node()
	if err != nil {
		return err
	}
	c := &ComparisonDetails{Runs: n}
	c.Fates = len(flip.PreviewFlipOn(listed, node, r.spec).Fates)
	runtime.GC()
	sample := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := sampleHeap(base)
	for i := 0; i < n; i++ {
		start := time.Now()
		flip.PreviewFlipOn(listed, node, r.spec)
		c.MS = append(c.MS, report.MS(time.Since(start)))
	}
	peak := stop()
	runtime.ReadMemStats(&after)
	c.AllocBytes = (after.TotalAlloc - before.TotalAlloc) / uint64(n)
	c.Allocs = (after.Mallocs - before.Mallocs) / uint64(n)
	c.PeakHeapBytes = peak - base
	c.MedianMS = report.Median(c.MS)
	r.d.Comparison = c
	return nil
}

// sampleHeap reads the heap's live objects every millisecond until stop,
// which returns the highest read (at least base).
func sampleHeap(base uint64) func() uint64 {
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sample := []metrics.Sample{{Name: heapObjects}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// comparisonRow is the comparison alone at d's size.
func comparisonRow(d *ProbeDetails) report.Row {
	c := d.Comparison
	return report.Absolute("probe", fmt.Sprintf("preview's comparison alone at %d times (flip.PreviewFlipOn of the ruleset as listed), median of %d", d.Factor, c.Runs),
		c.MedianMS, "ms", "flip.PreviewFlipOn: the regions of the header space and the ports, before and after the flip, compared",
		fmt.Sprintf("%d fates; allocates %.1f MB (%d allocations) a run; peak heap %.1f MB above the heap before (sampled every ms)",
			c.Fates, float64(c.AllocBytes)/1e6, c.Allocs, float64(c.PeakHeapBytes)/1e6), 1)
}
