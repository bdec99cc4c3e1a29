package watchdog

import (
	"bytes"
	"context"
	"testing"
	"time"

	"adoption/nodestate"
)

func TestRevertsUnconfirmedFlipAtDeadline(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	start := time.Now()
	now := start
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", Node: "n1", State: nodestate.FlipFlipped, Deadline: start.Add(time.Minute)}, nil
	}))
	reverted := 0
	var log bytes.Buffer
	err := Run(context.Background(), Options{Records: dir, Log: &log, Poll: time.Millisecond,
		Now:    func() time.Time { now = now.Add(10 * time.Second); return now },
		Revert: func(*nodestate.FlipRecord) error { reverted++; return nil }})
	must(t, err)
	rec, _ := dir.Flip()
	if reverted != 1 || rec.State != nodestate.FlipReverted || rec.Reason == "" {
		t.Fatalf("reverted %d times, record %+v", reverted, rec)
	}
	if now.Before(start.Add(time.Minute)) {
		t.Fatal("reverted before the deadline")
	}
}

func TestStandsDownWhenConfirmed(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	deadline := time.Now().Add(time.Hour)
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", State: nodestate.FlipFlipped, Deadline: deadline}, nil
	}))
	go func() {
		time.Sleep(20 * time.Millisecond)
		_ = dir.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
			cur.State = nodestate.FlipConfirmed
			return cur, nil
		})
	}()
	var log bytes.Buffer
	err := Run(context.Background(), Options{Records: dir, Log: &log, Poll: 5 * time.Millisecond,
		Revert: func(*nodestate.FlipRecord) error { t.Error("reverted a confirmed flip"); return nil }})
	must(t, err)
	if rec, _ := dir.Flip(); rec.State != nodestate.FlipConfirmed {
		t.Fatalf("state %s", rec.State)
	}
}

// The confirmation and the deadline race: whoever takes the lock first
// wins, and the other sees it.
func TestConfirmedUnderLockIsNotReverted(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	past := time.Now().Add(-time.Second)
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", State: nodestate.FlipConfirmed, Deadline: past}, nil
	}))
	err := revert(Options{Records: dir, Log: &bytes.Buffer{}, Revert: func(*nodestate.FlipRecord) error {
		t.Error("reverted a flip confirmed under the lock")
		return nil
	}}, "f1")
	must(t, err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
