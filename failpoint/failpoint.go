// Package failpoint lets tests kill the worker at a named step, to prove that
// an interrupted step resumes or rolls back. It works only in a binary built
// with the build tag `failpoints` (the tests build one); in a production
// build FromEnv ignores ADOPT_FAILPOINTS and Hit does nothing, so no
// environment variable can make a production agent exit or stall mid-step.
package failpoint

import "time"

// EnvVar names the steps, comma-separated, at which the worker exits
// ("probe"), or pauses ("flip-before-apply=sleep:3s") so a test can change
// the node in between, or fails the first N times ("watchdog-revert=fail:1",
// for steps that ask Fail).
const EnvVar = "ADOPT_FAILPOINTS"

// Tag is the build tag that compiles failpoints in.
const Tag = "failpoints"

// Set is the set of armed failpoints. The zero value is inert.
type Set struct {
	armed map[string]time.Duration // 0: exit; >0: sleep that long
	//lint:ignore U1000 read by Fail in builds with the failpoints tag
	fails map[string]*int // failures left, for Fail
	exit  func(code int)
}
