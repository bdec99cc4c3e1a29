// This file tests the node-local records: the flip record under its lock
// (one of two racing movers wins), the adopted and converged markers, the
// owner, the cutovers, the opened owners, the watch, and the watchdog's
// lock.

package nodestate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func dir(t *testing.T) *Dir {
	t.Helper()
	return New(filepath.Join(t.TempDir(), "state"))
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestReadingCreatesNothing(t *testing.T) {
	d := dir(t)
	if r, err := d.Flip(); r != nil || err != nil {
		t.Errorf("Flip on an empty node: %+v, %v", r, err)
	}
	if _, ok, err := d.Adopted(); ok || err != nil {
		t.Errorf("Adopted on an empty node: %v, %v", ok, err)
	}
	if c, err := d.Converged(); c || err != nil {
		t.Errorf("Converged on an empty node: %v, %v", c, err)
	}
	if _, err := os.Stat(d.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading created the state directory: %v", err)
	}
}

func TestTheFlipRecordMovesUnderItsLock(t *testing.T) {
	d := dir(t)
	err := d.UpdateFlip(func(cur *FlipRecord) (*FlipRecord, error) {
		if cur != nil {
			t.Errorf("a record before any was written: %+v", cur)
		}
		return &FlipRecord{ID: "n1-1", Node: "n1", State: FlipApplying, Deadline: time.Now().Add(time.Minute)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, d.Path()); m != 0o700 {
		t.Errorf("state_dir is %o, want 700", m)
	}
	if m := mode(t, filepath.Join(d.Path(), flipFile)); m != 0o600 {
		t.Errorf("flip record is %o, want 600", m)
	}
	r, err := d.Flip()
	if err != nil || r == nil || r.ID != "n1-1" || !r.Pending() || r.Updated.IsZero() {
		t.Fatalf("the record as written: %+v, %v", r, err)
	}
	// nil from fn, or an error, leaves the record as it is.
	if err := d.UpdateFlip(func(*FlipRecord) (*FlipRecord, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := d.UpdateFlip(func(*FlipRecord) (*FlipRecord, error) {
		return &FlipRecord{ID: "other", State: FlipReverted}, boom
	}); !errors.Is(err, boom) {
		t.Errorf("fn's error not returned: %v", err)
	}
	if r2, _ := d.Flip(); r2.ID != "n1-1" || r2.State != FlipApplying {
		t.Errorf("the record changed without a move: %+v", r2)
	}
}

func TestPendingIsApplyingOrFlipped(t *testing.T) {
	for state, want := range map[string]bool{
		FlipApplying: true, FlipFlipped: true,
		FlipConfirmed: false, FlipReverted: false, FlipNotApplied: false, FlipCommitted: false,
	} {
		if got := (&FlipRecord{State: state}).Pending(); got != want {
			t.Errorf("Pending(%s) = %v, want %v", state, got, want)
		}
	}
	if (*FlipRecord)(nil).Pending() {
		t.Error("no record is pending")
	}
}

// The watchdog and the confirming worker race to move a flipped record;
// exactly one of them sees it flipped and moves it.
func TestOneOfTwoRacingMoversWins(t *testing.T) {
	for i := range 20 {
		d := dir(t)
		if err := d.UpdateFlip(func(*FlipRecord) (*FlipRecord, error) {
			return &FlipRecord{ID: "n1-1", State: FlipFlipped}, nil
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for _, to := range []string{FlipConfirmed, FlipReverted} {
			wg.Go(func() {
				err := d.UpdateFlip(func(cur *FlipRecord) (*FlipRecord, error) {
					if cur.State != FlipFlipped {
						return nil, nil
					}
					mu.Lock()
					winners = append(winners, to)
					mu.Unlock()
					next := *cur
					next.State = to
					return &next, nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		r, _ := d.Flip()
		if len(winners) != 1 || r.State != winners[0] {
			t.Fatalf("round %d: winners %v, record %s", i, winners, r.State)
		}
	}
}

func TestACorruptRecordIsNamed(t *testing.T) {
	d := dir(t)
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Path(), flipFile)
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Flip(); err == nil || !strings.Contains(err.Error(), "flip record "+p+" is corrupt") {
		t.Errorf("a corrupt flip record: %v", err)
	}
	if err := d.UpdateFlip(func(*FlipRecord) (*FlipRecord, error) {
		t.Error("fn ran on a corrupt record")
		return nil, nil
	}); err == nil {
		t.Error("UpdateFlip on a corrupt record succeeded")
	}
}

func TestAdoptedKeepsTheFirstAndConvergedReplacesIt(t *testing.T) {
	d := dir(t)
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := d.MarkAdopted(Marker{Node: "n1", AdoptedAt: first, Workflow: "adopt/n1"}); err != nil {
		t.Fatal(err)
	}
	if err := d.MarkAdopted(Marker{Node: "n1", AdoptedAt: first.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	m, ok, err := d.Adopted()
	if err != nil || !ok || !m.AdoptedAt.Equal(first) || m.Workflow != "adopt/n1" {
		t.Errorf("the marker after a second MarkAdopted: %+v %v %v", m, ok, err)
	}
	err = d.MarkAdopted(Marker{Node: "n2"})
	if err == nil || !strings.Contains(err.Error(), `already adopted by node "n1", not "n2"`) {
		t.Errorf("another node's marker: %v", err)
	}
	if err := d.MarkConverged("n1", first); err != nil {
		t.Fatal(err)
	}
	if c, err := d.Converged(); !c || err != nil {
		t.Errorf("Converged after MarkConverged: %v %v", c, err)
	}
	if _, ok, _ := d.Adopted(); ok {
		t.Error("the adopted marker outlived MarkConverged")
	}
	if err := d.ClearAdopted(); err != nil {
		t.Errorf("clearing an absent marker: %v", err)
	}
}

func TestTheFirstOwnerDecidesUntilCleared(t *testing.T) {
	d := dir(t)
	a, b := Owner{Namespace: "default", Workflow: "adopt/n1"}, Owner{Namespace: "default", Workflow: "other"}
	if got, err := d.SetOwner(a); err != nil || got != a {
		t.Fatalf("SetOwner: %+v %v", got, err)
	}
	if got, err := d.SetOwner(b); err != nil || got != a {
		t.Errorf("a second SetOwner: %+v %v, want the first kept", got, err)
	}
	if err := d.ClearOwner(); err != nil {
		t.Fatal(err)
	}
	if err := d.ClearOwner(); err != nil {
		t.Errorf("clearing twice: %v", err)
	}
	if got, err := d.SetOwner(b); err != nil || got != b {
		t.Errorf("SetOwner after a release: %+v %v", got, err)
	}
	if filepath.Dir(d.OwnerFile()) != d.Path() {
		t.Errorf("OwnerFile %s is not under %s", d.OwnerFile(), d.Path())
	}
}

func TestCutoversOpenedAndWatchRecords(t *testing.T) {
	d := dir(t)
	if err := d.UpdateCutover("web", func(cur *CutoverRecord) (*CutoverRecord, error) {
		if cur != nil {
			t.Errorf("a cutover record before any: %+v", cur)
		}
		return &CutoverRecord{State: CutoverMigrating, Files: map[string]string{"/etc/x": "abc"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := d.UpdateCutover("web", func(cur *CutoverRecord) (*CutoverRecord, error) {
		next := *cur
		next.State = CutoverConfirmed
		return &next, nil
	}); err != nil {
		t.Fatal(err)
	}
	all, err := d.Cutovers()
	if err != nil || len(all) != 1 || all["web"].Module != "web" || all["web"].State != CutoverConfirmed || all["web"].Files["/etc/x"] != "abc" {
		t.Errorf("cutovers: %+v %v", all, err)
	}

	for _, o := range []string{"web", "mail", "web"} {
		if err := d.RecordOpened(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.ForgetOpened("mail"); err != nil {
		t.Fatal(err)
	}
	if op, err := d.Opened(); err != nil || len(op) != 1 || op["web"].IsZero() {
		t.Errorf("opened after forgetting mail: %v %v", op, err)
	}
	if err := d.ForgetOpened(""); err != nil {
		t.Fatal(err)
	}
	if op, _ := d.Opened(); len(op) != 0 {
		t.Errorf("opened after forgetting all: %v", op)
	}

	w, _ := json.Marshal(map[string]string{"node": "n1"})
	if err := d.SetWatch(w); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := d.Watch(); !ok || err != nil || string(b) != string(w) {
		t.Errorf("watch record: %s %v %v", b, ok, err)
	}
	if err := d.ClearWatch(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.Watch(); ok {
		t.Error("the watch record outlived ClearWatch")
	}
}

func TestOneWatchdogHoldsTheLock(t *testing.T) {
	d := dir(t)
	release, ok, err := d.LockWatchdog()
	if err != nil || !ok {
		t.Fatalf("the first LockWatchdog: %v %v", ok, err)
	}
	if _, ok, err := d.LockWatchdog(); ok || err != nil {
		t.Errorf("a second watchdog took the lock: %v %v", ok, err)
	}
	release()
	release2, ok, err := d.LockWatchdog()
	if err != nil || !ok {
		t.Fatalf("LockWatchdog after the release: %v %v", ok, err)
	}
	release2()
}
