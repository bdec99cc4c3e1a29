//go:build failpoints

package failpoint

import (
	"testing"
	"time"
)

func TestHit(t *testing.T) {
	var code int
	s := FromEnv("probe, flip-before-apply=sleep:20ms")
	s.exit = func(c int) { code = c }
	s.Hit("adopt")
	if code != 0 {
		t.Fatal("an unarmed failpoint fired")
	}
	start := time.Now()
	s.Hit("flip-before-apply")
	if code != 0 || time.Since(start) < 20*time.Millisecond {
		t.Fatal("a sleep failpoint did not sleep, or exited")
	}
	s.Hit("probe")
	if code != 42 {
		t.Fatalf("armed failpoint exit code %d, want 42", code)
	}
	var zero Set
	zero.Hit("probe") // the zero value is inert
}

func TestFail(t *testing.T) {
	s := FromEnv("watchdog-revert=fail:2")
	for i, want := range []bool{true, true, false} {
		if got := s.Fail("watchdog-revert") != nil; got != want {
			t.Fatalf("call %d: failed %v, want %v", i, got, want)
		}
	}
	if s.Fail("other") != nil {
		t.Fatal("an unarmed failpoint failed")
	}
	var zero Set
	if zero.Fail("watchdog-revert") != nil {
		t.Fatal("the zero value failed")
	}
}
