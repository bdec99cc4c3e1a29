//go:build failpoints

package failpoint

// This file is the failpoints themselves, compiled only into test builds.

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Enabled says whether this build honours ADOPT_FAILPOINTS.
const Enabled = true

// FromEnv arms the failpoints named in value (usually os.Getenv(EnvVar)).
func FromEnv(value string) Set {
	s := Set{armed: map[string]time.Duration{}, exit: os.Exit}
	for _, item := range strings.Split(value, ",") {
		name, action, _ := strings.Cut(strings.TrimSpace(item), "=")
		if name == "" {
			continue
		}
		var d time.Duration
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
