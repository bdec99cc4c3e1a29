package scale

// This file holds the scale section's flips: batches sent all at once
// (each its own p50 and p99), then the nodes left a few at a time, so
// every node converges; each node's flip Update sent and awaited, and when
// each flipped node recorded phase converged.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/bench/report"
	"adoption/workflows"
)

// FlipBatch is one batch of flips and what it measured.
type FlipBatch struct {
	Size     int              `json:"size"`
	AtOnce   bool             `json:"at_once"` // every Update sent at once; else Parallel at a time
	Parallel int              `json:"parallel,omitempty"`
	MS       Stats            `json:"flip_to_converged_ms"` // Update sent until the workflow task that set phase converged completed
	P99MS    float64          `json:"flip_to_converged_p99_ms"`
	Parts    map[string]Stats `json:"flip_parts_ms"`     // where that time went (breakdown.go)
	ClosedMS Stats            `json:"flip_to_closed_ms"` // Update sent until the workflow closed (after the fleet got its last progress signal)
	Closed99 float64          `json:"flip_to_closed_p99_ms"`
	Reverted []string         `json:"reverted,omitempty"` // not confirmed in time: the node is adopted again
	Where    string           `json:"where"`
	// CPUMS is the CPU each process spent on the batch, per flip: the dev
	// server, the orchestrator, and this bench's process (the simulated
	// agents and the clients sending the flips).
	CPUMS map[string]float64 `json:"cpu_per_flip_ms"`
	// Events are the events each node's history gained from its flip
	// Update to its close (batches at once only); Floor is the floor
	// (floor.go) run on the same nodes' queues right after.
	Events Stats       `json:"events_update_to_close"`
	Floor  *FloorBatch `json:"floor,omitempty"`
	before map[string]int
	sent   map[string]time.Time
	closed []float64
}

// flipAll flips every node: o.Batches each at once, then the rest
// o.Parallel at a time. Batches take nodes spread over the fleet.
func (r *scaleRun) flipAll(ctx context.Context) ([]*FlipBatch, error) {
	order := spread(len(r.plans))
	var batches []*FlipBatch
	for _, size := range r.o.Batches {
		if len(order) == 0 {
			break
		}
		size = min(size, len(order))
		batches = append(batches, &FlipBatch{Size: size, AtOnce: true, Parallel: size})
		order = order[size:]
	}
	if len(order) > 0 {
		batches = append(batches, &FlipBatch{Size: len(order), Parallel: r.o.Parallel})
	}
	order = spread(len(r.plans))
	var errs []error
	for _, b := range batches {
		nodes := make([]string, b.Size)
		for i := range nodes {
			nodes[i] = r.plans[order[i]].Node
		}
		order = order[b.Size:]
		how := fmt.Sprintf("%d at a time", b.Parallel)
		if b.AtOnce {
			how = "all at once"
		}
		r.logf("flipping %d nodes, %s ...", b.Size, how)
		if b.AtOnce {
			var err error
			if b.before, err = r.eventsOf(ctx, nodes); err != nil {
				return batches, err
			}
		}
		t0, cpu0 := time.Now(), r.cpu()
		errs = append(errs, r.flipBatch(ctx, b, nodes))
		b.CPUMS = perFlip(cpu0, r.cpu(), b.Size)
		r.logf("%d flips done in %.1f s (%d reverted); CPU per flip: %s", len(b.closed), time.Since(t0).Seconds(), len(b.Reverted), cpuNote(b.CPUMS))
		if b.AtOnce {
			f, err := r.floorBatch(ctx, nodes, len(batches))
			if err != nil {
				return batches, err
			}
			b.Floor = f
			r.logf("the floor on the same %d node queues: %.0f events per workflow from its Update to its close, CPU per workflow: %s", f.Size, f.Events.Median, cpuNote(f.CPUMS))
		}
	}
	r.d.ConvergeAllS = time.Since(r.start).Seconds()
	return batches, errors.Join(errs...)
}

// The processes whose CPU a flip batch is charged to.
const (
	cpuServer = "dev server"
	cpuOrch   = "orchestrator"
	cpuAgents = "agents and bench"
)

