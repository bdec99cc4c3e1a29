// Unit tests of the check's decision, with a fake lister and replayer.
package replaycheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeLister struct {
	runs []Run
	err  error
}

func (f fakeLister) OpenRuns(context.Context) ([]Run, error) { return f.runs, f.err }

// fakeReplayer answers by workflow ID and records the most replays at once.
type fakeReplayer struct {
	answers      map[string]error
	now, highest atomic.Int32
	mu           sync.Mutex
	seen         []string
	// two is closed once two replays have run at once (overlapped).
	twoOnce sync.Once
	two     chan struct{}
}

// overlapWait bounds how long a replay waits for a second beside it: a
// Check that replays one at a time shows as one at once, not as a hang.
const overlapWait = 5 * time.Second

// overlapped is closed once two replays have run at once.
func (f *fakeReplayer) overlapped() chan struct{} {
	f.twoOnce.Do(func() { f.two = make(chan struct{}) })
	return f.two
}

func (f *fakeReplayer) Replay(_ context.Context, r Run) error {
	n := f.now.Add(1)
	defer f.now.Add(-1)
	for {
		h := f.highest.Load()
		if n <= h || f.highest.CompareAndSwap(h, n) {
			break
		}
	}
	// Each replay lasts until a second has run beside it, so that a Check
	// that runs them side by side shows it, whatever the machine's load.
	two := f.overlapped()
	if n >= 2 {
		f.mu.Lock()
		select {
		case <-two:
		default:
			close(two)
		}
		f.mu.Unlock()
	}
	select {
	case <-two:
	case <-time.After(overlapWait):
	}
	f.mu.Lock()
	f.seen = append(f.seen, r.WorkflowID)
	f.mu.Unlock()
	return f.answers[r.WorkflowID]
}

func runs(ids ...string) []Run {
	var out []Run
	for _, id := range ids {
		out = append(out, Run{WorkflowID: id, RunID: "r-" + id, Type: "NodeMigration"})
	}
	return out
}

// Every open run replays: the report says so and allows the promotion.
func TestAllReplayPromotes(t *testing.T) {
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprintf("node-migration/n%d", i))
	}
	rp := &fakeReplayer{}
	rep, err := Check(context.Background(), fakeLister{runs: runs(ids...)}, rp, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Open != 10 || rep.Replayed != 10 || rep.Skipped != 0 || len(rep.Failures) != 0 || rep.Err() != nil {
		t.Fatalf("report %+v, err %v: want 10 open, 10 replayed", rep, rep.Err())
	}
	if len(rp.seen) != 10 {
		t.Fatalf("replayed %v, want all 10", rp.seen)
	}
	if h := rp.highest.Load(); h > 3 || h < 2 {
		t.Fatalf("%d replays at once, want at most the limit 3 (and more than one)", h)
	}
	if rep.Took <= 0 {
		t.Fatalf("took %v", rep.Took)
	}
}

// A run that does not replay blocks the promotion and is named with its
// error; one closed meanwhile is skipped, not a failure.
func TestFailureBlocksClosedSkipped(t *testing.T) {
	bad := errors.New("nondeterministic workflow: history event is ActivityTaskScheduled, replay command is StartTimer")
	rp := &fakeReplayer{answers: map[string]error{
		"node-migration/b": bad,
		"node-migration/c": fmt.Errorf("%w: workflow not found", ErrClosed),
		"fleet/f":          ErrClosed,
	}}
	rep, err := Check(context.Background(), fakeLister{runs: runs("node-migration/a", "node-migration/b", "node-migration/c", "fleet/f")}, rp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Open != 4 || rep.Replayed != 1 || rep.Skipped != 2 || len(rep.Failures) != 1 {
		t.Fatalf("report %+v: want 4 open, 1 replayed, 2 skipped, 1 failure", rep)
	}
	if f := rep.Failures[0]; f.Run.WorkflowID != "node-migration/b" || !errors.Is(f.Err, bad) {
		t.Fatalf("failure %+v, want node-migration/b with its replay error", f)
	}
	e := rep.Err()
	if e == nil || !strings.Contains(e.Error(), "node-migration/b") || !strings.Contains(e.Error(), "1 of 4") {
		t.Fatalf("Err() = %v, want one naming node-migration/b, 1 of 4", e)
	}
}

// Closed runs only: nothing to fail, the promotion goes ahead.
func TestAllClosedPromotes(t *testing.T) {
	rp := &fakeReplayer{answers: map[string]error{"a": ErrClosed, "b": ErrClosed}}
	rep, err := Check(context.Background(), fakeLister{runs: runs("a", "b")}, rp, 4)
	if err != nil || rep.Err() != nil || rep.Skipped != 2 || rep.Replayed != 0 {
		t.Fatalf("report %+v, %v, %v: want 2 skipped, no error", rep, err, rep.Err())
	}
}

// A listing that fails is no check: an error, not an empty pass.
func TestListingFailureIsAnError(t *testing.T) {
	rp := &fakeReplayer{}
	_, err := Check(context.Background(), fakeLister{err: errors.New("visibility unavailable")}, rp, 4)
	if err == nil || !strings.Contains(err.Error(), "visibility unavailable") {
		t.Fatalf("err %v, want the listing's error", err)
	}
	if len(rp.seen) != 0 {
		t.Fatalf("replayed %v after a failed listing", rp.seen)
	}
}

// Many failures: the error names the first few and says there are more.
func TestManyFailuresNamed(t *testing.T) {
	ans := map[string]error{}
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("w%d", i)
		ids = append(ids, id)
		ans[id] = errors.New("nondeterministic")
	}
	rep, err := Check(context.Background(), fakeLister{runs: runs(ids...)}, &fakeReplayer{answers: ans}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.Err(); e == nil || !strings.HasPrefix(e.Error(), "5 of 5 ") || !strings.Contains(e.Error(), ", ...)") {
		t.Fatalf("Err() = %v", e)
	}
}
