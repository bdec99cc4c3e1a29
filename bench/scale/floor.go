package scale

// This file holds the floor a flip is measured against: the smallest
// workflow that does a flip's work on Temporal, run on the same server, the
// same node queues and the same batch sizes in the same run. A floor
// workflow waits for an Update, runs one activity on the node's queue that
// heartbeats once (the node applies and confirms), then one on the
// orchestrator's side (the witness), and closes in the task that hears it.
// Whatever a flip costs above it (events, the server's CPU) is the
// product's own shape, not Temporal's.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"adoption/workflows"
)

const (
	floorQueue    = "adoption-bench-floor"
	floorWorkflow = "FlipFloor"
	floorNodeAct  = "FlipFloorNode"
	floorOrchAct  = "FlipFloorOrchestrator"
)

// FloorBatch is one batch of floor workflows, the size of a flip batch.
type FloorBatch struct {
	Size int `json:"size"`
	// Events are the events each floor workflow's history gained from its
	// Update to its close.
	Events Stats `json:"events_update_to_close"`
	// CPUMS is each process's CPU per floor workflow, from the Updates'
	// sending until every one closed.
	CPUMS map[string]float64 `json:"cpu_per_floor_ms"`
	MS    Stats              `json:"update_to_closed_ms"`
}

// flipFloor is the floor workflow: an Update, the node's activity, the
// orchestrator's, done.
func flipFloor(ctx workflow.Context, node string) error {
	asked := false
	if err := workflow.SetUpdateHandler(ctx, workflows.UpdateFlip, func(workflow.Context) error { asked = true; return nil }); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return asked }); err != nil {
		return err
	}
	nctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: workflows.NodeQueue(node),
		StartToCloseTimeout: time.Minute, HeartbeatTimeout: time.Minute})
	if err := workflow.ExecuteActivity(nctx, floorNodeAct).Get(ctx, nil); err != nil {
		return err
	}
	octx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: floorQueue, StartToCloseTimeout: time.Minute})
	return workflow.ExecuteActivity(octx, floorOrchAct).Get(ctx, nil)
}

// flipFloorNode is the node's part: one heartbeat, as a flip's apply
// reports before its confirm.
func flipFloorNode(ctx context.Context) error {
	activity.RecordHeartbeat(ctx, "applied")
	return nil
}

// flipFloorOrchestrator is the orchestrator's part.
func flipFloorOrchestrator(context.Context) error { return nil }

// registerFloorNode adds the floor's node activity to a node worker.
func registerFloorNode(w worker.Worker) {
	w.RegisterActivityWithOptions(flipFloorNode, activity.RegisterOptions{Name: floorNodeAct})
}

// startFloorWorker serves the floor workflow and its orchestrator-side
// activity from this process.
func (r *scaleRun) startFloorWorker() error {
	w := worker.New(r.c, floorQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(flipFloor, workflow.RegisterOptions{Name: floorWorkflow})
	w.RegisterActivityWithOptions(flipFloorOrchestrator, activity.RegisterOptions{Name: floorOrchAct})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the floor's worker: %w", err)
	}
	r.onClose(w.Stop)
	return nil
}

// floorBatch runs one floor workflow per node, every Update at once, as
// the flip batch of those nodes did: the workflows are started and past
// their first task before the window opens, as a node's workflow is
// running before its flip.
func (r *scaleRun) floorBatch(ctx context.Context, nodes []string, run int) (*FloorBatch, error) {
	ids := make([]string, len(nodes))
	ready := make([]int, len(nodes))
	for i, node := range nodes {
		ids[i] = fmt.Sprintf("bench-floor/%d/%s", run, node)
		if _, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: floorQueue}, floorWorkflow, node); err != nil {
			return nil, fmt.Errorf("start floor workflow %s: %w", ids[i], err)
		}
	}
	for i, id := range ids {
		n, err := r.waitFirstTask(ctx, id)
		if err != nil {
			return nil, err
		}
		ready[i] = n
	}
	b := &FloorBatch{Size: len(nodes)}
	lat := make([]float64, len(ids))
	errs := make([]error, len(ids))
	cpu0 := r.cpu()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.UpdateFlip,
				WaitForStage: client.WorkflowUpdateStageCompleted})
			if err == nil {
				err = h.Get(ctx, nil)
			}
			if err == nil {
				err = r.c.GetWorkflow(ctx, id, "").Get(ctx, nil)
			}
			lat[i], errs[i] = float64(time.Since(t0).Microseconds())/1000, err
		}()
	}
	wg.Wait()
	b.CPUMS = perFlip(cpu0, r.cpu(), len(ids))
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("floor workflow %s: %w", ids[i], err)
		}
	}
	events := make([]float64, len(ids))
	for i, id := range ids {
		n, _, err := history(ctx, r.c, id)
		if err != nil {
			return nil, err
		}
		events[i] = float64(n - ready[i])
	}
	b.Events, b.MS = stats(events), stats(lat)
	return b, nil
}

// waitFirstTask waits until a started workflow's first workflow task has
// completed (it then waits for its Update) and says its history's length.
func (r *scaleRun) waitFirstTask(ctx context.Context, id string) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		n, _, err := history(ctx, r.c, id)
		if err != nil {
			return 0, err
		}
		if n >= 4 { // started, task scheduled, started, completed
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("floor workflow %s: its first task did not complete within a minute (%d events)", id, n)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
