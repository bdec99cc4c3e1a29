// Package failpoint lets tests kill the worker at a named step, to prove that
// an interrupted step resumes or rolls back. It is inert unless the worker is
// started with ADOPT_FAILPOINTS set; operators never set it.
package failpoint

import (
	"fmt"
	"os"
	"strings"
)

// EnvVar names the steps, comma-separated, at which the worker exits.
const EnvVar = "ADOPT_FAILPOINTS"

// Set is the set of armed failpoints. The zero value is inert.
type Set struct {
	armed map[string]bool
	exit  func(code int)
}

// FromEnv arms the failpoints named in value (usually os.Getenv(EnvVar)).
func FromEnv(value string) Set {
	s := Set{armed: map[string]bool{}, exit: os.Exit}
	for _, name := range strings.Split(value, ",") {
		if name = strings.TrimSpace(name); name != "" {
			s.armed[name] = true
		}
	}
	return s
}

// Hit exits the process at once, as a kill would, when name is armed.
func (s Set) Hit(name string) {
	if s.armed[name] {
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting as armed by %s\n", name, EnvVar)
		s.exit(42)
	}
}