// cpu is each process's utime+stime so far, in seconds.
func (r *scaleRun) cpu() map[string]float64 {
	return map[string]float64{cpuServer: procCPU(r.srv.Pid()), cpuOrch: r.orch.cpuSeconds(), cpuAgents: procCPU(os.Getpid())}
}

// perFlip is the CPU between two readings, in ms per flip of n.
func perFlip(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = math.Round((v - before[k]) * 1000 / float64(max(n, 1)))
	}
	return out
}

// cpuNote says perFlip's figures in a fixed order.
func cpuNote(ms map[string]float64) string {
	return fmt.Sprintf("%s %.0f ms, %s %.0f ms, %s %.0f ms", cpuServer, ms[cpuServer], cpuOrch, ms[cpuOrch], cpuAgents, ms[cpuAgents])
}

// spread is 0..n-1 in an order whose every prefix is spread over the
// fleet (sorted by the fractional part of i times the golden ratio), the
// control node (0) last: each batch takes nodes of every wave.
func spread(n int) []int {
	out := make([]int, 0, n)
	for i := 1; i < n; i++ {
		out = append(out, i)
	}
	frac := func(i int) float64 { _, f := math.Modf(float64(i) * 0.6180339887498949); return f }
	slices.SortFunc(out, func(a, b int) int { return cmp.Compare(frac(a), frac(b)) })
	return append(out, 0)
}

// flipBatch flips nodes, b.Parallel at a time.
func (r *scaleRun) flipBatch(ctx context.Context, b *FlipBatch, nodes []string) error {
	b.sent = map[string]time.Time{}
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, b.Parallel)
	var wg sync.WaitGroup
	for _, node := range nodes {
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
				b.Reverted = append(b.Reverted, err.Error())
			case err != nil:
				firstErr = cmp.Or(firstErr, err)
			default:
				b.closed = append(b.closed, l)
				b.sent[node] = t0
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// afterFlips waits for the fleet's end and reads, from the histories, when
// each flipped node converged and where the time went.
func (r *scaleRun) afterFlips(ctx context.Context, batches []*FlipBatch) error {
	r.d.OrchPeakRSSMiB = rssMiB(strconv.Itoa(r.orch.cmd.Process.Pid), "VmHWM")
	r.fleetEnd(ctx)
	var flipped []string
	for _, b := range batches {
		b.ClosedMS, b.Closed99 = stats(b.closed), report.Percentile(b.closed, 99)
		spans, err := flipSpans(ctx, r.c, b.sent)
		if err != nil {
			return err
		}
		var lat []float64
		for _, sp := range spans {
			lat = append(lat, report.MS(sp.total))
		}
		b.MS, b.P99MS = stats(lat), report.Percentile(lat, 99)
		b.Where, b.Parts = breakdownNote(spans)
		if b.before != nil {
			var ev []float64
			for node := range b.sent {
				n, _, err := history(ctx, r.c, workflows.WorkflowID(node))
				if err != nil {
					return err
				}
				ev = append(ev, float64(n-b.before[node]))
			}
			b.Events = stats(ev)
		}
		for node := range b.sent {
			flipped = append(flipped, node)
		}
		r.d.Flips = append(r.d.Flips, *b)
	}
	slices.Sort(flipped)
	var err error
	r.d.EventsConverged, r.d.BytesConverged, _, err = r.histories(ctx, flipped[:min(20, len(flipped))])
	return err
}

// flipSpans reads, from each flipped node's history, when the workflow
// task that set phase converged completed (its search attribute upsert is
// in that task) and where the time from the flip Update's sending to it
// went (breakdown.go).
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
// looked for by a status query every 10 s, which does not time anything
// (a query is a task for the orchestrator's workflow pollers, which the
// flips being timed wait for: one every 2 s was a query per flip).
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
		e.lat = report.MS(time.Since(t0))
		done <- e
	}()
	tick := time.NewTicker(10 * time.Second)
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

// eventsOf are the history lengths of the nodes' workflows.
func (r *scaleRun) eventsOf(ctx context.Context, nodes []string) (map[string]int, error) {
	out := make(map[string]int, len(nodes))
	for _, node := range nodes {
		n, _, err := history(ctx, r.c, workflows.WorkflowID(node))
		if err != nil {
			return nil, err
		}
		out[node] = n
	}
	return out, nil
}
