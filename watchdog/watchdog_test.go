package watchdog

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"adoption/firewall/flip"
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
	// The confirmation comes once the watchdog watches the pending flip:
	// it has read the record and asks the time against the deadline.
	watching := make(chan struct{})
	var once sync.Once
	go func() {
		<-watching
		_ = dir.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
			cur.State = nodestate.FlipConfirmed
			return cur, nil
		})
	}()
	var log bytes.Buffer
	err := Run(context.Background(), Options{Records: dir, Log: &log, Poll: 5 * time.Millisecond,
		Now:    func() time.Time { once.Do(func() { close(watching) }); return time.Now() },
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

// A revert that fails is tried again, loudly, until it succeeds: the
// watchdog never gives up on an unconfirmed flip.
func TestRetriesFailedRevertUntilItSucceeds(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", Node: "n1", State: nodestate.FlipApplying, Deadline: time.Now().Add(-time.Second)}, nil
	}))
	attempts := 0
	var log bytes.Buffer
	err := Run(context.Background(), Options{Records: dir, Log: &log, Poll: time.Millisecond, RetryMax: 4 * time.Millisecond,
		Revert: func(*nodestate.FlipRecord) error {
			attempts++
			if attempts < 3 {
				return errors.New("netlink: no buffer space available")
			}
			return nil
		}})
	must(t, err)
	rec, _ := dir.Flip()
	if attempts != 3 || rec.State != nodestate.FlipReverted {
		t.Fatalf("attempts %d, record %+v", attempts, rec)
	}
	if n := strings.Count(log.String(), "REVERT OF FLIP f1 FAILED"); n != 2 {
		t.Fatalf("want two loud failures in the log, got %d:\n%s", n, log.String())
	}
}

// One watchdog per node: a second one started beside it (a re-arm while
// the first still runs) leaves at once, and Rearm starts one only for a
// pending flip.
func TestOneWatchdogPerNodeAndRearm(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	release, ok, err := dir.LockWatchdog()
	if err != nil || !ok {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", State: nodestate.FlipFlipped, Deadline: time.Now().Add(-time.Second)}, nil
	}))
	var log bytes.Buffer
	must(t, Run(context.Background(), Options{Records: dir, Log: &log, Exclusive: Exclusive(dir),
		Revert: func(*nodestate.FlipRecord) error { t.Error("a second watchdog reverted"); return nil }}))
	if !strings.Contains(log.String(), "another watchdog already watches") {
		t.Fatalf("log: %s", log.String())
	}
	release()
	started := 0
	must(t, Rearm(dir, func() error { started++; return nil }, &log))
	must(t, dir.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		cur.State = nodestate.FlipConfirmed
		return cur, nil
	}))
	must(t, Rearm(dir, func() error { started++; return nil }, &log))
	if started != 1 {
		t.Fatalf("re-armed %d times; want once, for the pending flip only", started)
	}
}

type fakeTable struct{ present bool }

func (f *fakeTable) Reassert(flip.MeshSpec) (bool, error) {
	if f.present {
		return false, nil
	}
	f.present = true
	return true, nil
}

// The guard acts only on a converged node with a committed flip, and puts
// a removed table back, saying so.
func TestGuardReassertsOnlyWhenConverged(t *testing.T) {
	dir := nodestate.New(t.TempDir())
	tbl := &fakeTable{}
	var log bytes.Buffer
	o := GuardOptions{Records: dir, Converged: dir.Converged, Table: tbl, Log: &log}
	must(t, dir.UpdateFlip(func(*nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		return &nodestate.FlipRecord{ID: "f1", State: nodestate.FlipConfirmed, Mesh: []byte(`{"node":"n1"}`)}, nil
	}))
	if did, err := GuardOnce(o); did || err != nil {
		t.Fatalf("before converged: %v %v", did, err)
	}
	must(t, dir.UpdateFlip(func(cur *nodestate.FlipRecord) (*nodestate.FlipRecord, error) {
		cur.State = nodestate.FlipCommitted
		return cur, nil
	}))
	must(t, dir.MarkConverged("n1", time.Now()))
	if did, err := GuardOnce(o); !did || err != nil || !strings.Contains(log.String(), "reasserted it from committed flip f1") {
		t.Fatalf("converged, table gone: %v %v %s", did, err, log.String())
	}
	if did, err := GuardOnce(o); did || err != nil {
		t.Fatalf("converged, table present: %v %v", did, err)
	}
}

// Under systemd the watchdog gets a transient scope of its own (so a stop
// of the agent's unit, which kills its control group, spares it); without
// systemd it runs as is, in its own session.
func TestDetachedCommand(t *testing.T) {
	c := Command{Path: "/usr/bin/adopt-worker", Args: []string{"watchdog", "--config", "/etc/adopt.yaml"}}
	name, args := detached(c, "")
	if name != c.Path || strings.Join(args, " ") != "watchdog --config /etc/adopt.yaml" {
		t.Fatalf("without systemd: %s %v", name, args)
	}
	name, args = detached(c, "/usr/bin/systemd-run")
	if want := "--scope --quiet --collect --description=adoption flip watchdog -- /usr/bin/adopt-worker watchdog --config /etc/adopt.yaml"; name != "/usr/bin/systemd-run" || strings.Join(args, " ") != want {
		t.Fatalf("with systemd: %s %v", name, args)
	}
}
