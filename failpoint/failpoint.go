// Package failpoint lets tests kill the worker at a named step, to prove that
// an interrupted step resumes or rolls back. It is inert unless the worker is
// started with ADOPT_FAILPOINTS set; operators never set it.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvVar names the steps, comma-separated, at which the worker exits
// ("probe"), or pauses ("flip-before-apply=sleep:3s") so a test can change
// the node in between, or fails the first N times ("watchdog-revert=fail:1",
// for steps that ask Fail).
const EnvVar = "ADOPT_FAILPOINTS"

// Set is the set of armed failpoints. The zero value is inert.
type Set struct {
	armed map[string]time.Duration // 0: exit; >0: sleep that long
	fails map[string]*int          // failures left, for Fail
	exit  func(code int)
}

// FromEnv arms the failpoints named in value (usually os.Getenv(EnvVar)).
func FromEnv(value string) Set {
	s := Set{armed: map[string]time.Duration{}, fails: map[string]*int{}, exit: os.Exit}
	for _, item := range strings.Split(value, ",") {
		name, action, _ := strings.Cut(strings.TrimSpace(item), "=")
		if name == "" {
			continue
		}
		var d time.Duration
		if after, ok := strings.CutPrefix(action, "fail:"); ok {
			n, err := strconv.Atoi(after)
			if err != nil || n < 1 {
				n = 1
			}
			s.fails[name] = &n
			continue
		}
		if after, ok := strings.CutPrefix(action, "sleep:"); ok {
			d, _ = time.ParseDuration(after)
		}
		s.armed[name] = d
	}
	return s
}

// Hit exits the process at once, as a kill would, when name is armed (or
// sleeps, when armed with sleep:DURATION).
func (s Set) Hit(name string) {
	d, ok := s.armed[name]
	if !ok {
		return
	}
	if d > 0 {
		fmt.Fprintf(os.Stderr, "failpoint %s: sleeping %s as armed by %s\n", name, d, EnvVar)
		time.Sleep(d)
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint %s: exiting as armed by %s\n", name, EnvVar)
	s.exit(42)
}

// Fail returns an injected error while name, armed with fail:N, has
// failures left (N times in all), and nil otherwise.
func (s Set) Fail(name string) error {
	left, ok := s.fails[name]
	if !ok || *left <= 0 {
		return nil
	}
	*left--
	fmt.Fprintf(os.Stderr, "failpoint %s: failing as armed by %s (%d more)\n", name, EnvVar, *left)
	return fmt.Errorf("failpoint %s: injected failure", name)
}
