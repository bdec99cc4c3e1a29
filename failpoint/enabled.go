//go:build failpoints

package failpoint

// This file is the failpoints themselves, compiled only into test builds.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Enabled says whether this build honours ADOPT_FAILPOINTS.
const Enabled = true

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
