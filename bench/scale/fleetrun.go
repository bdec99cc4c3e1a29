package scale

// This file holds the simulation's fleet: started in waves, each node
// migrating its module as the operator asks it (`adopt fleet migrate`,
// sent by the bench whenever every node the fleet has started is
// adopted), until every node is done; and how the fleet ended.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"adoption/config"
	"adoption/workflows"
	"adoption/workflows/fleet"
)

// simModule is the module each simulated node declares and migrates: a
// container publishing one port, whose cutover (the fake engine's) opens
// that port, so reconcile has marks to keep.
var simModule = config.ModulePlan{Name: "web", Ports: []config.Port{{Num: 8080, Proto: "tcp"}},
	Container: &config.Container{Name: "web", Image: "registry.local/web:2", Ports: map[string]string{"8080/tcp": "8080/tcp"}}}

// fleetName is the simulated fleet's name.
const fleetName = "bench"

// resolveWaves resolves o's waves for a fleet of nodes, as the CLI does
// from the fleet file (config.ResolveWaves): nil without waves.
func resolveWaves(o Options, nodes int) (*config.Waves, []int, error) {
	var waves []any
	for _, w := range strings.Split(o.Waves, ",") {
		if w = strings.TrimSpace(w); w != "" {
			waves = append(waves, w)
		}
	}
	var maxFailed any
	if o.MaxFailed != "" {
		maxFailed = o.MaxFailed
	}
	w, problems := config.ResolveWaves(waves, maxFailed, nodes-1)
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("-scale-waves %q, -scale-max-failed %q: %s", o.Waves, o.MaxFailed, strings.Join(problems, "; "))
	}
	if w == nil {
		return nil, nil, nil
	}
	return w, append([]int{1}, w.Sizes...), nil
}

// migrateAll starts the fleet and plays its operator until every node is
// adopted with its module migrated, then reads the histories of sampleN
// nodes spread over the fleet.
func (r *scaleRun) migrateAll(ctx context.Context, sampleN int) error {
	r.logf("starting one Fleet of %d nodes in waves %v, each with module %s (a container) ...", r.o.Nodes, r.d.WaveSizes, simModule.Name)
	r.start = time.Now()
	in := fleet.FleetInput{Name: fleetName, Waves: r.waves}
	names := make([]string, len(r.plans))
	for i, p := range r.plans {
		in.Members = append(in.Members, fleet.FleetMember{Node: p.Node, Role: p.Role})
		names[i] = p.Node
	}
	if _, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fleet.FleetID(fleetName), TaskQueue: workflows.TaskQueue}, fleet.FleetWorkflow, in); err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	r.d.StartFleetS = time.Since(r.start).Seconds()
	if err := r.operate(ctx, names); err != nil {
		return err
	}
	r.d.MigrateAllS = time.Since(r.start).Seconds()
	r.logf("all %d nodes migrated after %.1f s (%d fleet migrate requests)", r.o.Nodes, r.d.MigrateAllS, r.d.MigrateOps)
	r.d.HistorySample = sampleN
	ids := make([]string, sampleN)
	for i := range ids {
		ids[i] = r.plans[i*r.o.Nodes/sampleN].Node
	}
	var err error
	r.d.EventsMigrated, r.d.BytesMigrated, _, err = r.histories(ctx, ids)
	return err
}

