// Package wait is how a test waits: on a condition it polls, within a
// bound it names, never on the clock alone. For waits until something
// holds; Quiet watches a window in which something must not happen, and
// says how long it watched. Both fail the test naming what they waited
// for and the bound.
package wait

import (
	"testing"
	"time"
)

// Poll is how often a condition is asked again: often enough that a wait
// ends within a few percent of when its condition held, seldom enough
// that asking (a status query, a listing of the ruleset) costs little.
const Poll = 100 * time.Millisecond

// For waits until ok holds, asking every Poll (more seldom as the wait
// grows, at most every second), and fails the test naming what it waited
// for when it does not hold within the bound. It reports how long it
// waited.
func For(t testing.TB, within time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	return Until(t, within, what, func() (bool, string) { return ok(), "" })
}

// Until is For with what was seen at each ask: a failure names the last.
func Until(t testing.TB, within time.Duration, what string, ask func() (done bool, seen string)) time.Duration {
	t.Helper()
	start := time.Now()
	every := Poll
	for {
		done, seen := ask()
		if done {
			return time.Since(start)
		}
		if time.Since(start) > within {
			if seen != "" {
				seen = "; last seen: " + seen
			}
			t.Fatalf("waited %v for %s: it did not happen%s", within, what, seen)
		}
		time.Sleep(every)
		if every < time.Second {
			every += every / 4
		}
	}
}

// Quiet watches for window, asking every Poll, that happened stays false;
// it fails the test naming what happened and when. A window is only as
// good as what it polls: name the observable in what.
func Quiet(t testing.TB, window time.Duration, what string, happened func() bool) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < window {
		if happened() {
			t.Fatalf("%s, %v into a %v window in which it must not", what, time.Since(start).Round(time.Millisecond), window)
		}
		time.Sleep(Poll)
	}
}
