//go:build !failpoints

package failpoint

// This file is the production build's failpoints: none.

// Enabled says whether this build honours ADOPT_FAILPOINTS.
const Enabled = false

// FromEnv ignores value: a production build has no failpoints. The agent
// says so loudly when the variable is set (see the worker).
func FromEnv(string) Set { return Set{} }

// Hit does nothing in a production build.
func (Set) Hit(string) {}

// Fail never fails in a production build.
func (Set) Fail(string) error { return nil }