// operate reads the fleet every second; whenever no fleet op is under way,
// every node the fleet started is adopted and some has its module still
// to migrate, it sends `adopt fleet migrate` for every node (the fleet
// picks the started ones; a migrated node answers at once). It returns
// once every node is done, and fails on a node that ended or a halted op.
func (r *scaleRun) operate(ctx context.Context, names []string) error {
	waveDone := map[int]bool{}
	for {
		st, err := r.fleetState(ctx)
		if err != nil {
			return err
		}
		started, adopted, done := 0, 0, 0
		doneIn, sizeOf := map[int]int{}, map[int]int{}
		for i, n := range st.Nodes {
			k := st.WaveOf(i)
			sizeOf[k]++
			if n.Ended != "" {
				return fmt.Errorf("node %s ended before every node migrated: %s", n.Node, n.Ended)
			}
			if !n.Started {
				continue
			}
			started++
			if n.Phase == workflows.PhaseAdopted {
				adopted++
			}
			if n.Done {
				done++
				doneIn[k]++
			}
		}
		for k := 0; k < len(sizeOf); k++ {
			if !waveDone[k] && doneIn[k] == sizeOf[k] {
				waveDone[k] = true
				r.d.WavesMigratedS = append(r.d.WavesMigratedS, time.Since(r.start).Seconds())
				r.logf("wave %d (%d nodes) migrated after %.1f s", k, sizeOf[k], time.Since(r.start).Seconds())
			}
		}
		if done == len(names) {
			return nil
		}
		op := st.Op
		if op != nil && op.Halted != "" {
			return fmt.Errorf("the fleet's migrate halted: %s", op.Halted)
		}
		if (op == nil || op.Done) && started > done && adopted == started {
			if err := r.askMigrate(ctx, names); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d nodes migrated within -scale-timeout %s", done, len(names), r.o.Timeout)
		}
		time.Sleep(time.Second)
	}
}

// askMigrate is `adopt fleet migrate web` for names, awaited until the
// fleet took it.
func (r *scaleRun) askMigrate(ctx context.Context, names []string) error {
	h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: fleet.FleetID(fleetName), UpdateName: fleet.UpdateFleetMigrate,
		Args: []any{fleet.FleetRequest{Module: simModule.Name, Nodes: names}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		var ans fleet.FleetAnswer
		err = h.Get(ctx, &ans)
	}
	if err != nil {
		return fmt.Errorf("fleet migrate %s: %w", simModule.Name, err)
	}
	r.d.MigrateOps++
	return nil
}

// fleetState queries the fleet, asking again while the server is
// overloaded.
func (r *scaleRun) fleetState(ctx context.Context) (fleet.FleetState, error) {
	for {
		var st fleet.FleetState
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := r.c.QueryWorkflow(qctx, fleet.FleetID(fleetName), "", fleet.QueryFleet)
		if err == nil {
			err = v.Get(&st)
		}
		cancel()
		if err == nil {
			return st, nil
		}
		// A fleet whose workflow task failed (the server retries the
		// task) answers no query until a task completes: ask again, and
		// count it.
		failedTask := strings.Contains(err.Error(), "Workflow Task in failed state")
		if !isTransient(err) && !failedTask || ctx.Err() != nil {
			return st, fmt.Errorf("query the fleet: %w", err)
		}
		if failedTask {
			r.d.QueryFailedTask++
		}
		r.d.QueryRetries++
		time.Sleep(time.Second)
	}
}

// fleetEnd waits (bounded) for the fleet, which ends once its last node
// has, and says how it ended, or why it could not be read.
func (r *scaleRun) fleetEnd(ctx context.Context) {
	var fst fleet.FleetState
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := r.c.GetWorkflow(wctx, fleet.FleetID(fleetName), "").Get(wctx, &fst); err != nil {
		r.d.FleetEnd = "not ended within 2 min of the last flip: " + err.Error()
		if v, qerr := r.c.QueryWorkflow(ctx, fleet.FleetID(fleetName), "", fleet.QueryFleet); qerr == nil {
			_ = v.Get(&fst)
		} else {
			r.d.FleetEnd += "; query: " + qerr.Error()
		}
	} else {
		r.d.FleetEnd = "completed"
	}
	r.d.FleetRuns = fst.Runs
	if ev, _, err := history(ctx, r.c, fleet.FleetID(fleetName)); err == nil {
		r.d.FleetEvents = ev
	}
	r.logf("the fleet %s after %d continue-as-new (%d events in its last run)", r.d.FleetEnd, r.d.FleetRuns, r.d.FleetEvents)
}
