// Package replaycheck replays, before a build becomes the Worker
// Deployment's current version, the history of every open workflow that
// would move to it (all are AutoUpgrade: workflows.Register), against that
// build's own workflow code. A history that does not replay would fail its
// workflow tasks in production at the first task after the switch; the
// orchestrator refuses to promote instead (docs/fleet.md, "How an upgrade
// rolls out").
package replaycheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Run is one open workflow run an upgrade would move.
type Run struct{ WorkflowID, RunID, Type string }

// Lister lists the open runs that would move.
type Lister interface {
	OpenRuns(ctx context.Context) ([]Run, error)
}

// Replayer replays one run's history against the new build's code. It
// returns ErrClosed when the run closed (or vanished) since it was listed:
// a closed run does not move.
type Replayer interface {
	Replay(ctx context.Context, r Run) error
}

// ErrClosed says a listed run closed meanwhile.
var ErrClosed = errors.New("closed since it was listed")

// Failure is a run whose history does not replay, and why.
type Failure struct {
	Run Run
	Err error
}

// Report is what a check found.
type Report struct {
	Open     int // runs listed
	Replayed int // replayed without error (or no task ran yet: nothing to replay)
	Skipped  int // closed meanwhile
	Failures []Failure
	Took     time.Duration
}

// Err is nil when every open run replayed, else an error naming how many
// did not (the caller logs Failures one by one).
func (r Report) Err() error {
	if len(r.Failures) == 0 {
		return nil
	}
	ids := make([]string, 0, 3)
	for _, f := range r.Failures[:min(3, len(r.Failures))] {
		ids = append(ids, f.Run.WorkflowID)
	}
	more := ""
	if len(r.Failures) > 3 {
		more = ", ..."
	}
	return fmt.Errorf("%d of %d open workflows do not replay on this build (%s%s)", len(r.Failures), r.Open, strings.Join(ids, ", "), more)
}

// Check lists the open runs and replays each, at most limit at once. Its
// error is for a check that could not be made (the listing failed, ctx
// ended); histories that do not replay are in the report's Failures.
func Check(ctx context.Context, l Lister, rp Replayer, limit int) (Report, error) {
	start := time.Now()
	runs, err := l.OpenRuns(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("list the open workflows an upgrade would move: %w", err)
	}
	rep := Report{Open: len(runs)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, limit))
	for _, r := range runs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return rep, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := rp.Replay(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				rep.Replayed++
			case errors.Is(err, ErrClosed):
				rep.Skipped++
			default:
				rep.Failures = append(rep.Failures, Failure{Run: r, Err: err})
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	rep.Took = time.Since(start)
	return rep, nil
}
