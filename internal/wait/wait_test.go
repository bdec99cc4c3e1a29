package wait

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the
// test, so the helpers' failures can be checked.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = format
	panic(r)
}

func catch(r *recorder, f func()) (failed bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != r {
				panic(p)
			}
			failed = true
		}
	}()
	f()
	return false
}

// For returns once its condition holds and fails, naming what it waited
// for, when it never does.
func TestFor(t *testing.T) {
	var n atomic.Int32
	if d := For(t, 5*time.Second, "three asks", func() bool { return n.Add(1) >= 3 }); d <= 0 || n.Load() != 3 {
		t.Fatalf("waited %v over %d asks, want 3", d, n.Load())
	}
	r := &recorder{TB: t}
	if !catch(r, func() { For(r, 300*time.Millisecond, "never", func() bool { return false }) }) || !strings.Contains(r.msg, "waited") {
		t.Fatalf("a condition that never holds: failed %q", r.msg)
	}
}

// Quiet fails as soon as what must not happen happens, and not before.
func TestQuiet(t *testing.T) {
	Quiet(t, 300*time.Millisecond, "nothing", func() bool { return false })
	r := &recorder{TB: t}
	start := time.Now()
	if !catch(r, func() {
		Quiet(r, time.Hour, "it happened", func() bool { return time.Since(start) > 200*time.Millisecond })
	}) {
		t.Fatal("a window in which it happened passed")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("Quiet failed %v after it happened, want at once", time.Since(start))
	}
}
