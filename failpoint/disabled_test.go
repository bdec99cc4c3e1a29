//go:build !failpoints

package failpoint

import "testing"

// TestProductionBuildIgnoresFailpoints: without the build tag, an armed
// name neither exits nor sleeps.
func TestProductionBuildIgnoresFailpoints(t *testing.T) {
	if Enabled {
		t.Fatal("a build without the failpoints tag says failpoints are enabled")
	}
	s := FromEnv("probe,flip-before-apply=sleep:1h")
	s.exit = func(int) { t.Fatal("a production build exited at a failpoint") }
	if len(s.armed) != 0 {
		t.Fatalf("a production build armed failpoints: %v", s.armed)
	}
	s.Hit("probe")
	s.Hit("flip-before-apply")
}
